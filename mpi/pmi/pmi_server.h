#pragma once
// The PMI-1 and PMI-2 server of one host's ranks, as a pure handler: bytes
// from a rank in, replies, fence contributions and aborts out through hooks.
// No sockets, so tests drive it with the exact bytes MPICH's clients send
// (pmi_service.h connects it to the ranks' PMI_FD sockets).
//
// What it answers is what Hydra's proxy answers (docs/mpi.md): the job's
// size, the rank's identity, the key-value space, PMI_process_mapping and
// universeSize; node attributes (PMI-2) stay on this host. A fence
// (barrier_in, kvs-fence) completes once every local rank has joined it:
// then this host's puts since the last fence go to the launcher as one
// contribution (encode_puts), and when every host's have come back
// (fence_done) the ranks' waits are answered. A request dlaunch does not
// serve (spawn, publish/lookup, an unknown command) is answered with an
// error and named once through `warn`; malformed input likewise, never a crash.
//
// Threading: one thread (the agent's io_context).
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "mpi/pmi/pmi_job.h"
#include "mpi/pmi/pmi_wire.h"

namespace dl::mpi::pmi {

class PmiServer {
 public:
  struct Hooks {
    std::function<void(int rank, std::string bytes)> reply;            // to that rank's socket
    std::function<void(int rank)> close;                               // drop that rank's socket
    std::function<void(uint64_t id, std::string blob)> fence;          // this host's contribution
    std::function<void(int rank, int status, std::string msg)> abort;  // the rank called MPI_Abort
    std::function<void(const std::string& line)> warn;                 // one line for the agent's stderr
  };
  PmiServer(PmiJob job, Hooks hooks);

  // Bytes read from local rank `rank`'s socket. REQUIRES: rank is local.
  void on_bytes(int rank, std::string_view data);
  // Its socket closed (the rank exited, or closed PMI_FD).
  void on_closed(int rank);
  // The launcher's answer to fence `id`: every host's contribution.
  void fence_done(uint64_t id, std::string_view all_blobs);
  // Fence `id` cannot complete (a host never joined): its waits fail.
  void fence_failed(uint64_t id, const std::string& why);

  // For tests and the log: the fences completed so far.
  uint64_t fences_done() const { return fence_seq_; }

 private:
  struct Conn {
    std::string buf;
    bool in_fence = false;
    std::string fence_thrid;  // PMI-2: echoed in the fence's reply
    int fence_version = 1;
    bool finalized = false, closed = false;
  };
  struct Waiter {  // a PMI-2 info-getnodeattr with wait=TRUE
    int rank;
    std::string thrid;
  };
  void handle(int rank, const Command& c);
  void handle_v1(int rank, const Command& c);
  void handle_v2(int rank, const Command& c);
  void refuse(int rank, const Command& c);
  void unserved(int rank, const Command& c, const std::string& what);
  void send(int rank, const Command& req, std::string_view cmd, Pairs args);
  void enter_fence(int rank, const Command& c);
  void abort(int rank, int status, const std::string& msg);
  const std::string* lookup(const std::string& key) const;
  void warn_once(const std::string& key, const std::string& line);

  PmiJob job_;
  Hooks hooks_;
  std::map<int, Conn> conns_;
  std::map<std::string, std::string> kvs_;  // committed by fences
  Pairs pending_;                            // this host's puts since the last fence
  std::map<std::string, std::string> node_attrs_;
  std::map<std::string, std::vector<Waiter>> attr_waiters_;
  size_t in_fence_ = 0;
  uint64_t fence_seq_ = 0;   // fences completed
  bool fence_sent_ = false;  // fence fence_seq_ went to the launcher
  std::set<std::string> warned_;
};

}  // namespace dl::mpi::pmi
