// The agent's early PMIx address (mpi/pmix/front_door.h) and the rank
// environment written before the server exists (predicted_rank_env): real
// sockets and, for the prediction, a real libpmix server in this process
// (each ctest case is its own process).
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

#include "mpi/pmix/front_door.h"
#include "mpi/pmix/listener_seal.h"
#include "mpi/pmix/pmix_server.h"
#include "errors/error.h"

using namespace dl::mpi::pmix;
using dl::mpi::JobMap;

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

// A new socket's connect() to 127.0.0.1:port: 0, or -1 with errno set.
int try_connect(int fd, uint16_t port) {
  const sockaddr_in a = loopback(port);
  return ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(try_connect(fd, port) == 0);
  return fd;
}

// Reads exactly n bytes (5 s at most per read).
std::string read_n(int fd, size_t n) {
  std::string out;
  char buf[4096];
  while (out.size() < n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    ssize_t got = ::read(fd, buf, std::min(sizeof buf, n - out.size()));
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

// An upstream "server": a Unix socket in a fresh temp dir, as libpmix's
// sealed listener is.
struct EchoServer {
  int fd = -1;
  std::string dir, path;
  EchoServer() {
    char tmpl[] = "/tmp/dl_door.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    path = dir + "/s";
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, path.c_str());
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 16) == 0);
  }
  ~EchoServer() {
    ::close(fd);
    std::filesystem::remove_all(dir);
  }
};

// A child that becomes 'nobody' connects to `port`, writes and waits for an
// answer. 0: the door closed the connection; 5: no answer within 5 s; other
// codes: the child could not become nobody (3) or connect (4), or got bytes (6).
int knock_as_nobody(uint16_t port) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (try_connect(fd, port) != 0) ::_exit(4);
    (void)!::write(fd, "hello", 5);
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) ::_exit(5);
    char c;
    ::_exit(::read(fd, &c, 1) <= 0 ? 0 : 6);
  }
  int st = 0;
  REQUIRE(::waitpid(child, &st, 0) == child);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace

