#pragma once
// The peers one process started itself and the subtrees beneath them: the
// doctor's roots of the launch tree, or a peer's children in it (docs/doctor.md,
// "Through the launch tree"). The same code on both sides: the doctor is the
// tree's top peer without a host of its own.
//
// Threading: one call at a time, each calling its children in parallel:
// route() from the calling thread when every link is a child process of
// ours (one poll over them all), else a thread per child, as start() and
// clocks() do; destruction closes every child's link in parallel, and each
// child closes its own: nothing is left on any host.
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "doctor/peer_link.h"
#include "doctor/tree_records.h"
#include "wire/helper_pool.h"

namespace dl::doctor {


// How a route's children are called, from how many requests each has
// (`counts`) and the route's at_once: in `order`, at most `slots` at once,
// child i given at_once[i] (0: all of its requests at once) and waited for
// wait_ms[i].
struct Pacing {
  std::vector<size_t> order;
  size_t slots = 0;
  std::vector<long> at_once, wait_ms;
};
Pacing pace_shares(const std::vector<size_t>& counts, long at_once, long timeout_ms);

class PeerFan {
 public:
  // `from`: the host this process runs on, "" for the doctor (errors of the
  // hosts it could not start say where they were started from).
  explicit PeerFan(std::string token, std::string from = "") : token_(std::move(token)), from_(std::move(from)) {}
  ~PeerFan();
  PeerFan(const PeerFan&) = delete;
  PeerFan& operator=(const PeerFan&) = delete;

  // Starts the subtree `below` (launch tree order, TreeNode::below) with
  // `how`: its top nodes become this process's children, each then sent its
  // own subtree (`tree`) with `sim` and `how`. A top node that cannot be
  // started or does not answer its `tree` is an error, and the top nodes of
  // its subtree become this process's children in turn, so one dead host
  // costs the hosts beneath it nothing. Returns every node left without a
  // peer, its error naming the host. May be called again (the doctor starts
  // its own host's peer apart). Throws RemoteError for a malformed `below`.
  std::vector<NodeError> start(std::vector<TreeNode> below, const StartHow& how, bool sim);

  // Every answer of the nodes beneath to `r` (calls for nodes that are not
  // beneath answered by an error), answers of the same text merged. Each
  // child gets kHop less than `r.timeout_ms` and is waited for that long:
  // a level below answers before the level above gives up on it. A child
  // that does not answer in time, or whose link fails, is lost, and so is
  // every node beneath it, from then on.
  // (By value: its calls are moved into the children's shares, not copied:
  // a thousand hosts' link tests are a call each per round.)
  // With r.at_once, at most that many of its requests run at once beneath
  // (each child given its share of them, or the children called in turn),
  // and a child is waited for a timeout per turn of its requests.
  std::vector<RouteAnswer> route(RouteRequest r);

  // The clock of every node beneath, against this process's.
  std::vector<ClockNote> clocks();

  // Whether `node` has a live peer beneath.
  bool reaches(int node) const { return via_.count(node) > 0; }
  // How many peers this process started and holds (its direct links).
  size_t children() const { return children_.size(); }

 private:
  struct Child {
    TreeNode node;
    std::unique_ptr<PeerLink> link;
    std::vector<int> nodes;  // it and every node with a peer beneath it
    std::string lost;        // why its link failed, once it did
  };
  static constexpr long kHopMs = 2000;
  // route() when every busy child's link is pollable: each child's `share`
  // sent as `pace` says, then every reply read from this thread, into
  // `got`; a child that fails or does not answer in time is `lose`d.
  void route_polled(const Pacing& pace, const std::vector<RouteRequest>& share, std::vector<std::vector<RouteAnswer>>& got,
                    const std::function<void(size_t, const std::string&)>& lose);
  std::string token_, from_;
  std::vector<Child> children_;
  // Threads kept for the calls (wire/helper_pool.h): a thousand hosts'
  // clocks, and routes over libssh channels, cost the doctor a thread per
  // child per call, and creating threads was most of its CPU. Every
  // child's share runs at once.
  wire::HelperPool pool_{std::numeric_limits<size_t>::max()};
  std::map<int, size_t> via_;  // node -> the child it is (or is beneath)
  std::map<int, std::string> names_;  // node -> its name, for errors
};

// Adds to `got` (a child's reply) an error answer, why(node), for each node
// `asked` names that `got` does not (a peer of another version, or a bug
// there): every node asked of a route gets an answer.
void answer_unanswered(const RouteRequest& asked, std::vector<RouteAnswer>& got, const std::function<std::string(int)>& why);

// Merges answers of the same line and error into one.
std::vector<RouteAnswer> merge_answers(std::vector<RouteAnswer> answers);

// A typed reply of one node, or why there is none.
template <class Reply> struct Outcome {
  std::optional<Reply> reply;
  std::string error;
};

// Each node's answer decoded, each distinct line once.
template <class Reply> std::map<int, Outcome<Reply>> decode_answers(const std::vector<RouteAnswer>& answers, const std::string& op) {
  std::map<int, Outcome<Reply>> out;
  for (const auto& a : answers) {
    Outcome<Reply> o;
    o.error = a.error;
    if (o.error.empty()) {
      try {
        o.reply = wire::decode_record<Reply>(a.line, {"the doctor's peers' reply to '" + op + "'"});
      } catch (const std::exception& e) {
        o.error = std::string(e.what()) + " (is dlaunch there the same version?)";
      }
    }
    for (int n : a.nodes) out[n] = o;
  }
  return out;
}

// Sends `request` to each node of `nodes` through `fan` and decodes the
// replies, each distinct reply text once. By node.
template <class Reply, class Request>
std::map<int, Outcome<Reply>> ask_every(PeerFan& fan, const std::vector<int>& nodes, const Request& request, Millis timeout) {
  RouteRequest r;
  r.every = PeerLink::request_line(request);
  r.nodes = nodes;
  r.timeout_ms = timeout.count();
  return decode_answers<Reply>(fan.route(std::move(r)), Request::kOp);
}

// Sends each node its own request through `fan`. By node.
// At most `at_once` of them run at once (0: all), paced in the tree.
template <class Reply, class Request>
std::map<int, Outcome<Reply>> ask_each(PeerFan& fan, const std::vector<std::pair<int, Request>>& calls, Millis timeout,
                                       long at_once = 0) {
  RouteRequest r;
  for (const auto& [node, req] : calls) r.calls.push_back({node, PeerLink::request_line(req)});
  r.timeout_ms = timeout.count();
  r.at_once = at_once;
  return decode_answers<Reply>(fan.route(std::move(r)), Request::kOp);
}

}  // namespace dl::doctor
