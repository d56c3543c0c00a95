#include "mpi/pmix/front_door.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <optional>
#include <list>
#include <string>
#include <vector>

#include "errors/error.h"
#include "wire/socket_owner.h"

namespace dl::mpi::pmix {
namespace {

// Bytes one direction may hold before the relay stops reading that side.
constexpr size_t kMaxBuffered = 1u << 20;

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

}  // namespace

std::string describe_user(long uid) {
  return uid < 0 ? "unknown user" : wire::describe_uid(static_cast<unsigned>(uid));
}

namespace {

// Connects to the Unix socket `path`; -1 on failure.
int connect_unix(const std::string& path) {
  sockaddr_un a{};
  if (path.size() >= sizeof a.sun_path) return -1;
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// One direction of a relayed connection.
struct Flow {
  int from = -1, to = -1;
  std::string buf;
  bool eof = false;       // `from` reached EOF
  bool shut = false;      // EOF passed on to `to`
};

struct Link {
  Flow up, down;  // client -> server, server -> client
  bool broken = false;
  bool done() const { return broken || (up.shut && down.shut); }
};

// Reads what `f.from` has; false on a hard error.
bool pull(Flow& f) {
  char tmp[65536];
  for (;;) {
    ssize_t n = ::read(f.from, tmp, sizeof tmp);
    if (n > 0) {
      f.buf.append(tmp, static_cast<size_t>(n));
      if (f.buf.size() >= kMaxBuffered) return true;
      continue;
    }
    if (n == 0) { f.eof = true; return true; }
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

// Writes what `f` holds to `f.to`; false on a hard error.
bool push(Flow& f) {
  while (!f.buf.empty()) {
    ssize_t n = ::send(f.to, f.buf.data(), f.buf.size(), MSG_NOSIGNAL);
    if (n > 0) { f.buf.erase(0, static_cast<size_t>(n)); continue; }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  if (f.eof && !f.shut) {
    ::shutdown(f.to, SHUT_WR);
    f.shut = true;
  }
  return true;
}

// Connects each of `clients` to the Unix socket `upstream` as a new link; a
// client whose connect fails is closed; `connected` runs after each connect.
// Empties `clients`.
void link_to(const std::string& upstream, std::vector<int>& clients, std::list<Link>& links,
             const std::function<void()>& connected) {
  for (int c : clients) {
    const int s = connect_unix(upstream);
    if (s < 0) {
      ::close(c);
      continue;
    }
    ::fcntl(s, F_SETFL, ::fcntl(s, F_GETFL) | O_NONBLOCK);
    no_delay(c);
    if (connected) connected();
    Link& l = links.emplace_back();
    l.up.from = c, l.up.to = s;
    l.down.from = s, l.down.to = c;
  }
  clients.clear();
}

}  // namespace

FrontDoor::FrontDoor() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw_errno("pmix: cannot create the ranks' PMIx socket");
  sockaddr_in a = loopback(0);
  socklen_t len = sizeof a;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, SOMAXCONN) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    ::close(listen_fd_);
    errno = e;
    throw_errno("pmix: cannot listen on 127.0.0.1 for the ranks' PMIx connections");
  }
  port_ = ntohs(a.sin_port);
}

FrontDoor::~FrontDoor() {
  close_listener();
  for (int fd : admitted_) ::close(fd);
}

// Refused connections reach the job's stderr: the first few of each uid, so
// that a flood cannot bury the job's own output.
void FrontDoor::report_refusal(long uid) {
  constexpr int kShown = 3;
  const int n = ++refusals_[uid];
  if (n > kShown + 1) return;
  std::string line = "dlaunch-agent: warning: refused a connection to this job's PMIx port from " + describe_user(uid) +
                     ": only the job's user (uid " + std::to_string(::geteuid()) + ") may connect";
  if (n == kShown + 1) line += "; more from it are not shown";
  std::cerr << line + "\n";
}

// Accepts in rounds of kRound, each judged (and its refused connections
// closed) before the next, so that a flood holds at most a round's
// descriptors at once; kMaxTaken at most per call, so that the loop turns.
void FrontDoor::accept_waiting() {
  constexpr size_t kRound = 64, kMaxTaken = 4096;
  std::vector<int> accepted;
  for (size_t taken = 0; taken < kMaxTaken;) {
    accepted.clear();
    for (int c; accepted.size() < kRound && (c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0;)
      accepted.push_back(c);
    if (accepted.empty()) return;
    taken += accepted.size();
    judge(accepted);
  }
}

// The owners as the kernel reports them (wire/socket_owner.h), the same
// lookup the store and the control port make: the job's user's are
// admitted, every other (another user's, or a socket no process owns) closed.
void FrontDoor::judge(const std::vector<int>& accepted) {
  const auto owners = wire::local_peer_owners(accepted);
  for (size_t i = 0; i < accepted.size(); ++i) {
    const long uid = owners[i].uid ? static_cast<long>(*owners[i].uid) : -1;
    if (uid == static_cast<long>(::geteuid())) {
      admitted_.push_back(accepted[i]);
    } else {
      ::close(accepted[i]);
      report_refusal(uid);
    }
  }
}

bool FrontDoor::admit(int stop_fd) {
  while (admitted_.empty()) {
    if (listen_fd_ < 0) return false;
    pollfd fds[2] = {{stop_fd, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (fds[0].revents) return false;
    if (fds[1].revents & POLLIN) accept_waiting();
  }
  return true;
}

bool FrontDoor::admit_waiting() {
  if (listen_fd_ >= 0) accept_waiting();
  return !admitted_.empty();
}

bool FrontDoor::pending() const {
  if (listen_fd_ < 0) return false;
  pollfd p{listen_fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

void FrontDoor::close_listener() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

void FrontDoor::relay(const std::string& upstream, int stop_fd, const std::function<void()>& connected) {
  std::list<Link> links;
  std::vector<pollfd> fds;
  std::vector<std::pair<Link*, int>> owner;  // fds[i + 2] belongs to link, 0: client fd, 1: server fd
  for (;;) {
    link_to(upstream, admitted_, links, connected);
    fds.assign({{stop_fd, POLLIN, 0}, {listen_fd_, static_cast<short>(listen_fd_ >= 0 ? POLLIN : 0), 0}});
    owner.clear();
    for (auto& l : links) {
      short client_ev = 0, server_ev = 0;
      if (!l.up.eof && l.up.buf.size() < kMaxBuffered) client_ev |= POLLIN;
      if (!l.down.buf.empty()) client_ev |= POLLOUT;
      if (!l.down.eof && l.down.buf.size() < kMaxBuffered) server_ev |= POLLIN;
      if (!l.up.buf.empty()) server_ev |= POLLOUT;
      fds.push_back({l.up.from, client_ev, 0});
      owner.emplace_back(&l, 0);
      fds.push_back({l.down.from, server_ev, 0});
      owner.emplace_back(&l, 1);
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) break;
    if (fds[0].revents) break;
    if (fds[1].revents & POLLIN) accept_waiting();
    for (size_t i = 2; i < fds.size(); ++i) {
      Link& l = *owner[i - 2].first;
      const short ev = fds[i].revents;
      if (ev == 0 || l.broken) continue;
      Flow& in = owner[i - 2].second == 0 ? l.up : l.down;    // read from this fd
      Flow& out = owner[i - 2].second == 0 ? l.down : l.up;   // write to this fd
      if ((ev & (POLLIN | POLLHUP | POLLERR)) && !in.eof && !pull(in)) l.broken = true;
      if (!l.broken && !push(in)) l.broken = true;
      if (!l.broken && (ev & (POLLOUT | POLLERR)) && !push(out)) l.broken = true;
      // The peer is gone (both directions): nothing more can reach it.
      if ((ev & POLLERR) || ((ev & POLLHUP) && in.eof)) l.broken = true;
    }
    for (auto it = links.begin(); it != links.end();) {
      if (!it->done()) { ++it; continue; }
      ::close(it->up.from);
      ::close(it->down.from);
      it = links.erase(it);
    }
  }
  for (auto& l : links) ::close(l.up.from), ::close(l.down.from);
}

}  // namespace dl::mpi::pmix
