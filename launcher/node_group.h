#pragma once
// Per-node mode (torchrun's shape, for batch systems): one dlaunch per node,
// started by srun, mpirun or by hand, each starting only its own node's
// ranks. The nodes meet at a store: node rank 0 hosts it when the rendezvous
// endpoint is one of its own addresses, else a `dlaunch store` serves it.
//
// What the nodes keep at the store, key by key, is launcher/rdzv_keys.h.
// Every connection passes the job-token handshake; the token comes from
// --token-file or DLAUNCH_TOKEN, never from the command line.
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hostfiles/placement.h"
#include "launcher/options/options.h"
#include "launcher/peers.h"
#include "launcher/rdzv_keys.h"
#include "rendezvous/bootstrap.h"

namespace dl::rdzv {
class TcpStore;
class BackgroundStoreServer;
}  // namespace dl::rdzv

namespace dl::launcher {
class GroupTorchStore;

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

// One node as it announced itself (a record of wire/record.h, at node/K).
struct NodeRecord {
  int node_rank = 0;
  std::string host;   // gethostname()
  std::string addr;   // its address as the other nodes reach it
  int nproc = 1;      // ranks it runs
  int master_port = 0;  // node 0 only: a free port for MASTER_PORT
  int pid = 0;
  // machine/identity.h: two nodes on one machine share it; absent or ""
  // when unknown (an older node), compared with nothing.
  std::optional<std::string> machine;
  // node 0 only: its dlaunch serves torch's c10d store at master_port
  // (--torch-store served); absent: rank 0 hosts it.
  std::optional<bool> torch_store;
  template <class S, class V> static void fields(S& s, V& v) {
    v("node_rank", s.node_rank), v("host", s.host), v("addr", s.addr), v("nproc", s.nproc);
    v("master_port", s.master_port), v("pid", s.pid), v("machine", s.machine), v("torch_store", s.torch_store);
  }
};
std::string to_json(const NodeRecord& r);
// Throws wire::RecordError naming the field at fault.
NodeRecord node_record_from_json(const std::string& s);

// The first failure of an attempt, at `failed` (`failed/K`): the exit code
// every node ends with and the one line every node prints.
struct FailedRecord {
  int code = 1;
  std::string verdict;
  template <class S, class V> static void fields(S& s, V& v) { v("code", s.code), v("verdict", s.verdict); }
};
std::string to_json(const FailedRecord& r);
// Never throws: a record that cannot be read is still a failure, whose
// verdict says so.
FailedRecord failed_record_from_json(const std::string& s);

// The warning for node ranks that run on one machine (the same `machine`),
// whose ranks share LOCAL_RANK values, or "" when every node is a machine
// of its own. Pure.
std::string same_machine_warning(const std::vector<NodeRecord>& nodes);

// The world's placement: node K's ranks follow node K-1's (pure).
hostfiles::Placement world_placement(const std::vector<NodeRecord>& nodes);

// The other nodes, as this node's Job sees them (launcher/peers.h).
class NodeGroup final : public Peers {
 public:
  // Meets the other nodes; prints the progress line on a terminal. Throws
  // UsageError for a conflicting node, TimeoutError naming the node ranks that
  // never arrived (after telling the nodes that did), IoError when the store
  // cannot be reached.
  static std::unique_ptr<NodeGroup> join(const RunOptions& o, const RdzvTarget& t, const std::string& token);
  ~NodeGroup() override;

  const std::vector<NodeRecord>& nodes() const { return nodes_; }
  const RdzvTarget& target() const { return target_; }
  const std::string& job_id() const { return job_id_; }
  std::string store_addr() const;  // host:port for the ranks' DLAUNCH_STORE_ADDR
  bool hosts_store() const { return server_ != nullptr; }
  // What the nodes agreed on: this node, the token, job id, store and master.
  const PeerIdentity* identity() const override { return &identity_; }
  bool can_restart() const override { return true; }

