// wire/admission.h: a peer's unauthenticated connections are capped, the
// ones over the cap closed at once, and accept keeps the backlog moving when
// it runs out of descriptors. Real sockets on loopback; this process's own
// user is counted as a peer (own_user_unlimited = false).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "wire/admission.h"
#include "wire/socket.h"

using namespace dl::wire;

namespace {

struct Listener {
  int fd = -1;
  uint16_t port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 64) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
  // Waits until a connection is pending.
  void wait_pending() const {
    pollfd p{fd, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);
  }
};

// True when the server closed `s` (EOF or reset) within `ms`.
bool closed_by_server(const Socket& s, int ms) {
  pollfd p{s.fd(), POLLIN, 0};
  if (::poll(&p, 1, ms) != 1) return false;
  char c;
  return ::recv(s.fd(), &c, 1, MSG_DONTWAIT) <= 0;
}

std::vector<Socket> connect_n(const Listener& l, int n) {
  std::vector<Socket> out;
  for (int i = 0; i < n; ++i) out.push_back(connect_tcp("127.0.0.1", l.port, Millis(2000)));
  return out;
}

// Accepts until `want` connections came in (admitted or closed) or 5 s pass.
Admission::Batch accept_all(Admission& adm, const Listener& l, size_t want) {
  Admission::Batch all;
  for (int i = 0; i < 100 && all.admitted.size() < want; ++i) {
    l.wait_pending();
    auto b = adm.accept_pending(l.fd);
    for (auto& a : b.admitted) all.admitted.push_back(std::move(a));
    for (auto& n : b.notes) all.notes.push_back(n);
    if (!b.notes.empty()) break;
  }
  return all;
}

}  // namespace

TEST_CASE("admission: a local user's connections over its cap are closed at once", "[wire]") {
  Listener l;
  Admission adm({3, 100, false});
  auto clients = connect_n(l, 5);
  // All five are in the backlog before the first accept (connect returns once the kernel queued it).
  auto b = adm.accept_pending(l.fd);
  REQUIRE(b.admitted.size() == 3);
  const std::string me = "uid " + std::to_string(::geteuid());
  CHECK(adm.waiting(me) == 3);
  REQUIRE(b.notes.size() == 1);
  CHECK_THAT(b.notes[0], Catch::Contains("closed 2 connections from ") && Catch::Contains("(" + me + ")") &&
                             Catch::Contains("already holds 3"));
  CHECK(b.admitted[0].peer.find(me) != std::string::npos);
  // The last two are the ones closed; the first three stay open.
  CHECK(closed_by_server(clients[3], 2000));
  CHECK(closed_by_server(clients[4], 2000));
  CHECK_FALSE(closed_by_server(clients[0], 50));
  // One authenticates (its slot is released): room for one more, not two.
  b.admitted[0].slot.release();
  CHECK(adm.waiting(me) == 2);
  auto more = connect_n(l, 2);
  l.wait_pending();
  auto b2 = accept_all(adm, l, 1);
  CHECK(b2.admitted.size() == 1);
  CHECK(adm.waiting(me) == 3);
  // Closing the sessions frees every place.
  for (auto& a : b.admitted) ::close(a.fd);
  for (auto& a : b2.admitted) ::close(a.fd);
  b.admitted.clear(), b2.admitted.clear();
  CHECK(adm.waiting(me) == 0);
}

TEST_CASE("admission: this process's own user is not limited", "[wire]") {
  Listener l;
  Admission adm({2, 2, true});
  auto clients = connect_n(l, 6);
  auto b = accept_all(adm, l, 6);
  CHECK(b.admitted.size() == 6);
  CHECK(b.notes.empty());
  for (auto& a : b.admitted) {
    CHECK(a.peer == "this user");
    ::close(a.fd);
  }
}

TEST_CASE("admission: out of descriptors, a pending connection is closed and accept goes on", "[wire]") {
  Listener l;
  Admission adm;
  auto clients = connect_n(l, 1);
  l.wait_pending();
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  // Every descriptor up to a low limit taken.
  std::vector<int> filler;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0 && filler.size() < 4096;) filler.push_back(fd);
  rlimit low{static_cast<rlim_t>(filler.back() + 1), saved.rlim_max};
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  Admission::Batch b;
  // No REQUIRE before the limit is back: Catch2 needs descriptors to report.
  b = adm.accept_pending(l.fd);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  for (int fd : filler) ::close(fd);
  CHECK(b.starved);
  CHECK(b.admitted.empty());
  REQUIRE(b.notes.size() == 1);
  CHECK_THAT(b.notes[0], Catch::Contains("closed a pending connection") && Catch::Contains("ulimit -n"));
  CHECK(closed_by_server(clients[0], 2000));
  // With descriptors again, the next one is accepted.
  auto next = connect_n(l, 1);
  auto b2 = accept_all(adm, l, 1);
  CHECK(b2.admitted.size() == 1);
  for (auto& a : b2.admitted) ::close(a.fd);
}

TEST_CASE("admission: a slot moved keeps one place, released once", "[wire]") {
  auto counts = std::make_shared<PreAuthSlot::Counts>();
  {
    PreAuthSlot a(counts, "k");
    PreAuthSlot b(counts, "k");
    CHECK((*counts)["k"] == 2);
    PreAuthSlot c = std::move(a);
    c = std::move(b);  // c's first place is given back
    CHECK((*counts)["k"] == 1);
    c.release();
    c.release();
    CHECK(counts->count("k") == 0);
  }
  CHECK(counts->empty());
}
