#include "control/messages.h"

#include <limits>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "wire/frame.h"

namespace dl::control {

using json = nlohmann::json;

namespace {

template <class T> struct is_optional : std::false_type {};
template <class T> struct is_optional<std::optional<T>> : std::true_type {};
template <class T> struct is_vector : std::false_type {};
template <class T> struct is_vector<std::vector<T>> : std::true_type {};

// ---- encoding --------------------------------------------------------------

template <class T> json to_value(const T& v);

struct Encoder {
  json& out;
  template <class T> void operator()(const char* name, const T& v) {
    if constexpr (is_optional<T>::value) {
      if (v) out[name] = to_value(*v);
    } else {
      out[name] = to_value(v);
    }
  }
};

template <class T> json to_value(const T& v) {
  if constexpr (is_vector<T>::value) {
    json a = json::array();
    for (const auto& x : v) a.push_back(to_value(x));
    return a;
  } else if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::string> && !std::is_same_v<T, EnvVars>) {
    json o = json::object();
    Encoder e{o};
    T::fields(v, e);
    return o;
  } else {
    return json(v);
  }
}

// ---- decoding --------------------------------------------------------------

const char* kind_of(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a fractional number";
    default: return "an integer";
  }
}

struct Context {
  const char* message;  // "exited"
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw ProtocolError("'" + std::string(message) + "' message: field '" + path + "' " + what);
  }
  [[noreturn]] void wrong(const std::string& path, const json& j, const char* expected) const {
    fail(path, std::string("is ") + kind_of(j) + ", expected " + expected);
  }
};

template <class T> void from_value(const Context& c, const std::string& path, const json& j, T& out);

struct Decoder {
  const Context& c;
  const std::string& prefix;  // "" at the top, "ranks[2]." inside
  const json& obj;
  template <class T> void operator()(const char* name, T& field) {
    const std::string path = prefix + name;
    auto it = obj.find(name);
    if constexpr (is_optional<T>::value) {
      if (it == obj.end() || it->is_null()) {
        field.reset();
        return;
      }
      typename T::value_type v{};
      from_value(c, path, *it, v);
      field = std::move(v);
    } else {
      if (it == obj.end()) c.fail(path, "is missing");
      from_value(c, path, *it, field);
    }
  }
};

template <class T> void from_value(const Context& c, const std::string& path, const json& j, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) c.wrong(path, j, "a boolean");
    out = j.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!j.is_number_integer()) c.wrong(path, j, "an integer");
    if constexpr (std::is_unsigned_v<T>) {
      if (!j.is_number_unsigned()) c.fail(path, "is negative, expected an unsigned integer");
      const auto v = j.get<uint64_t>();
      if (v > std::numeric_limits<T>::max()) c.fail(path, "is out of range");
      out = static_cast<T>(v);
    } else {
      if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        c.fail(path, "is out of range");
      const auto v = j.get<int64_t>();
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) c.fail(path, "is out of range");
      out = static_cast<T>(v);
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) c.wrong(path, j, "a string");
    out = j.get<std::string>();
  } else if constexpr (std::is_same_v<T, EnvVars>) {
    if (!j.is_object()) c.wrong(path, j, "an object of strings");
    out.clear();
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.value().is_string()) c.wrong(path + "." + it.key(), it.value(), "a string");
      out.emplace(it.key(), it.value().template get<std::string>());
    }
  } else if constexpr (is_vector<T>::value) {
    if (!j.is_array()) c.wrong(path, j, "an array");
    out.clear();
    out.resize(j.size());
    for (size_t i = 0; i < j.size(); ++i) from_value(c, path + "[" + std::to_string(i) + "]", j[i], out[i]);
  } else {
    if (!j.is_object()) c.wrong(path, j, "an object");
    const std::string prefix = path + ".";
    Decoder d{c, prefix, j};
    T::fields(out, d);
  }
}

template <class M> M decode_as(const json& j) {
  M m{};
  const Context c{M::kType};
  const std::string top;
  Decoder d{c, top, j};
  M::fields(m, d);
  return m;
}

// Picks the alternative of Variant whose kType is `t`.
template <class Variant, size_t I = 0> Variant decode_variant(const std::string& t, const json& j, const char* from) {
  if constexpr (I == std::variant_size_v<Variant>) {
    throw ProtocolError("unknown control message '" + t + "' from the " + from);
  } else {
    using M = std::variant_alternative_t<I, Variant>;
    if (t == M::kType) return Variant(decode_as<M>(j));
    return decode_variant<Variant, I + 1>(t, j, from);
  }
}

