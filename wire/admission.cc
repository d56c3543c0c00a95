#include "wire/admission.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "wire/socket_owner.h"

namespace dl::wire {

PreAuthSlot::PreAuthSlot(std::shared_ptr<Counts> counts, std::string key)
    : counts_(std::move(counts)), key_(std::move(key)) {
  ++(*counts_)[key_];
}

PreAuthSlot& PreAuthSlot::operator=(PreAuthSlot&& o) noexcept {
  if (this != &o) {
    release();
    counts_ = std::move(o.counts_);
    key_ = std::move(o.key_);
  }
  return *this;
}

void PreAuthSlot::release() {
  if (!counts_) return;
  auto it = counts_->find(key_);
  if (it != counts_->end() && --it->second == 0) counts_->erase(it);
  counts_.reset();
}

namespace {

int open_spare() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

// The peer's address as text, "" when unknown.
std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  char buf[INET6_ADDRSTRLEN] = "";
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  if (ss.ss_family == AF_INET) ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in&>(ss).sin_addr, buf, sizeof buf);
  if (ss.ss_family == AF_INET6) ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6&>(ss).sin6_addr, buf, sizeof buf);
  return buf;
}

// Closes with a reset: no TIME_WAIT left behind per refused connection
// (a flood's thousands would fill the socket tables).
void close_now(int fd) {
  const linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

}  // namespace

Admission::Admission(Limits limits)
    : limits_(limits), counts_(std::make_shared<PreAuthSlot::Counts>()), spare_(open_spare()) {}

Admission::Admission() : Admission(Limits{}) {}

Admission::~Admission() {
  if (spare_ >= 0) ::close(spare_);
}

size_t Admission::waiting(const std::string& key) const {
  auto it = counts_->find(key);
  return it == counts_->end() ? 0 : it->second;
}

// Accepts in rounds of kRound, each judged (and its refused connections
// closed) before the next: a flood's connections never hold more than a
// round's descriptors at once.
Admission::Batch Admission::accept_pending(int listen_fd) {
  Batch b;
  std::vector<int> fds;
  while (b.taken < kMaxBatch) {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      fds.push_back(fd), ++b.taken;
      if (fds.size() == kRound) admit(fds, b), fds.clear();
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == EMFILE || errno == ENFILE) shed_one(listen_fd, b);
    else b.notes.push_back(std::string("accept failed: ") + std::strerror(errno));
    b.starved = true;
    break;
  }
  if (!fds.empty()) admit(fds, b);
  report_refused(b);
  return b;
}

// Out of descriptors: the spare one lets a pending connection be taken off
// the backlog and closed, so that the queue moves (a closed intruder's
// connection makes room for the next, maybe a rank's).
void Admission::shed_one(int listen_fd, Batch& b) {
  std::string what = std::string("accept failed: ") + std::strerror(errno);
  if (spare_ >= 0) {
    ::close(spare_);
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) close_now(fd), what += ": closed a pending connection to keep the backlog moving";
    spare_ = open_spare();
  }
  b.notes.push_back(what + " (raise the descriptor limit, ulimit -n)");
}

// Counts each accepted connection against its peer and closes those over
// the limit. The peers are looked up with the spare descriptor given up for
// the moment: a server out of descriptors still tells users apart.
void Admission::admit(std::vector<int>& fds, Batch& b) {
  if (spare_ >= 0) ::close(spare_), spare_ = -1;
  const auto owners = local_peer_owners(fds);
  spare_ = open_spare();
  const unsigned me = ::geteuid();
  for (size_t i = 0; i < fds.size(); ++i) {
    const PeerOwner& o = owners[i];
    if (o.uid && *o.uid == me && limits_.own_user_unlimited) {
      b.admitted.push_back({fds[i], "this user", {}});
      continue;
    }
    // A local peer whose socket is already gone counts as one more local user.
    const std::string key = o.uid ? "uid " + std::to_string(*o.uid) : o.local ? "local uid ?" : peer_address(fds[i]);
    const size_t cap = o.local ? limits_.per_local_user : limits_.per_address;
    const std::string who = o.uid ? name_of(*o.uid) : o.local ? "a local user" : key;
    if (waiting(key) >= cap) {
      close_now(fds[i]);
      auto& r = refused_[key];
      r.who = who, r.cap = cap, ++r.unreported;
      continue;
    }
    b.admitted.push_back({fds[i], who, PreAuthSlot(counts_, key)});
  }
}

// "user X (uid N)", looked up once per user (a lookup needs a descriptor).
std::string Admission::name_of(unsigned uid) {
  auto it = names_.find(uid);
  if (it != names_.end()) return it->second;
  std::string name = describe_uid(uid);
  if (name.rfind("user ", 0) == 0) names_[uid] = name;  // a bare "uid N" may be named later
  return name;
}

// One note per peer and second at most: a flood is told, not echoed.
void Admission::report_refused(Batch& b) {
  const auto now = std::chrono::steady_clock::now();
  for (auto it = refused_.begin(); it != refused_.end();) {
    Refused& r = it->second;
    const bool due = now - r.reported >= std::chrono::seconds(1);
    if (due && r.unreported > 0) {
      b.notes.push_back("closed " + std::to_string(r.unreported) + " connection" + (r.unreported == 1 ? "" : "s") +
                        " from " + r.who + " at once: it already holds " + std::to_string(r.cap) +
                        " that have not passed the token handshake");
      r.unreported = 0, r.reported = now;
    }
    if (r.unreported == 0 && now - r.reported >= std::chrono::seconds(10)) it = refused_.erase(it);
    else ++it;
  }
}

}  // namespace dl::wire
