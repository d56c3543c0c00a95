#pragma once
// PMIx_Connect / PMIx_Disconnect across hosts (MPI_Comm_spawn,
// MPI_Comm_connect/accept, MPI_Comm_disconnect): each host's PMIx server asks
// once its own participants called; once every host that holds one of the
// processes asked for the same set, every one of them is answered, in one
// round. A set not complete within the timeout fails on the hosts that
// asked, naming the hosts that did not.
//
// Threading: the launcher's io_context thread only.
#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "control/messages.h"

namespace dl::launcher {

class ConnectRelay {
 public:
  struct Hooks {
    // Answer node's request `id` (error "" = done; blob: every host's, in
    // node order, hex).
    std::function<void(int node, uint64_t id, const std::string& blob, const std::string& error)> answer;
    // A set did not complete: `what` names it, `missing` the nodes not heard from.
    std::function<void(const std::string& what, const std::vector<int>& missing)> timed_out;
  };
  ConnectRelay(boost::asio::io_context& io, std::chrono::milliseconds timeout, Hooks hooks);
  ~ConnectRelay();

  // Node `node` asks for `m`; `nodes` are the nodes that hold any of m.procs
  // (node itself among them). Answers every asker when the last one asks.
  void join(int node, const control::msg::MpiConnect& m, const std::vector<int>& nodes);
  size_t pending() const { return sets_.size(); }

  // "connect of dl-x:*, dl-x.spawn1:*" ("fence of ..."): a set's name for messages.
  static std::string describe(const control::msg::MpiConnect& m);

 private:
  struct Set {
    std::string what;
    std::set<int> expected;
    std::map<int, uint64_t> asked;  // node -> its request id
    std::map<int, std::string> blobs;
    std::unique_ptr<boost::asio::steady_timer> timer;
  };
  void expire(const std::string& key);

  boost::asio::io_context& io_;
  std::chrono::milliseconds timeout_;
  Hooks hooks_;
  std::map<std::string, Set> sets_;  // by sorted procs and kind
};

}  // namespace dl::launcher
