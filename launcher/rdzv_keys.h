#pragma once
// Per-node mode's schema at the store (launcher/node_group.h): every key
// the nodes read or write, built here and nowhere else. All live under
// "dlaunch/rdzv/<id>/" (the --rdzv-id, so that one store serves several
// jobs):
//   nnodes              the first node's --nnodes; a node that disagrees is refused
//   node/K              node K's record (NodeRecord: host, address, ranks, pid): claims rank K
//   arrived             a counter, for the progress line
//   job_id              the first proposal wins (compare_set)
//   failed              attempt 0's first failure (FailedRecord: code, verdict):
//                       every node tears down
//   failed/K            attempt K's (--max-restarts), K > 0
//   restart/K/ready/R   node R's attempt K ended and it is ready for the next
//   restart/K/port      node 0, once every node is ready: the next MASTER_PORT
//   restart/K/abandon   a node that will not restart says why: the others stop
//   hb/K                node K's heartbeat counter, "left" once it has finished
//   done                how many nodes have finished; the store's host waits for all
// Pure.
#include <string>
#include <vector>

namespace dl::launcher {

class RdzvKeys {
 public:
  RdzvKeys() = default;
  explicit RdzvKeys(const std::string& id) : prefix_("dlaunch/rdzv/" + id + "/") {}

  std::string nnodes() const { return prefix_ + "nnodes"; }
  std::string node(int k) const { return prefix_ + "node/" + std::to_string(k); }
  // node(0) .. node(nnodes - 1).
  std::vector<std::string> nodes(int nnodes) const {
    std::vector<std::string> out;
    for (int k = 0; k < nnodes; ++k) out.push_back(node(k));
    return out;
  }
  std::string arrived() const { return prefix_ + "arrived"; }
  std::string job_id() const { return prefix_ + "job_id"; }
  std::string failed(int attempt) const {
    return attempt == 0 ? prefix_ + "failed" : prefix_ + "failed/" + std::to_string(attempt);
  }
  std::string ready(int attempt, int node) const { return restart(attempt) + "ready/" + std::to_string(node); }
  // ready(attempt, 0) .. ready(attempt, nnodes - 1).
  std::vector<std::string> ready_all(int attempt, int nnodes) const {
    std::vector<std::string> out;
    for (int k = 0; k < nnodes; ++k) out.push_back(ready(attempt, k));
    return out;
  }
  std::string restart_port(int attempt) const { return restart(attempt) + "port"; }
  std::string abandon(int attempt) const { return restart(attempt) + "abandon"; }
  std::string heartbeat(int node) const { return prefix_ + "hb/" + std::to_string(node); }
  std::string done() const { return prefix_ + "done"; }

 private:
  std::string restart(int attempt) const { return prefix_ + "restart/" + std::to_string(attempt) + "/"; }
  std::string prefix_;
};

}  // namespace dl::launcher
