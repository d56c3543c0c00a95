#pragma once
// The ranks' side of the PMI server: one socketpair per local rank, whose
// other end the rank inherits as PMI_FD (as Hydra's proxy does), read and
// written on the agent's io_context and handed to the PmiServer.
//
// Cost for a job that never calls MPI_Init: one socketpair per rank and one
// pending read; no thread, no listening port. A rank's socket is watched
// (registered with the loop) only once the rank was started (watch_started):
// one that ended by then is read to its end and closed without ever being
// registered.
//
// Threading: everything on the agent's io_context thread.
#include <boost/asio.hpp>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpi/pmi/pmi_server.h"

namespace dl::mpi::pmi {

class PmiService {
 public:
  struct Hooks {
    std::function<void(uint64_t id, std::string blob)> fence;          // this host's contribution
    std::function<void(int rank, int status, std::string msg)> abort;  // a rank called MPI_Abort
    // Set (per-node mode): nothing is served; a rank's first bytes call
    // refuse(rank) instead, once, and its socket is closed.
    std::function<void(int rank)> refuse;
  };
  PmiService(boost::asio::io_context& io, PmiJob job, Hooks hooks);
  ~PmiService();

  // Opens local rank `rank`'s socketpair and returns the variables to add to
  // its environment (PMI_FD, PMI_RANK, PMI_SIZE) and the fd the child must
  // inherit (close-on-exec: the spawn clears that flag in the child only).
  // Throws IoError when no socketpair can be had.
  struct RankEnd {
    int child_fd = -1;
    std::vector<std::pair<std::string, std::string>> env;
  };
  RankEnd open_rank(int rank);
  // When the rank will not be spawned: closes the agent's copy of the
  // child's end, so that the socket is seen to end.
  void close_child_end(int rank);
  // The rank was spawned: spawn_rank closed the agent's copy of the child's
  // end already (SpawnSpec::inherit_fd); forget it.
  void child_end_closed(int rank);
  // Watches the sockets of the ranks opened since the last call: what each
  // holds is read now (a rank may have written, even ended, while the agent
  // started the others), then the rest as it comes.
  void watch_started();

  void fence_done(uint64_t id, std::string_view all_blobs) { server_.fence_done(id, all_blobs); }
  void fence_failed(uint64_t id, const std::string& why) { server_.fence_failed(id, why); }

 private:
  struct Link {
    explicit Link(boost::asio::io_context& io) : sock(io) {}
    boost::asio::local::stream_protocol::socket sock;
    int child_fd = -1;
    int unwatched = -1;  // the agent's end until watch_started; then `sock` owns it
    // Not zeroed: only the bytes a read returned are looked at (64 ranks'
    // zeroed buffers were 64 pages faulted in for sockets most ranks only close).
    std::array<char, 4096> rbuf;
    std::deque<std::string> out;
    bool writing = false, close_after_write = false;
  };
  void read(int rank);
  // What rank `rank` wrote: to the server, or to hooks.refuse.
  void on_bytes(int rank, std::string_view bytes);
  void write(int rank, std::string bytes);
  void flush(int rank);
  void close(int rank);

  boost::asio::io_context& io_;
  PmiServer server_;
  std::function<void(int rank)> refuse_;
  std::map<int, std::shared_ptr<Link>> links_;
};

}  // namespace dl::mpi::pmi
