#pragma once
// The job's membership changes as --report-json lists them ("membership":
// docs/failures.md has the schema). Made by the Job (launcher/attempts.h
// keeps them), written by the stack report's JSON (launcher/stacks).
#include <string>
#include <vector>

namespace dl::launcher {

// One change of the job's hosts, as --report-json lists it ("membership",
// docs/failures.md): `attempt` is the attempt that first runs with it (the
// one being prepared), or, for a spare lost while ranks run, the attempt it
// was lost during; `at_s` the seconds since the job started.
struct MembershipChange {
  int attempt = 1;
  double at_s = 0;
  // moved: a seat went from `host` to the spare `to_host`; shrunk: `host`
  // left the job with no spare for it (--min-hosts); new_agent: `host` keeps
  // its seat and gets a new agent (started by `to_host`, "dlaunch" or the
  // agent above it in the launch tree, for a host lost with the agent that
  // relayed for it; "" for a host started again itself); lost_spare: a spare
  // that holds no ranks was lost; returned: a lost host passed the health
  // gate again after its cooldown (--return-cooldown) and is a free spare;
  // grew: the spare `host` took a new seat in a shrunk world, with `ranks`.
  std::string kind;
  std::string host, why;
  std::vector<int> ranks;  // the global ranks it held (before a shrink numbers the world again)
  std::string to_host;
  template <class S, class V> static void fields(S& s, V& v) {
    v("attempt", s.attempt), v("at_s", s.at_s), v("kind", s.kind), v("host", s.host), v("why", s.why);
    v("ranks", s.ranks), v("to_host", s.to_host);
  }
};

}  // namespace dl::launcher
