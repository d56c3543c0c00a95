// The PMI server's sockets (mpi/pmi/pmi_service.h), real socketpairs: a
// rank's socket is registered with the loop only at watch_started, and what
// a rank wrote before that (even a rank that has ended since) is handled
// then: the request answered, the ended socket closed, the silent one
// answered when it speaks later.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "mpi/pmi/pmi_service.h"

using namespace dl::mpi::pmi;

namespace {
int open_fds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n;
}

PmiJob three_ranks() {
  PmiJob j;
  j.map.nspace = "dl-job";
  j.map.world_size = j.map.universe_size = 3;
  j.map.node_hosts = {"h0"};
  j.map.node_ranks = {{0, 1, 2}};
  j.process_mapping = process_mapping({{0, 1, 2}});
  j.serve = true;
  return j;
}

// What arrives on `fd` within 5 s, up to a newline, running `io` meanwhile.
std::string answer(boost::asio::io_context& io, int fd) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
    char buf[256];
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) got.append(buf, static_cast<size_t>(n));
  }
  return got;
}
}  // namespace

TEST_CASE("pmi service: sockets are watched once the ranks started, and what came before is handled then",
          "[mpich][pmi]") {
  boost::asio::io_context io;
  boost::asio::local::stream_protocol::socket warm(io);  // the loop's own descriptors (epoll, eventfd, timerfd) first
  const int before = open_fds();
  {
    PmiService svc(io, three_ranks(), PmiService::Hooks{[](uint64_t, std::string) {}, [](int, int, std::string) {}, {}});
    auto r0 = svc.open_rank(0), r1 = svc.open_rank(1), r2 = svc.open_rank(2);
    CHECK(r0.env == std::vector<std::pair<std::string, std::string>>{{"PMI_FD", "3"}});
    CHECK(open_fds() == before + 6);
    // Rank 0 asked before it was watched; rank 1 ended; rank 2 is silent.
    const std::string init = "cmd=init pmi_version=1 pmi_subversion=1\n";
    REQUIRE(::write(r0.child_fd, init.data(), init.size()) == static_cast<ssize_t>(init.size()));
    svc.close_child_end(1);
    // The ranks "started": the test holds their ends now.
    svc.child_end_closed(0), svc.child_end_closed(2);
    io.restart();
    io.run_for(std::chrono::milliseconds(50));
    char buf[64];
    CHECK(::recv(r0.child_fd, buf, sizeof buf, MSG_DONTWAIT) < 0);  // nothing is read before the watch
    svc.watch_started();
    CHECK(answer(io, r0.child_fd) == "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n");
    // Rank 1's socket was closed (both its ends gone), the others' kept.
    CHECK(open_fds() == before + 4);
    REQUIRE(::write(r2.child_fd, init.data(), init.size()) == static_cast<ssize_t>(init.size()));
    CHECK(answer(io, r2.child_fd) == "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n");
    CHECK(answer(io, r0.child_fd).empty());  // (one answer each, nothing twice)
    ::close(r0.child_fd), ::close(r2.child_fd);
  }
  CHECK(open_fds() == before);  // the service closed its ends
}

TEST_CASE("pmi service with a refuse hook (per-node mode): a rank's first bytes are refused, never answered",
          "[mpich][pmi][restart]") {
  boost::asio::io_context io;
  std::vector<int> refused;
  PmiService::Hooks hooks{[](uint64_t, std::string) {}, [](int, int, std::string) {}, {}};
  hooks.refuse = [&](int rank) { refused.push_back(rank); };
  PmiService svc(io, three_ranks(), std::move(hooks));
  auto r0 = svc.open_rank(0), r1 = svc.open_rank(1), r2 = svc.open_rank(2);
  const std::string init = "cmd=init pmi_version=1 pmi_subversion=1\n";
  // Rank 0 writes before it is watched, rank 2 after; rank 1 never does.
  REQUIRE(::write(r0.child_fd, init.data(), init.size()) == static_cast<ssize_t>(init.size()));
  svc.child_end_closed(0), svc.child_end_closed(1), svc.child_end_closed(2);
  svc.watch_started();
  CHECK(refused == std::vector<int>{0});
  REQUIRE(::write(r2.child_fd, init.data(), init.size()) == static_cast<ssize_t>(init.size()));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (refused.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
  CHECK(refused == std::vector<int>{0, 2});
  char c;
  // Closed without an answer: the rank's PMI client fails at once.
  CHECK(::recv(r0.child_fd, &c, 1, MSG_DONTWAIT) == 0);
  CHECK(::recv(r2.child_fd, &c, 1, MSG_DONTWAIT) == 0);
  CHECK(::recv(r1.child_fd, &c, 1, MSG_DONTWAIT) < 0);  // still open, silent
  ::close(r0.child_fd), ::close(r1.child_fd), ::close(r2.child_fd);
}
