#include "control/messages.h"

#include <type_traits>
#include <variant>

#include "wire/frame.h"
#include "wire/record.h"

namespace dl::control {

namespace {

// The JSON is the record codec's (wire/record.h, docs/wire-protocol.md,
// "Encoding"): written and read straight from and into the structs, with no
// document tree on the launch path.

[[noreturn]] void raise_protocol(const std::string& what) { throw ProtocolError(what); }

template <class T> struct is_variant : std::false_type {};
template <class... T> struct is_variant<std::variant<T...>> : std::true_type {};

// Whether `t` names a message of Variant (or of a group nested in it).
template <class Variant, size_t I = 0> bool names_message(const std::string& t) {
  if constexpr (I == std::variant_size_v<Variant>) {
    return false;
  } else {
    using M = std::variant_alternative_t<I, Variant>;
    if constexpr (is_variant<M>::value) {
      if (names_message<M>(t)) return true;
    } else {
      if (t == M::kType) return true;
    }
    return names_message<Variant, I + 1>(t);
  }
}

// Picks the alternative of Variant whose kType is `t`, or the nested group
// (MpiUp, MpiDown) that holds it.
template <class Variant, size_t I = 0>
Variant decode_variant(const std::string& t, std::string_view text, const char* from) {
  if constexpr (I == std::variant_size_v<Variant>) {
    throw ProtocolError("unknown control message '" + t + "' from the " + from);
  } else {
    using M = std::variant_alternative_t<I, Variant>;
    if constexpr (is_variant<M>::value) {
      if (!names_message<M>(t)) return decode_variant<Variant, I + 1>(t, text, from);
      return Variant(decode_variant<M>(t, text, from));
    } else {
      if (t != M::kType) return decode_variant<Variant, I + 1>(t, text, from);
      M m{};
      const wire::RecordName name{"'" + std::string(M::kType) + "' message", &raise_protocol};
      wire::read_checked_record(text, name, m);  // its "t" is a member no field has: skipped
      return Variant(std::move(m));
    }
  }
}

template <class Variant> Variant decode(std::string_view text, const char* from) {
  const wire::RecordName who{"a control message from the " + std::string(from), &raise_protocol};
  const std::optional<std::string> type = wire::check_object(text, who, "t");
  if (!type) throw ProtocolError(who.label + " has no type (field 't')");
  return decode_variant<Variant>(*type, text, from);
}

// ---- the reference text ----------------------------------------------------

// One line per message of Variant, the messages of a nested group in its place.
template <class Variant, size_t I = 0> void reference_lines(std::string& out, const char* direction) {
  if constexpr (I < std::variant_size_v<Variant>) {
    using M = std::variant_alternative_t<I, Variant>;
    if constexpr (is_variant<M>::value) reference_lines<M>(out, direction);
    else out += std::string(direction) + "  " + M::kType + "  " + wire::field_list<M>() + "\n";
    reference_lines<Variant, I + 1>(out, direction);
  }
}

template <class M> std::string nested_line(const char* name) { return std::string("  ") + name + "  " + wire::field_list<M>() + "\n"; }

}  // namespace

template <class M> std::string encode(const M& m) {
  std::string out = "{\"t\":";
  wire::append_json_string(out, M::kType);
  wire::append_fields(out, m, false);
  out += '}';
  return out;
}

template <class M> std::string frame(const M& m) { return wire::encode_frame(wire::kJson, encode(m)); }

#define DL_CONTROL_MESSAGE(M)                       \
  template std::string encode<msg::M>(const msg::M&); \
  template std::string frame<msg::M>(const msg::M&);
DL_CONTROL_MESSAGE(Hello)
DL_CONTROL_MESSAGE(Started)
DL_CONTROL_MESSAGE(StartedBelow)
DL_CONTROL_MESSAGE(ExitedClean)
DL_CONTROL_MESSAGE(Exited)
DL_CONTROL_MESSAGE(SpawnFailed)
DL_CONTROL_MESSAGE(MpiAbort)
DL_CONTROL_MESSAGE(MpiRefused)
DL_CONTROL_MESSAGE(Heartbeat)
DL_CONTROL_MESSAGE(Launch)
DL_CONTROL_MESSAGE(LaunchEnv)
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
DL_CONTROL_MESSAGE(Health)
DL_CONTROL_MESSAGE(HealthCheck)
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
DL_CONTROL_MESSAGE(AgentFailed)
DL_CONTROL_MESSAGE(AgentLost)
DL_CONTROL_MESSAGE(StartAgents)
DL_CONTROL_MESSAGE(MpiMap)
#undef DL_CONTROL_MESSAGE

std::string encode(const MpiUp& m) {
  return std::visit([](const auto& x) { return encode(x); }, m);
}
std::string encode(const MpiDown& m) {
  return std::visit([](const auto& x) { return encode(x); }, m);
}
std::string frame(const MpiUp& m) { return wire::encode_frame(wire::kJson, encode(m)); }
std::string frame(const MpiDown& m) { return wire::encode_frame(wire::kJson, encode(m)); }

const char* serve_word(MpiServe s) {
  switch (s) {
    case MpiServe::kPmix: return "pmix";
    case MpiServe::kPmi: return "pmi";
    case MpiServe::kPmixAndPmi: return "pmix,pmi";
    case MpiServe::kRefuse: return "refuse";
  }
  return "pmix";
}

MpiServe msg::MpiSection::served() const {
  for (MpiServe s : {MpiServe::kPmix, MpiServe::kPmi, MpiServe::kPmixAndPmi, MpiServe::kRefuse})
    if (serve == serve_word(s)) return s;
  throw ProtocolError("'launch' message: field 'mpi.serve' is '" + serve + "', which is none of pmix, pmi, pmix,pmi and refuse");
}

const char* connect_op_word(ConnectOp op) {
  switch (op) {
    case ConnectOp::kConnect: return "connect";
    case ConnectOp::kDisconnect: return "disconnect";
    case ConnectOp::kFence: return "fence";
  }
  return "connect";
}

ConnectOp msg::MpiConnect::connect_op() const {
  for (ConnectOp o : {ConnectOp::kConnect, ConnectOp::kDisconnect, ConnectOp::kFence})
    if (op == connect_op_word(o)) return o;
  throw ProtocolError("'mpi_connect' message: field 'op' is '" + op + "', which this launcher does not know (connect, "
                      "disconnect or fence)");
}

FromAgent decode_from_agent(std::string_view text) { return decode<FromAgent>(text, "agent"); }
FromLauncher decode_from_launcher(std::string_view text) { return decode<FromLauncher>(text, "launcher"); }

std::string protocol_reference() {
  std::string out;
  reference_lines<FromAgent>(out, "agent -> launcher");
  reference_lines<FromLauncher>(out, "launcher -> agent");
  out += "nested:\n";
  out += nested_line<msg::CpuReport>("cpu");
  out += nested_line<msg::RankSpec>("ranks[]");
  out += nested_line<msg::RankIdentity>("identity");
  out += nested_line<msg::MpiSection>("mpi");
  out += nested_line<msg::SpawnApp>("apps[]");
  out += nested_line<msg::PublishedName>("names[]");
  out += nested_line<msg::RankStack>("stacks.ranks[]");
  out += nested_line<msg::TreeAgent>("agents[]");
  out += nested_line<msg::ProgramProbe>("programs[]");
  return out;
}

}  // namespace dl::control
