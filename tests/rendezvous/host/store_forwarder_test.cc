// A host's store door and forwarder (rendezvous/host/host_store.h) in-process,
// over real sockets: local TcpStore clients on the door's AF_UNIX socket, one
// store/2 link to a real TcpStoreServer, and what the server sees of them.
// How the link is made: store_upstream_test.cc.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <set>
#include <thread>

#include <catch2/catch.hpp>

#include "errors/error.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/host/host_store.h"
#include "tests/rendezvous/host_env.h"

using namespace dl::rdzv;
using namespace dl::rdzv::testing;
using namespace std::chrono_literals;


TEST_CASE("store forwarder: 8 local ranks pass a barrier with one request and one connection upstream",
          "[rendezvous]") {
  HostEnv env({8, 8});
  std::vector<int64_t> arrivals(8);
  on_ranks(env, 8, [&](int i, TcpStore& s) { arrivals[i] = s.barrier("start", 8, 10000ms); });
  std::sort(arrivals.begin(), arrivals.end());
  CHECK(arrivals == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(env.sent_up() == 1);
  CHECK(env.server.server.server().connections_accepted() == 1);
}

TEST_CASE("store forwarder: a host's all-gather goes up as one request, each rank gets the list", "[rendezvous]") {
  HostEnv env({12, 8});
  auto direct = env.server.client();  // ranks 8-11 of the job, on another host
  std::vector<std::string> want;
  for (int r = 0; r < 12; ++r) want.push_back("v" + std::to_string(r));
  std::thread others([&] {
    std::vector<std::thread> ts;
    for (int r = 8; r < 12; ++r) ts.emplace_back([&, r] {
      auto s = env.server.client();
      CHECK(s->all_gather("ids", r, 12, want[r], 10000ms) == want);
    });
    for (auto& t : ts) t.join();
  });
  on_ranks(env, 8, [&](int i, TcpStore& s) { CHECK(s.all_gather("ids", i, 12, want[i], 10000ms) == want); });
  others.join();
  CHECK(env.sent_up() == 1);
}

TEST_CASE("store forwarder: local waiters of one key are answered by one upstream get", "[rendezvous]") {
  HostEnv env({8, 8});
  std::vector<std::string> got(8);
  uint64_t sent_while_parked = 0;
  std::thread setter([&] {
    // The value comes once every rank is parked on it.
    auto s = env.server.client();
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (env.on_io([&] { return env.host->forwarder().waiting_gets(); }) < 8 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(1ms);
    sent_while_parked = env.sent_up();
    s->set("addr", "10.0.0.1:29500");
  });
  on_ranks(env, 8, [&](int i, TcpStore& s) { got[i] = s.get("addr"); });
  setter.join();
  CHECK(std::count(got.begin(), got.end(), "10.0.0.1:29500") == 8);
  CHECK(sent_while_parked == 1);
}

TEST_CASE("store forwarder: adds of many local ranks give each its own running total", "[rendezvous]") {
  HostEnv env({8, 8});
  std::vector<std::vector<int64_t>> seen(8);
  on_ranks(env, 8, [&](int i, TcpStore& s) {
    for (int k = 0; k < 200; ++k) seen[i].push_back(s.add("n", 1));
  });
  std::set<int64_t> all;
  for (const auto& v : seen) {
    CHECK(std::is_sorted(v.begin(), v.end()));
    all.insert(v.begin(), v.end());
  }
  CHECK(all.size() == 1600);
  CHECK(*all.begin() == 1);
  CHECK(*all.rbegin() == 1600);
  CHECK(env.server.client()->add("n", 0) == 1600);
}

TEST_CASE("store forwarder: a sub-group's barrier goes up after its window, other ops pass through", "[rendezvous]") {
  HostEnv env({8, 8});
  std::thread third([&] { CHECK(env.server.client()->barrier("pair", 3, 10000ms) >= 1); });
  on_ranks(env, 2, [&](int i, TcpStore& s) {
    if (i == 0) {
      s.set("k", "v");
      CHECK(s.get("k") == "v");
    }
    CHECK(s.barrier("pair", 3, 10000ms) >= 1);
  });
  third.join();
  CHECK(env.server.client()->get("pair") == "3");
  CHECK(env.server.client()->num_keys() == 2);
}

TEST_CASE("store forwarder: a barrier some local ranks never reach times out naming its key", "[rendezvous]") {
  HostEnv env({8, 8});
  on_ranks(env, 2, [&](int, TcpStore& s) {
    CHECK_THROWS_WITH(s.barrier("stuck", 8, 300ms), Catch::Contains("stuck"));
  });
}

TEST_CASE("store door: a wrong token and another user are refused, the door serves on", "[rendezvous]") {
  HostEnv env({1, 1});
  CHECK_THROWS_AS(TcpStore(StoreDoorPath{env.host->door_path()}, "not-the-token", 2000ms), dl::AuthError);
  // Another user reaching the socket (the file's mode would stop it first).
  REQUIRE(::chmod(env.dir.path.c_str(), 0777) == 0);
  REQUIRE(::chmod(env.host->door_path().c_str(), 0777) == 0);
  // The child only makes system calls: the parent has other threads, whose
  // locks (malloc's) a forked child must not touch.
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", env.host->door_path().c_str());
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(3);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ::_exit(5);
    char c;
    ::_exit(::read(fd, &c, 1) == 0 ? 0 : 4);  // closed before a byte
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  if (::geteuid() != 0) {
    WARN("not root: the other user's connection is not tried");
    return;
  }
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(env.local()->add("still", 1) == 1);
}

TEST_CASE("store forwarder: when the server goes, parked local callers are told so at once", "[rendezvous]") {
  HostEnv env({1, 1});
  auto s = env.local();
  std::thread stopper([&] {
    const auto until = std::chrono::steady_clock::now() + 10s;
    // Parked, and gone up: the link is made at the first request.
    auto parked = [&] {
      return env.host->forwarder().waiting_gets() == 1 && env.host->upstream().state() == StoreUpstream::State::kUp;
    };
    while (!env.on_io(parked) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    env.server.server.server().stop();
  });
  CHECK_THROWS_WITH(s->get("never"), Catch::Contains("link to the job's store broke"));
  stopper.join();
}

TEST_CASE("store door: env:// connects to DLAUNCH_STORE_DOOR before DLAUNCH_STORE_ADDR", "[rendezvous]") {
  HostEnv env({1, 1});
  Environment vars{{"DLAUNCH_STORE_DOOR", env.host->door_path()},
                   {"DLAUNCH_STORE_ADDR", "127.0.0.1:1"},  // nothing there: the door is used
                   {"DLAUNCH_TOKEN", env.server.token}};
  auto s = connect_store("env://", 0, 1, 5000ms, vars);
  CHECK(s->add("through-door", 2) == 2);
  CHECK(env.server.client()->add("through-door", 0) == 2);
  CHECK(env.server.server.server().connections_accepted() == 2);  // the host's link and the check's client
}

TEST_CASE("store forwarder: a rank that left a barrier before it went up is not counted (a restarted job)",
          "[rendezvous]") {
  HostEnv env({2, 2});
  {
    // The killed attempt's rank: arrives, and is gone before its host's other rank comes.
    auto s = dl::wire::connect_unix(env.host->door_path());
    dl::wire::client_handshake(s, env.server.token, proto::kStoreTag, "store door");
    proto::Request req{proto::Op::kBarrier, {"b"}, {}, {}, 10000};
    req.count = 2;
    dl::wire::write_frame(s, proto::kRequest, proto::encode(req), "store door");
  }
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (env.on_io([&] { return env.host->door().clients(); }) > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(1ms);
  std::vector<int64_t> arrivals(2);
  on_ranks(env, 2, [&](int i, TcpStore& s) { arrivals[i] = s.barrier("b", 2, 5000ms); });
  std::sort(arrivals.begin(), arrivals.end());
  CHECK(arrivals == std::vector<int64_t>{1, 2});
  CHECK(env.server.client()->add("b", 0) == 2);
}
