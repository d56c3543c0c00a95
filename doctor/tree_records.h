#pragma once
// The records of the doctor's launch tree (docs/doctor.md, "Through the
// launch tree"): how a peer is told its place and the subtree it starts
// (`tree`), how a request reaches the peers beneath one (`route`) and how
// their clocks are read (`clocks`). Each is a wire record (wire/record.h),
// its JSON names written once, in its fields().
#include <cstdint>
#include <string>
#include <vector>

namespace dl::doctor {

// One host of a subtree, in the launch tree's order (launcher/launch_tree.h):
// each node followed by the `below` nodes of its own subtree.
struct TreeNode {
  int node = 0;      // its index in the doctor's host list
  std::string name;  // as the hostfile names it (messages, "who")
  std::string host, user;
  uint16_t port = 0;
  int below = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v("node", s.node), v("name", s.name), v("host", s.host), v("user", s.user), v("port", s.port), v("below", s.below);
  }
};

// How a peer starts the peers of its subtree: the doctor's start method and
// its options (the token is never here: each child gets it on its stdin).
struct StartHow {
  std::string method;  // "libssh", "ssh", "sim"
  std::string exe;     // the dlaunch a child runs ("--prefix DIR/bin/dlaunch", or the doctor's own path)
  std::string ssh_config;
  long ssh_timeout_ms = 10000;
  bool ssh_accept_new = false;
  int ssh_parallel = 32;
  template <class S, class V> static void fields(S& s, V& v) {
    v("method", s.method), v("exe", s.exe), v("ssh_config", s.ssh_config), v("ssh_timeout_ms", s.ssh_timeout_ms);
    v("ssh_accept_new", s.ssh_accept_new), v("ssh_parallel", s.ssh_parallel);
  }
};

// A node that could not be started, or whose peer was lost.
struct NodeError {
  int node = 0;
  std::string error;     // one line naming the host
  bool reached = false;  // it was reached (ssh worked), but its peer did not answer (no dlaunch there)
  template <class S, class V> static void fields(S& s, V& v) { v("node", s.node), v("error", s.error), v("reached", s.reached); }
};

// The first request every peer gets: who it is, and the subtree beneath it
// to start. A simulated host's peer (`sim`, the test bed) listens and
// connects on its own loopback address and reports `self.name` as its host
// name. Answered once every peer beneath has answered its own.
struct TreeRequest {
  static constexpr const char* kOp = "tree";
  TreeNode self;
  bool sim = false;
  StartHow how;
  std::vector<TreeNode> below;
  template <class S, class V> static void fields(S& s, V& v) {
    v("self", s.self), v("sim", s.sim), v("how", s.how), v("below", s.below);
  }
};
struct TreeReply {
  std::vector<NodeError> failed;  // every node beneath that has no peer
  template <class S, class V> static void fields(S& s, V& v) { v("failed", s.failed); }
};

// Requests for nodes of a subtree: `calls` each for one node, and `every`
// (when not "") for each node of `nodes`; each is a request line of
// peer.h. Every node's answer comes back, answers with the same text merged.
struct RouteCall {
  int node = 0;
  std::string line;
  template <class S, class V> static void fields(S& s, V& v) { v("node", s.node), v("line", s.line); }
};
struct RouteRequest {
  static constexpr const char* kOp = "route";
  std::vector<RouteCall> calls;
  std::string every;
  std::vector<int> nodes;
  long timeout_ms = 30000;  // for each request, at the node that runs it
  // At most this many of the requests run at once in the subtree (0: all
  // of them): the test bed's link tests, which share one machine's cores,
  // paced where they run instead of by the doctor in a route per batch.
  long at_once = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v("calls", s.calls), v("every", s.every), v("nodes", s.nodes), v("timeout_ms", s.timeout_ms), v("at_once", s.at_once);
  }
};
// The nodes that answered `line` (their reply), or failed with `error`.
struct RouteAnswer {
  std::vector<int> nodes;
  std::string line, error;
  template <class S, class V> static void fields(S& s, V& v) { v("nodes", s.nodes), v("line", s.line), v("error", s.error); }
};
struct RouteReply {
  std::vector<RouteAnswer> answers;
  template <class S, class V> static void fields(S& s, V& v) { v("answers", s.answers); }
};

// Each node's clock beneath a peer, against that peer's: every parent reads
// its children's clocks (the exchange with the shortest round trip of
// three), and a node's offset is the sum along its path.
struct ClocksRequest {
  static constexpr const char* kOp = "clocks";
  template <class S, class V> static void fields(S&, V&) {}
};
struct ClockNote {
  int node = 0;
  int64_t offset_ns = 0;  // its clock minus the asker's
  double rtt_us = 0;      // the round trip from its parent
  std::string error;      // "" when read
  template <class S, class V> static void fields(S& s, V& v) {
    v("node", s.node), v("offset_ns", s.offset_ns), v("rtt_us", s.rtt_us), v("error", s.error);
  }
};
struct ClocksReply {
  std::vector<ClockNote> clocks;
  template <class S, class V> static void fields(S& s, V& v) { v("clocks", s.clocks); }
};

}  // namespace dl::doctor
