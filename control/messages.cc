#include "control/messages.h"

#include "wire/frame.h"
#include "wire/record.h"

namespace dl::control {

namespace {

// The JSON is the record codec's (wire/record.h, docs/wire-protocol.md,
// "Encoding"): written and read straight from and into the structs, with no
// document tree on the launch path.

[[noreturn]] void raise_protocol(const std::string& what) { throw ProtocolError(what); }

// Picks the alternative of Variant whose kType is `t`.
template <class Variant, size_t I = 0>
Variant decode_variant(const std::string& t, std::string_view text, const char* from) {
  if constexpr (I == std::variant_size_v<Variant>) {
    throw ProtocolError("unknown control message '" + t + "' from the " + from);
  } else {
    using M = std::variant_alternative_t<I, Variant>;
    if (t != M::kType) return decode_variant<Variant, I + 1>(t, text, from);
    M m{};
    const wire::RecordName name{"'" + std::string(M::kType) + "' message", &raise_protocol};
    wire::read_checked_record(text, name, m);  // its "t" is a member no field has: skipped
    return Variant(std::move(m));
  }
}

template <class Variant> Variant decode(std::string_view text, const char* from) {
  const wire::RecordName who{"a control message from the " + std::string(from), &raise_protocol};
  const std::optional<std::string> type = wire::check_object(text, who, "t");
  if (!type) throw ProtocolError(who.label + " has no type (field 't')");
  return decode_variant<Variant>(*type, text, from);
}

// ---- the reference text ----------------------------------------------------

template <class Variant, size_t... I>
std::string reference_lines(const char* direction, std::index_sequence<I...>) {
  std::string out;
  ((out += std::string(direction) + "  " + std::variant_alternative_t<I, Variant>::kType + "  " +
           wire::field_list<std::variant_alternative_t<I, Variant>>() + "\n"),
   ...);
  return out;
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
DL_CONTROL_MESSAGE(Exited)
DL_CONTROL_MESSAGE(SpawnFailed)
DL_CONTROL_MESSAGE(MpiAbort)
DL_CONTROL_MESSAGE(MpiRefused)
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
