#pragma once
// `dlaunch doctor --peer`: the doctor's remote side (one per host). Reads
// the token as its first stdin line, then one JSON request per line and
// answers each with one JSON line on stdout (the records of records.h):
//
//   {"op":"facts",...}                        facts.h
//   {"op":"clock"}                         -> {"time_ns": wall clock}
//   {"op":"listen","name":"h1"}            -> {"endpoints":[{"ifname","addr","port"}]}
//   {"op":"probe","timeout_ms":N,"targets":[{"name","ifname","addr","port"}]}
//                                          -> {"results":[{"ok","error","ms"}]} (in target order)
//   {"op":"link","addr","port","seconds","pings","timeout_ms"}
//                                          -> {"latency_us","out_Bps","in_Bps"}
//
// A request that fails gets {"error": "..."}. EOF on stdin (the doctor is
// gone, or its ssh session closed) ends the peer and everything it started.
namespace dl::doctor {

int run_peer();

}  // namespace dl::doctor