  // Starts the watcher thread: heartbeats, the store host's check of every
  // node's heartbeat, and `on_failure` (on that thread) when another node
  // failed or the store is lost. Called once.
  void watch(Failed on_failure) override;
  // Records this node's failure for the others (sent by the watcher; the
  // first failure of the whole job wins).
  void publish_failure(int code, const std::string& verdict) override;
  // --max-restarts: this node's attempt `attempt` ended and it can run the
  // next; `port` is free on this host (node 0's becomes MASTER_PORT).
  // Returns at once; on a thread of its own, waits until every node is ready
  // (node 0 then publishes the port), and calls done(port, "") or, when a
  // node abandoned or did not come within `wait_s`, done(0, why).
  void restart(int attempt, int port, double wait_s, RestartDone done) override;
  // --max-restarts: this node will not run attempt+1 (told to stop, or no
  // restarts left): the nodes waiting in restart() stop with `why`.
  void abandon(int attempt, const std::string& why) override;
  // The next attempt runs: failures are read and written under failed/K now.
  void next_attempt(int attempt) override;
  std::vector<std::string> torch_unfinished() override;
  // After the local job ended with `code`: tells the others; the store's host
  // (and node 0 serving torch's store) then serves until every node has
  // finished or failed. Returns the code to
  // exit with (a failure seen elsewhere counts when this node succeeded).
  int leave(int code);

 private:
  NodeGroup() = default;
  // join's steps, in order.
  using Deadline = std::chrono::steady_clock::time_point;
  void serve_store(Deadline deadline);
  std::unique_ptr<rdzv::TcpStore> connect_store(double timeout_s);
  void check_joinable(rdzv::TcpStore& store);
  NodeRecord own_record(const RunOptions& o) const;
  void claim_node_rank(rdzv::TcpStore& store, const NodeRecord& me);
  void agree_job_id(rdzv::TcpStore& store);
  void wait_for_nodes(rdzv::TcpStore& store, Deadline deadline, double timeout_s);
  std::vector<int> absent_nodes(rdzv::TcpStore& store) const;
  void read_nodes(rdzv::TcpStore& store);
  void settle(const RunOptions& o);

  void watcher_loop();
  void check_heartbeats(int attempt);
  void publish_pending();
  void failed(int code, const std::string& verdict);
  void wait_for_restart(int attempt, int port, double wait_s, const std::function<void(int, std::string)>& done);
  void serve_torch_store(bool verbose);
  std::vector<int> left_nodes(rdzv::TcpStore& store) const;

  RdzvTarget target_;
  PeerIdentity identity_;
  std::string token_, job_id_;
  RdzvKeys keys_;  // the store's schema, under this rendezvous' id
  double hb_timeout_s_ = 10, kill_grace_s_ = 3;
  bool restarts_ = false;  // --max-restarts
  std::vector<NodeRecord> nodes_;
  std::unique_ptr<rdzv::BackgroundStoreServer> server_;
  std::unique_ptr<rdzv::TcpStore> store_;  // the watcher's connection
  std::thread watcher_;
  std::atomic<bool> stop_{false}, leaving_{false};
  std::mutex mu_;
  std::optional<std::pair<int, std::string>> to_publish_;  // under mu_
  int to_publish_attempt_ = 0;                             // under mu_
  std::optional<std::pair<int, std::string>> to_abandon_;  // under mu_: attempt, why
  std::atomic<int> attempt_{0};
  std::thread restarter_;
  std::atomic<bool> restart_stop_{false};
  std::function<void(int, std::string)> on_failure_;
  std::atomic<bool> failure_seen_{false}, store_lost_{false};
  std::atomic<int> dead_{0};  // nodes the store's host found silent
  // The watcher's (the store's host): each node's last heartbeat and since
  // when, kept across the watcher's restart in leave(); the nodes found silent.
  std::map<int, std::pair<std::string, std::chrono::steady_clock::time_point>> beats_;
  std::set<int> dead_nodes_;
  int seen_code_ = 0;               // under mu_
  std::string seen_verdict_;        // under mu_
  // Node 0, --torch-store served: torch's store for every node. Last, so
  // that it goes first: its thread calls back into the members above.
  std::unique_ptr<GroupTorchStore> torch_;
};

// `dlaunch --rdzv ...`: rendezvous, then this node's share of the job.
int run_per_node(RunOptions o);

}  // namespace dl::launcher
