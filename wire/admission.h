#pragma once
// How a server that takes the token handshake (wire/handshake.h) lets
// connections in: the job's store (rendezvous/tcp_store_server.h) and the
// launcher's control port (launcher/control_server.h).
//
// A connection costs the server a descriptor from accept until it closes,
// and an unauthenticated one can come from anybody: another user of this
// host holding thousands of idle connections would otherwise take every
// descriptor and the listen backlog, and the job's own ranks could not get
// in. So each peer may hold only so many connections that have not passed
// the handshake yet, and over that each new one is closed at once:
//   - a peer on this host (loopback, or this host's own address) is counted
//     by the uid owning its socket (wire/socket_owner.h); the server's own
//     user is not limited (it could end the job anyway, and a job's local
//     ranks connect in a burst);
//   - a remote peer is counted by its address.
// A connection gives its place back once it authenticates or closes
// (PreAuthSlot). Unauthenticated connections are closed after
// kPreAuthDeadline. When accept runs out of descriptors, a spare one kept
// for the purpose is given up to take one pending connection off the
// backlog and close it, so the backlog keeps moving instead of the server
// retrying a full queue (docs/wire-protocol.md, "Before the handshake").
//
// Thread-safety: none; one Admission and its slots belong to the thread of
// its server's event loop.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace dl::wire {

// How long a server keeps a connection that has not finished the token
// handshake: a client of ours sends its hello as soon as it connects, so the
// whole handshake is one round trip and a few microseconds of HMAC.
inline constexpr std::chrono::milliseconds kPreAuthDeadline{5000};
// Unauthenticated connections at once, per other user of this host and per
// remote address (one remote host's ranks may all connect at once).
inline constexpr size_t kPreAuthPerLocalUser = 16;
inline constexpr size_t kPreAuthPerAddress = 512;

// One connection's place among its peer's unauthenticated connections;
// frees it on release() or destruction. Move-only; an empty slot (a peer
// without a limit) holds nothing.
class PreAuthSlot {
 public:
  using Counts = std::unordered_map<std::string, size_t>;
  PreAuthSlot() = default;
  PreAuthSlot(std::shared_ptr<Counts> counts, std::string key);
  PreAuthSlot(PreAuthSlot&& o) noexcept = default;
  PreAuthSlot& operator=(PreAuthSlot&& o) noexcept;
  ~PreAuthSlot() { release(); }
  void release();

 private:
  std::shared_ptr<Counts> counts_;
  std::string key_;
};

class Admission {
 public:
  struct Limits {
    size_t per_local_user = kPreAuthPerLocalUser;
    size_t per_address = kPreAuthPerAddress;
    // Whether this process's own user goes unlimited (tests count it too).
    bool own_user_unlimited = true;
  };
  // An accepted connection: its descriptor (non-blocking, close-on-exec),
  // who it is for log lines ("user mallory (uid 1001)", "10.0.0.5", or
  // "this user"), and its place, to release once it authenticates.
  struct Accepted {
    int fd = -1;
    std::string peer;
    PreAuthSlot slot;
  };
  struct Batch {
    std::vector<Accepted> admitted;
    // For the server's log: how many connections of a peer were closed over
    // its limit (one line per peer and second at most), and why accept failed.
    std::vector<std::string> notes;
    // accept failed (out of descriptors, or another error): call again after
    // a short pause rather than at the next readiness event.
    bool starved = false;
    // Connections taken off the backlog, admitted or closed: 0 means the
    // backlog was empty (accept said EAGAIN at once).
    size_t taken = 0;
  };

  explicit Admission(Limits limits);
  Admission();
  ~Admission();
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // Accepts what is pending on the non-blocking listening socket
  // `listen_fd` (at most kMaxBatch), closes at once those over their peer's
  // limit (judged kRound at a time, so a flood never holds more than kRound
  // descriptors), and returns the others. Never throws.
  Batch accept_pending(int listen_fd);
  // Unauthenticated connections admitted for `key` ("uid N" or an address)
  // and not released yet.
  size_t waiting(const std::string& key) const;

  static constexpr size_t kMaxBatch = 1024;
  // Connections accepted before they are judged (one read of the socket tables).
  static constexpr size_t kRound = 64;

 private:
  void admit(std::vector<int>& fds, Batch& b);
  void shed_one(int listen_fd, Batch& b);
  void report_refused(Batch& b);
  std::string name_of(unsigned uid);

  // Connections closed over a peer's limit, told at most once a second.
  struct Refused {
    std::string who;
    size_t cap = 0, unreported = 0;
    std::chrono::steady_clock::time_point reported{};
  };
  std::unordered_map<std::string, Refused> refused_;
  std::unordered_map<unsigned, std::string> names_;  // uid -> "user X (uid N)"
  Limits limits_;
  std::shared_ptr<PreAuthSlot::Counts> counts_;
  int spare_ = -1;  // a descriptor held back for when accept has none
};

}  // namespace dl::wire
