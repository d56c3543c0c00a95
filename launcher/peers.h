#pragma once
// The other nodes of a job, as one Job sees them.
//
// In hostfile mode a Job runs every node itself: it has no peers
// (Peers::none()), makes its own token and job id, serves its own store, and
// restarts when its own agents are ready. In per-node mode (torchrun's shape,
// launcher/node_group.h) each node's dlaunch runs a Job for its own node; the
// others are its peers: they agreed on the job's identity at a store, they
// learn of this node's failure and tell it of theirs, and a restart waits
// for all of them.
//
// The Job asks the same questions in both modes; only the answers differ, so
// the state machine has no per-node branches of its own.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dl::launcher {

// What the nodes agreed on at the store (per-node mode).
struct PeerIdentity {
  int node = 0;  // the node this Job runs; the others' ranks are theirs to run
  std::string token, job_id, store_addr, master_addr;
  int master_port = 0;
  // Node 0's dlaunch serves torch's c10d store at master_addr:master_port
  // (its ranks and every other node's are its clients); false: rank 0 hosts it.
  bool torch_store = false;
};

class Peers {
 public:
  using Failed = std::function<void(int code, std::string verdict)>;
  using RestartDone = std::function<void(int port, std::string why)>;

  // Hostfile mode's: nobody else. Restarts need no one's agreement (restart()
  // answers at once with this node's port), failures have no one to tell.
  static std::unique_ptr<Peers> none();
  virtual ~Peers() = default;

  // The agreed identity, or null: this Job makes its own and serves its store.
  virtual const PeerIdentity* identity() const = 0;
  // Tells the others that this job failed. Must not block.
  virtual void publish_failure(int code, const std::string& verdict) = 0;
  // Starts watching the others; `failed` may be called on any thread.
  virtual void watch(Failed failed) = 0;
  // Whether this node can meet the others for a restart (--max-restarts).
  virtual bool can_restart() const = 0;
  // This node's attempt `attempt` ended and its agents are ready; `port` is
  // free here (node 0's becomes the next MASTER_PORT). `done` gets the
  // agreed port, or a reason why the restart cannot happen; it may be called
  // on any thread, or before restart() returns.
  virtual void restart(int attempt, int port, double wait_s, RestartDone done) = 0;
  // This node will not run attempt+1: the others waiting in restart() stop.
  virtual void abandon(int attempt, const std::string& why) = 0;
  // Attempt `attempt` runs: failures are read and written for it.
  virtual void next_attempt(int attempt) = 0;
  // When the peers serve torch's c10d store (per-node mode's node 0) and
  // torch's rendezvous has not completed: lines naming the ranks that never
  // connected or arrived (TorchStore::unfinished); else none.
  virtual std::vector<std::string> torch_unfinished() { return {}; }

  bool per_node() const { return identity() != nullptr; }
};

}  // namespace dl::launcher
