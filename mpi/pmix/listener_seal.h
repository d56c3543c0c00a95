#pragma once
// Takes libpmix's TCP listener away from every other user of the machine
// (docs/security.md, "The PMIx server").
//
// libpmix 4.2 serves its clients on a 127.0.0.1 TCP port, which any local
// user can reach, and over TCP its `native` security trusts the uid a client
// claims. So once PMIx_server_init has opened that listener, the agent puts
// a Unix-domain listener at `path` (in the job's 0700 temp dir: only the
// agent's user can connect) in its place under the same descriptor number
// (dup3): libpmix's listener thread reads the descriptor anew on every turn
// and accepts from the Unix socket from then on; the TCP port is closed. The
// agent's front door (front_door.h) checks each rank's uid and relays it to
// `path`. Connections that reached the TCP port before the swap are cut
// (sweep_tcp_clients).
//
// No libpmix here: the descriptor is found among this process's own.
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>

namespace dl::mpi::pmix {

// Replaces this process's listening socket on 127.0.0.1:`port` by a
// non-blocking, close-on-exec Unix-domain listener bound at `path` (which
// must not exist; its directory should be private).
//
// libpmix's listener thread sleeps in select() in turns of 2 s, and a
// select() that began on the TCP socket neither sees the swap nor wakes for
// the Unix socket (Linux registers its waits in the first pass only). So the
// seal keeps the TCP socket open, unreachable by descriptor, until wake():
// called once a client waits on the Unix socket, it shuts the TCP socket
// down, which wakes that select(); the thread finds the Unix socket readable
// and takes it up. Without it, each job's first MPI_Init waited up to 2 s.
class ListenerSeal {
 public:
  // Throws IoError when no such listener exists here or the new one cannot
  // be made; then nothing was changed.
  ListenerSeal(uint16_t port, const std::string& path);
  ~ListenerSeal();  // wake()
  ListenerSeal(const ListenerSeal&) = delete;
  ListenerSeal& operator=(const ListenerSeal&) = delete;
  // Shuts the old TCP socket down and closes it; once (later calls do
  // nothing). Thread-safe.
  void wake();

 private:
  std::mutex mu_;
  int old_ = -1;  // the TCP listener, kept until wake()
};

// Cuts the clients that libpmix accepted on its TCP port: those that came
// before the swap, and one whose accept() was under way while it happened.
// Thread-safe.
class TcpClientSweeper {
 public:
  // `refused(uid)` is told of each client of another user cut, with the
  // uid that owns the client's end (-1 when unknown).
  TcpClientSweeper(uint16_t port, std::function<void(long uid)> refused)
      : port_(port), refused_(std::move(refused)) {}
  // Shuts down (both ways) every socket of this process connected on local
  // port `port` that no earlier sweep cut. Returns how many.
  int sweep();

 private:
  const uint16_t port_;
  const std::function<void(long uid)> refused_;
  std::mutex mu_;
  std::set<unsigned long> cut_;  // inodes of the sockets cut so far
};

}  // namespace dl::mpi::pmix