TEST_CASE("front door: a client that connects before the server exists is relayed once it does", "[pmix]") {
  FrontDoor door;
  REQUIRE(door.port() != 0);
  CHECK_FALSE(door.pending());
  // The rank connects and sends its handshake before anything serves it.
  int client = connect_loopback(door.port());
  std::string hello(100000, 'h');  // larger than one read, and not uniform
  for (size_t i = 0; i < hello.size(); i += 7) hello[i] = static_cast<char>('a' + i % 26);
  // More than the socket buffers may hold before anyone reads: a thread.
  std::thread writer([&] {
    size_t sent = 0;
    while (sent < hello.size()) {
      ssize_t n = ::send(client, hello.data() + sent, hello.size() - sent, 0);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
  });
  for (int i = 0; i < 100 && !door.pending(); ++i) ::usleep(10000);
  CHECK(door.pending());

  // Only now does the server exist.
  EchoServer upstream;
  int stop[2];
  REQUIRE(::pipe(stop) == 0);
  std::thread relay([&] { door.relay(upstream.path, stop[0]); });
  int s = ::accept(upstream.fd, nullptr, nullptr);
  REQUIRE(s >= 0);
  writer.join();
  std::string got = read_n(s, hello.size());
  CHECK(got == hello);
  const std::string reply = "welcome";
  REQUIRE(::send(s, reply.data(), reply.size(), 0) == static_cast<ssize_t>(reply.size()));
  CHECK(read_n(client, reply.size()) == reply);

  // The client leaves: the server sees EOF (after whatever was still queued).
  ::close(client);
  char c;
  ssize_t n;
  do {
    pollfd p{s, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);
    n = ::read(s, &c, 1);
  } while (n > 0);
  CHECK(n == 0);
  ::close(s);

  REQUIRE(::write(stop[1], "x", 1) == 1);
  relay.join();
  ::close(stop[0]);
  ::close(stop[1]);
}

TEST_CASE("front door: a client of another user is closed, never relayed", "[pmix]") {
  if (::geteuid() != 0) {
    WARN("needs root to connect as another user; skipped");
    return;
  }
  FrontDoor door;
  EchoServer upstream;
  int stop[2];
  REQUIRE(::pipe(stop) == 0);
  std::thread relay([&] { door.relay(upstream.path, stop[0]); });
  // A child that becomes 'nobody' connects, writes and waits for a reply.
  CHECK(knock_as_nobody(door.port()) == 0);
  // Upstream never saw a connection.
  pollfd p{upstream.fd, POLLIN, 0};
  CHECK(::poll(&p, 1, 200) == 0);
  // The owner's own client still gets through afterwards.
  int mine = connect_loopback(door.port());
  pollfd q{upstream.fd, POLLIN, 0};
  CHECK(::poll(&q, 1, 5000) == 1);
  ::close(mine);
  REQUIRE(::write(stop[1], "x", 1) == 1);
  relay.join();
  ::close(stop[0]);
  ::close(stop[1]);
}

TEST_CASE("front door: closed, it refuses clients at once", "[pmix]") {
  FrontDoor door;
  const uint16_t port = door.port();
  door.close_listener();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(try_connect(fd, port) != 0);
  CHECK(errno == ECONNREFUSED);
  ::close(fd);
}

TEST_CASE("predicted rank environment is what libpmix's setup_fork gives", "[pmix]") {
  char tmpl[] = "/tmp/dl_pmix_test.XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  select_hash_store();  // as the agent does before its server thread starts
  JobMap m;
  m.nspace = "dlaunch.predict";
  m.world_size = 3;
  m.node_rank = 1;
  m.node_hosts = {"hostA", "plan-name"};
  m.node_ranks = {{0}, {1, 2}};
  m.tmpdir = tmpl;
  dl::mpi::MpiHooks cb;
  cb.post = [](std::function<void()> t) { t(); };
  auto server = PmixServer::init(tmpl, "", false);
  server->register_job(m, cb);
  for (int rank : {1, 2}) {
    const auto real = server->rank_env(rank);
    const auto predicted = predicted_rank_env(m, rank, 4242);
    const auto diff = env_mismatches(predicted, real);
    for (const auto& d : diff) UNSCOPED_INFO(d);
    CHECK(diff.empty());
    for (const auto& [k, v] : predicted)
      if (k == "PMIX_SERVER_URI41") CHECK(v == server_nspace() + ".0;tcp4://127.0.0.1:4242");
    for (const auto& [k, v] : real)
      if (k == "PMIX_SERVER_URI41") CHECK(uri_port(v) != 0);
  }
  CHECK_THROWS_AS(predicted_rank_env(m, 0, 4242), dl::UsageError);  // lives on hostA
  // A mismatch is named.
  auto wrong = predicted_rank_env(m, 1, 4242);
  wrong.emplace_back("PMIX_EXTRA", "1");
  CHECK(env_mismatches(wrong, server->rank_env(1)).size() == 1);
  // The hash store keeps nothing on disk: only the directories we made.
  for (auto& e : std::filesystem::recursive_directory_iterator(tmpl)) CHECK(e.is_directory());
  server->stop();
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("PMIX_VERSION is compared by its numbers: the headers' 4.2.2 agrees with 4.2.2rc2, not with 4.2.3", "[pmix]") {
  using V = std::vector<std::pair<std::string, std::string>>;
  CHECK(env_mismatches(V{{"PMIX_VERSION", "4.2.2"}}, V{{"PMIX_VERSION", "4.2.2rc2"}}).empty());
  CHECK(env_mismatches(V{{"PMIX_VERSION", "4.2.2"}}, V{{"PMIX_VERSION", "4.2.2"}}).empty());
  const auto diff = env_mismatches(V{{"PMIX_VERSION", "4.2.2"}}, V{{"PMIX_VERSION", "4.2.3"}});
  REQUIRE(diff.size() == 1);
  CHECK(diff[0] == "PMIX_VERSION: predicted '4.2.2', libpmix '4.2.3'");
  CHECK(env_mismatches(V{{"PMIX_VERSION", "4.2.2"}}, V{{"PMIX_VERSION", "5.0.1"}}).size() == 1);
}

TEST_CASE("front door: admit waits through another user's connection, and admits the owner's", "[pmix]") {
  if (::geteuid() != 0) {
    WARN("needs root to connect as another user; skipped");
    return;
  }
  FrontDoor door;
  int stop[2];
  REQUIRE(::pipe(stop) == 0);
  std::atomic<int> admitted{-1};
  std::thread waiter([&] { admitted = door.admit(stop[0]) ? 1 : 0; });
  CHECK(knock_as_nobody(door.port()) == 0);
  CHECK(admitted.load() == -1);  // still waiting: nobody's connection admitted nothing
  int mine = connect_loopback(door.port());
  waiter.join();
  CHECK(admitted.load() == 1);
  ::close(mine);
  ::close(stop[0]);
  ::close(stop[1]);
}

TEST_CASE("front door: admit returns false when told to stop", "[pmix]") {
  FrontDoor door;
  int stop[2];
  REQUIRE(::pipe(stop) == 0);
  REQUIRE(::write(stop[1], "x", 1) == 1);
  CHECK_FALSE(door.admit(stop[0]));
  ::close(stop[0]);
  ::close(stop[1]);
}

TEST_CASE("listener seal: the same descriptor accepts on the Unix socket, a select() begun before wakes, the TCP port goes",
          "[pmix]") {
  const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a = loopback(0);
  socklen_t len = sizeof a;
  REQUIRE(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(l, 16) == 0);
  REQUIRE(::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const uint16_t port = ntohs(a.sin_port);
  // A client libpmix accepted before the seal.
  const int early = connect_loopback(port);
  pollfd p{l, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 5000) == 1);
  const int accepted = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  REQUIRE(accepted >= 0);
  // libpmix's listener thread: select() on the descriptor, 30 s turns.
  std::atomic<int> selected{-2};
  std::thread listener([&] {
    fd_set r;
    FD_ZERO(&r);
    FD_SET(l, &r);
    timeval tv{30, 0};
    selected = ::select(l + 1, &r, nullptr, nullptr, &tv);
  });
  ::usleep(200000);  // let it sleep in select() (if not yet, it selects on the Unix socket: also fine)

  char tmpl[] = "/tmp/dl_seal.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string path = std::string(tmpl) + "/pmix.sock";
  ListenerSeal seal(port, path);
  sockaddr_un u{};
  u.sun_family = AF_UNIX;
  std::strcpy(u.sun_path, path.c_str());
  const int unix_client = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(::connect(unix_client, reinterpret_cast<sockaddr*>(&u), sizeof u) == 0);
  seal.wake();
  listener.join();
  CHECK(selected.load() == 1);  // woken, not timed out after 30 s
  const int via_unix = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  CHECK(via_unix >= 0);

  int tcp = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(try_connect(tcp, port) != 0);
  CHECK(errno == ECONNREFUSED);
  ::close(tcp);

  std::vector<long> cut;
  TcpClientSweeper sweeper(port, [&](long uid) { cut.push_back(uid); });
  CHECK(sweeper.sweep() == 1);
  CHECK(cut.empty());  // cut, but not named: it is the owner's own
  CHECK(sweeper.sweep() == 0);  // each socket once
  char c;
  pollfd e{early, POLLIN, 0};
  REQUIRE(::poll(&e, 1, 5000) == 1);
  CHECK(::read(early, &c, 1) == 0);  // the early client sees its connection end

  for (int fd : {early, accepted, unix_client, via_unix, l}) ::close(fd);
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("listener seal: no listener on the port is an error, and nothing is changed", "[pmix]") {
  char tmpl[] = "/tmp/dl_seal.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string path = std::string(tmpl) + "/pmix.sock";
  FrontDoor door;  // a listener, but of another port
  CHECK_THROWS_AS(ListenerSeal(static_cast<uint16_t>(door.port() + 1), path), dl::IoError);
  CHECK_FALSE(std::filesystem::exists(path));
  std::filesystem::remove_all(tmpl);
}
