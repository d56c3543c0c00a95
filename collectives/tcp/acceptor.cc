#include "collectives/tcp/acceptor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "collectives/tcp/greeting.h"
#include "errors/error.h"
#include "wire/frame.h"
#include "wire/host.h"

namespace dl::coll::tcp {
namespace {

using Clock = std::chrono::steady_clock;

// A connection accepted but not yet known to be a rank.
struct Pending {
  wire::Socket sock;
  Greeting greeting;
  Clock::time_point until;
  std::string from;  // "10.0.0.5:41234"
};

std::string address_of(const sockaddr_storage& a, socklen_t len) {
  const auto* sa = reinterpret_cast<const sockaddr*>(&a);
  const std::string host = wire::numeric_address(sa, len);
  const uint16_t port = a.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(a).sin6_port
                                                : reinterpret_cast<const sockaddr_in&>(a).sin_port;
  return (host.empty() ? "?" : host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(ntohs(port));
}

// Sends all of `bytes` now or reports that it could not (a fresh socket's
// buffer takes a handshake answer whole; one that does not is not a rank).
bool send_now(const wire::Socket& s, std::string_view bytes) {
  return ::send(s.fd(), bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL) ==
         static_cast<ssize_t>(bytes.size());
}

class Acceptor {
 public:
  Acceptor(const MeshConfig& c, const wire::Socket& lsn, std::vector<MeshPeer>& peers)
      : c_(c), lsn_(lsn), peers_(peers), missing_(c.size - 1 - c.rank) {}

  void run(Clock::time_point deadline) {
    while (missing_ > 0) {
      const auto now = Clock::now();
      if (now >= deadline) time_out();
      for (size_t i = pending_.size(); i-- > 0;)
        if (pending_[i].until <= now) drop(i, "did not finish the handshake within " + ms(c_.greeting_timeout));
      std::vector<pollfd> fds{{lsn_.fd(), POLLIN, 0}};
      auto wake = deadline;
      for (const Pending& p : pending_) fds.push_back({p.sock.fd(), POLLIN, 0}), wake = std::min(wake, p.until);
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
      if (::poll(fds.data(), fds.size(), static_cast<int>(wait)) < 0) {
        if (errno == EINTR) continue;
        throw_errno("collectives: poll on the listening socket");
      }
      // From the back, so that dropping one keeps the others' places in fds.
      for (size_t i = pending_.size(); i-- > 0;)
        if (fds[i + 1].revents) serve(i);
      if (fds[0].revents) accept_new();
    }
  }

 private:
  static std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

  void accept_new() {
    for (;;) {
      sockaddr_storage a{};
      socklen_t len = sizeof a;
      int fd = ::accept4(lsn_.fd(), reinterpret_cast<sockaddr*>(&a), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        // The welcome is a small write with no answer to carry its ACK:
        // without this, Nagle would hold the transports' first frame after
        // it until the peer's delayed ACK (up to 40 ms).
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (pending_.size() >= kMaxPendingGreetings) drop(0, "dropped for a newer connection");
        pending_.push_back({wire::Socket(fd), Greeting(c_.token, c_.rank, c_.size),
                            Clock::now() + c_.greeting_timeout, address_of(a, len)});
        continue;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if ((errno == EMFILE || errno == ENFILE) && !pending_.empty()) {
        drop(0, "dropped for a newer connection: out of file descriptors");
        continue;
      }
      if (!lost_before_accept(errno))
        throw_errno("collectives: rank " + std::to_string(c_.rank) + " accepting its peers' connections");
    }
  }

  // accept(2)'s errors that concern one connection, not the listening
  // socket: the next one may be fine.
  static bool lost_before_accept(int e) {
    return e == EINTR || e == ECONNABORTED || e == EPROTO || e == EPERM || e == ENETDOWN || e == ENETUNREACH ||
           e == EHOSTDOWN || e == EHOSTUNREACH || e == ENONET || e == ENOPROTOOPT || e == EOPNOTSUPP;
  }

  // Reads what the greeting wants, never more: whatever a rank sends after
  // its greeting stays in the socket for the transports.
  void serve(size_t i) {
    Pending& p = pending_[i];
    char buf[wire::kHeaderSize + wire::kMaxHandshakePayload];
    for (;;) {
      const ssize_t n = ::recv(p.sock.fd(), buf, std::min(sizeof buf, p.greeting.wanted()), 0);
      if (n == 0) return drop(i, "closed the connection during the handshake");
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0) return drop(i, std::strerror(errno));
      p.greeting.feed(std::string_view(buf, static_cast<size_t>(n)));
      const std::string reply = p.greeting.take_reply();
      if (!reply.empty() && !send_now(p.sock, reply)) return drop(i, "could not be answered");
      if (p.greeting.state() == Greeting::State::kRefused) return drop(i, p.greeting.error());
      if (p.greeting.state() == Greeting::State::kDone) return admit(i);
    }
  }

  void admit(size_t i) {
    Pending& p = pending_[i];
    const int j = p.greeting.peer();
    if (peers_[j].sock.valid()) {
      const std::string why = "rank " + std::to_string(j) + " is connected already (two processes with one rank?)";
      send_now(p.sock, wire::encode_frame(wire::kErrorText, why));
      return drop(i, why);
    }
    if (!send_now(p.sock, wire::encode_frame(wire::kData, kWelcome))) return drop(i, "could not be welcomed");
    ::fcntl(p.sock.fd(), F_SETFL, ::fcntl(p.sock.fd(), F_GETFL) & ~O_NONBLOCK);
    peers_[j].sock = std::move(p.sock);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    --missing_;
  }

  // The connection was not one of ours: forget it, keep its reason for the
  // timeout's message (nothing is printed: anyone can make these).
  void drop(size_t i, const std::string& why) {
    ++dropped_;
    last_drop_ = "from " + pending_[i].from + ": " + why;
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  [[noreturn]] void time_out() const {
    std::string who;
    for (int j = c_.rank + 1; j < c_.size; ++j)
      if (!peers_[j].sock.valid()) who += (who.empty() ? "" : ", ") + peers_[j].info.describe();
    std::string msg = "collectives: rank " + std::to_string(c_.rank) + " timed out after " + ms(c_.timeout) +
                      " waiting for " + who + " to connect; are they running and can they reach this host?";
    if (dropped_ > 0)
      msg += " (" + std::to_string(dropped_) + " connection(s) that did not complete the handshake were dropped; the last " +
             last_drop_ + ")";
    throw TimeoutError(msg);
  }

  const MeshConfig& c_;
  const wire::Socket& lsn_;
  std::vector<MeshPeer>& peers_;
  int missing_;
  std::vector<Pending> pending_;
  size_t dropped_ = 0;
  std::string last_drop_;
};

}  // namespace

void accept_ranks(const MeshConfig& c, const wire::Socket& lsn, std::vector<MeshPeer>& peers,
                  Clock::time_point deadline) {
  Acceptor(c, lsn, peers).run(deadline);
}

}  // namespace dl::coll::tcp
