#pragma once
// The address a job's ranks are given for their PMIx server, open before the
// server exists (docs/mpi.md, "Cost for non-MPI programs").
//
// A rank must have its server's address (PMIX_SERVER_URI*) when it starts,
// and libpmix's client gives up at once when nothing listens there (it
// retries connect() ten times without a pause). So the agent listens on a
// loopback port of its own from the start: a client's connect() completes in
// the kernel's backlog, and its handshake waits in the socket until the PMIx
// server is up. Then relay() connects each client to libpmix's own listener
// (a Unix socket in the job's private temp dir: listener_seal.h) and copies
// bytes both ways until either side closes. Nothing is read from a client
// before the server is ready.
//
// Only processes of the agent's own user get in: the PMIx client protocol has
// no place for the job's token, so the door reads each accepted socket's
// owner from /proc/net/tcp and closes any other user's at once, before a byte
// is read or relayed, and before libpmix is started for it (admit). Each
// refusal is reported on stderr with the intruder's uid and name (the first
// three of each uid; then that more are not shown).
//
// No libpmix here. Threading: one thread runs relay(); pending() and port()
// may be called from any thread; the destructor closes every socket and must
// not run while relay() does.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dl::mpi::pmix {

class FrontDoor {
 public:
  // Listens on 127.0.0.1, a free port (close-on-exec: ranks do not inherit
  // it). Throws IoError.
  FrontDoor();
  ~FrontDoor();
  FrontDoor(const FrontDoor&) = delete;
  FrontDoor& operator=(const FrontDoor&) = delete;

  uint16_t port() const { return port_; }
  int listen_fd() const { return listen_fd_; }

  // True when a client has connected and not been accepted yet.
  bool pending() const;

  // Waits until a client of the agent's own user has connected and keeps it
  // for relay(); clients of other users are closed and reported. True once
  // one is kept, false when `stop_fd` becomes readable first or the door is
  // closed.
  bool admit(int stop_fd);

  // admit() without waiting: accepts what waits in the backlog (other users'
  // clients are closed and reported) and returns whether a client of the
  // agent's user is kept.
  bool admit_waiting();

  // Relays the clients admit() kept and every client of the agent's user that
  // connects later (others are closed and reported): connects each to the
  // Unix socket `upstream` and copies bytes both ways. Returns when `stop_fd`
  // becomes readable. A client whose upstream connect fails is closed (its
  // PMIx_Init then fails with "unreachable"). `connected`, if given, runs
  // after each upstream connect.
  void relay(const std::string& upstream, int stop_fd, const std::function<void()>& connected = {});

  // Stops listening: clients that connect later are refused at once, and
  // those waiting in the backlog see the connection closed.
  void close_listener();

 private:
  // Accepts what waits in the backlog: clients of the agent's user join
  // admitted_, others are closed and reported.
  void accept_waiting();
  void judge(const std::vector<int>& accepted);
  void report_refusal(long uid);

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::vector<int> admitted_;            // accepted, not yet relayed
  std::map<long, int> refusals_;         // uid -> connections refused
};

// "user mallory (uid 1001)" (wire::describe_uid), "unknown user" for -1.
std::string describe_user(long uid);

}  // namespace dl::mpi::pmix