template <class Variant> Variant decode(std::string_view text, const char* from) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ProtocolError("a control message from the " + std::string(from) + " is not valid JSON");
  if (!j.is_object()) throw ProtocolError("a control message from the " + std::string(from) + " is not a JSON object");
  auto t = j.find("t");
  if (t == j.end() || !t->is_string())
    throw ProtocolError("a control message from the " + std::string(from) + " has no type (field 't')");
  return decode_variant<Variant>(t->get<std::string>(), j, from);
}

// ---- the reference text ----------------------------------------------------

struct Lister {
  std::string out;
  template <class T> void operator()(const char* name, const T&) {
    out += (out.empty() ? "" : ", ") + std::string(name) + (is_optional<T>::value ? "?" : "");
  }
};

template <class M> std::string field_list() {
  Lister l;
  M m{};
  M::fields(m, l);
  return "{" + l.out + "}";
}

template <class Variant, size_t... I>
std::string reference_lines(const char* direction, std::index_sequence<I...>) {
  std::string out;
  ((out += std::string(direction) + "  " + std::variant_alternative_t<I, Variant>::kType + "  " +
           field_list<std::variant_alternative_t<I, Variant>>() + "\n"),
   ...);
  return out;
}

template <class M> std::string nested_line(const char* name) { return std::string("  ") + name + "  " + field_list<M>() + "\n"; }

}  // namespace

template <class M> std::string encode(const M& m) {
  json o = json::object();
  o["t"] = M::kType;
  Encoder e{o};
  M::fields(m, e);
  return o.dump();
}

template <class M> std::string frame(const M& m) { return wire::encode_frame(wire::kJson, encode(m)); }

#define DL_CONTROL_MESSAGE(M)                       \
  template std::string encode<msg::M>(const msg::M&); \
  template std::string frame<msg::M>(const msg::M&);
DL_CONTROL_MESSAGE(Hello)
DL_CONTROL_MESSAGE(Started)
DL_CONTROL_MESSAGE(Exited)
DL_CONTROL_MESSAGE(SpawnFailed)
DL_CONTROL_MESSAGE(MpiAbort)
DL_CONTROL_MESSAGE(Heartbeat)
DL_CONTROL_MESSAGE(Launch)
DL_CONTROL_MESSAGE(FenceFailed)
DL_CONTROL_MESSAGE(Signal)
DL_CONTROL_MESSAGE(Kill)
DL_CONTROL_MESSAGE(StdinEof)
DL_CONTROL_MESSAGE(Bye)
DL_CONTROL_MESSAGE(SpawnRequest)
DL_CONTROL_MESSAGE(SpawnReply)
DL_CONTROL_MESSAGE(Stacks)
DL_CONTROL_MESSAGE(DumpStacks)
DL_CONTROL_MESSAGE(Ready)
DL_CONTROL_MESSAGE(Restart)
DL_CONTROL_MESSAGE(MpiPublish)
DL_CONTROL_MESSAGE(MpiLookup)
DL_CONTROL_MESSAGE(MpiUnpublish)
DL_CONTROL_MESSAGE(SpawnLaunch)
DL_CONTROL_MESSAGE(MpiLookupReply)
DL_CONTROL_MESSAGE(MpiConnect)
DL_CONTROL_MESSAGE(SpawnKnown)
DL_CONTROL_MESSAGE(MpiDmodex)
DL_CONTROL_MESSAGE(MpiDmodexData)
DL_CONTROL_MESSAGE(MpiConnectDone)
DL_CONTROL_MESSAGE(MpiDmodexServe)
DL_CONTROL_MESSAGE(MpiDmodexReply)
#undef DL_CONTROL_MESSAGE

FromAgent decode_from_agent(std::string_view text) { return decode<FromAgent>(text, "agent"); }
FromLauncher decode_from_launcher(std::string_view text) { return decode<FromLauncher>(text, "launcher"); }

std::string protocol_reference() {
  std::string out = reference_lines<FromAgent>("agent -> launcher",
                                               std::make_index_sequence<std::variant_size_v<FromAgent>>{});
  out += reference_lines<FromLauncher>("launcher -> agent",
                                       std::make_index_sequence<std::variant_size_v<FromLauncher>>{});
  out += "nested:\n";
  out += nested_line<msg::CpuReport>("cpu");
  out += nested_line<msg::RankSpec>("ranks[]");
  out += nested_line<msg::MpiSection>("mpi");
  out += nested_line<msg::SpawnApp>("apps[]");
  out += nested_line<msg::PublishedName>("names[]");
  out += nested_line<msg::RankStack>("stacks.ranks[]");
  return out;
}

}  // namespace dl::control
