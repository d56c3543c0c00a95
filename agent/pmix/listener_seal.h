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

namespace dl::agent::pmix {

// Replaces this process's listening socket on 127.0.0.1:`port` by a
// non-blocking, close-on-exec Unix-domain listener bound at `path` (which
// must not exist; its directory should be private). Throws IoError when no
// such listener exists here or the new one cannot be made; then nothing was
// changed.
void seal_tcp_listener(uint16_t port, const std::string& path);

// Cuts the clients that libpmix accepted on its TCP port: those that came
// before the swap, and one whose accept() was under way while it happened.
// Thread-safe.
class TcpClientSweeper {
 public:
  // `refused(uid)` is told of each client cut, with the uid that owns the
  // client's end (-1 when unknown).
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

}  // namespace dl::agent::pmix
