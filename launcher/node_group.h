#pragma once
// Per-node mode (torchrun's shape, for batch systems): one dlaunch per node,
// started by srun, mpirun or by hand, each starting only its own node's
// ranks. The nodes meet at a store: node rank 0 hosts it when the rendezvous
// endpoint is one of its own addresses, else a `dlaunch store` serves it.
//
// At the store (every key under "dlaunch/rdzv/<id>/"):
//   nnodes     the first node's --nnodes; a node that disagrees is refused
//   node/K     node K's record (host, address, ranks, pid): claims rank K
//   arrived    a counter, for the progress line
//   job_id     the first proposal wins (compare_set)
//   failed     the first failure, {"code", "verdict"}: every node tears down
//   hb/K       node K's heartbeat counter, "left" once it has finished
//   done       how many nodes have finished; the store's host waits for all
// Every connection passes the job-token handshake; the token comes from
// --token-file or DLAUNCH_TOKEN, never from the command line.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hostfiles/placement.h"
#include "launcher/options.h"
#include "rendezvous/bootstrap.h"

namespace dl::rdzv {
class TcpStore;
class BackgroundStoreServer;
}  // namespace dl::rdzv

namespace dl::launcher {

// Where the nodes meet and who this node is, from the options and (for
// --rdzv env) the environment srun, mpirun or a PMI launcher set. Pure.
struct RdzvTarget {
  std::string host;    // the store's host, as every node reaches it
  uint16_t port = 0;
  int nnodes = 0;
  int node_rank = 0;
  std::string id;      // names the job at the store
  std::string source;  // "--rdzv" or the environment's launcher ("Slurm", ...)
};
// Throws UsageError naming the variable or option at fault.
RdzvTarget rdzv_target(const RunOptions& o, const rdzv::Environment& env);

// One node as it announced itself.
struct NodeRecord {
  int node_rank = 0;
  std::string host;   // gethostname()
  std::string addr;   // its address as the other nodes reach it
  int nproc = 1;      // ranks it runs
  int master_port = 0;  // node 0 only: a free port for MASTER_PORT
  int pid = 0;
};
std::string to_json(const NodeRecord& r);
NodeRecord node_record_from_json(const std::string& s);

// The world's placement: node K's ranks follow node K-1's (pure).
hostfiles::Placement world_placement(const std::vector<NodeRecord>& nodes);

class NodeGroup {
 public:
  // Meets the other nodes; prints the progress line on a terminal. Throws
  // UsageError for a conflicting node, TimeoutError naming the node ranks that
  // never arrived (after telling the nodes that did), IoError when the store
  // cannot be reached.
  static std::unique_ptr<NodeGroup> join(const RunOptions& o, const RdzvTarget& t, const std::string& token);
  ~NodeGroup();

  const std::vector<NodeRecord>& nodes() const { return nodes_; }
  const RdzvTarget& target() const { return target_; }
  const std::string& job_id() const { return job_id_; }
  std::string store_addr() const;  // host:port for the ranks' DLAUNCH_STORE_ADDR
  bool hosts_store() const { return server_ != nullptr; }

  // Starts the watcher thread: heartbeats, the store host's check of every
  // node's heartbeat, and `on_failure` (on that thread) when another node
  // failed or the store is lost. Called once.
  void watch(std::function<void(int code, std::string verdict)> on_failure);
  // Records this node's failure for the others (sent by the watcher; the
  // first failure of the whole job wins).
  void publish_failure(int code, const std::string& verdict);
  // After the local job ended with `code`: tells the others; the store's host
  // then serves until every node has finished or failed. Returns the code to
  // exit with (a failure seen elsewhere counts when this node succeeded).
  int leave(int code);

 private:
  NodeGroup() = default;
  void watcher_loop();
  void publish_pending();
  std::string key(const std::string& k) const { return prefix_ + k; }
  void failed(int code, const std::string& verdict);

  RdzvTarget target_;
  std::string token_, prefix_, job_id_;
  double hb_timeout_s_ = 10, kill_grace_s_ = 3;
  std::vector<NodeRecord> nodes_;
  std::unique_ptr<rdzv::BackgroundStoreServer> server_;
  std::unique_ptr<rdzv::TcpStore> store_;  // the watcher's connection
  std::thread watcher_;
  std::atomic<bool> stop_{false}, leaving_{false};
  std::mutex mu_;
  std::optional<std::pair<int, std::string>> to_publish_;  // under mu_
  std::function<void(int, std::string)> on_failure_;
  std::atomic<bool> failure_seen_{false}, store_lost_{false};
  std::atomic<int> dead_{0};  // nodes the store's host found silent
  int seen_code_ = 0;               // under mu_
  std::string seen_verdict_;        // under mu_
};

// `dlaunch --rdzv ...`: rendezvous, then this node's share of the job.
int run_per_node(RunOptions o);

}  // namespace dl::launcher
