// How a host's link to the job's store is made (rendezvous/host/store_upstream.h,
// wire/async_connect.h): at the first request that must go up, without
// holding up the io thread that serves the door, and what the door's clients
// hear when the store cannot be reached. Real sockets and a real server.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>

#include "errors/error.h"
#include "tests/rendezvous/host_env.h"

using namespace dl::rdzv;
using namespace dl::rdzv::testing;
using namespace std::chrono_literals;
using State = StoreUpstream::State;

namespace {
// A TCP socket on a loopback port of its own: listening but never accepting
// (connects complete, nobody answers the handshake), or not listening at
// all (connects are refused).
struct Port {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  uint16_t number = 0;
  explicit Port(bool listening) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    if (listening) REQUIRE(::listen(fd, 16) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    number = ntohs(a.sin_port);
  }
  ~Port() { close(); }
  void close() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// Counts turns of the host's io thread: a timer that fires every 5 ms there.
class Ticker {
 public:
  explicit Ticker(HostEnv& env) : env_(env), timer_(env.io) {
    env_.on_io([this] { return tick(), 0; });
  }
  ~Ticker() {
    env_.on_io([this] { return stopped_ = true, timer_.cancel(), 0; });
    env_.on_io([] { return 0; });  // after the cancelled wait's handler
  }
  int ticks() const { return ticks_; }

 private:
  void tick() {
    timer_.expires_after(5ms);
    timer_.async_wait([this](boost::system::error_code ec) {
      if (ec || stopped_) return;
      ++ticks_;
      tick();
    });
  }
  HostEnv& env_;
  boost::asio::steady_timer timer_;
  std::atomic<int> ticks_{0};
  bool stopped_ = false;
};

template <class F>
bool poll_until(F ready, std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

std::string store_error(TcpStore& s, const std::function<void(TcpStore&)>& op) {
  try {
    op(s);
  } catch (const dl::Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("store upstream: a door whose ranks make no request costs the server no connection", "[rendezvous]") {
  HostEnv env({2, 2});
  auto a = env.local(), b = env.local();
  CHECK(env.on_io([&] { return env.host->door().clients(); }) == 2);
  CHECK(env.on_io([&] { return env.host->upstream().state(); }) == State::kIdle);
  CHECK(env.server.server.server().connections_accepted() == 0);
  CHECK(a->add("first", 1) == 1);
  CHECK(env.on_io([&] { return env.host->upstream().state(); }) == State::kUp);
  CHECK(b->add("first", 1) == 2);
  CHECK(env.server.server.server().connections_accepted() == 1);
}

TEST_CASE("store upstream: LinkWhen::kNow links before the door opens", "[rendezvous]") {
  HostEnv env({1, 1}, {.when = LinkWhen::kNow});
  CHECK(env.server.server.server().connections_accepted() == 1);
  CHECK(env.on_io([&] { return env.host->upstream().state(); }) == State::kUp);
  CHECK(env.local()->add("k", 3) == 3);
  CHECK(env.server.server.server().connections_accepted() == 1);
}

TEST_CASE("store upstream: requests wait while the store is not up, the io thread serves on, and they go up once it is",
          "[rendezvous]") {
  Port refusing(false);
  const std::string token = dl::wire::new_token();
  HostEnv env({2, 2}, {.port = refusing.number, .token = token, .timeout = 30000ms});
  Ticker ticker(env);
  std::vector<int64_t> arrivals(2);
  std::thread ranks([&] { on_ranks(env, 2, [&](int i, TcpStore& s) { arrivals[i] = s.barrier("late", 2, 30000ms); }); });
  auto state = [&] { return env.on_io([&] { return env.host->upstream().state(); }); };
  REQUIRE(poll_until([&] { return state() == State::kConnecting; }, 10000ms));
  // The link is being tried and refused; the thread that tries it turns on.
  const int before = ticker.ticks();
  CHECK(poll_until([&] { return ticker.ticks() >= before + 20; }, 10000ms));
  CHECK(state() == State::kConnecting);
  refusing.close();
  BackgroundStoreServer late("127.0.0.1", refusing.number, token);
  ranks.join();
  std::sort(arrivals.begin(), arrivals.end());
  CHECK(arrivals == std::vector<int64_t>{1, 2});
  CHECK(late.server().connections_accepted() == 1);
  CHECK(env.sent_up() == 1);  // the two ranks' barrier, as one
}

TEST_CASE("store upstream: a store that never answers fails the waiting ranks naming its address, once",
          "[rendezvous]") {
  Port silent(true);
  HostEnv env({2, 2}, {.port = silent.number, .timeout = 1500ms});
  std::vector<std::string> said;
  env.on_io([&] { return env.host->upstream().set_on_unreachable([&](const std::string& why) { said.push_back(why); }), 0; });
  Ticker ticker(env);
  std::vector<std::string> errors(2);
  on_ranks(env, 2, [&](int i, TcpStore& s) {
    errors[i] = store_error(s, [](TcpStore& t) { t.barrier("never", 2, 30000ms); });
  });
  const std::string store = "store at 127.0.0.1:" + std::to_string(silent.number);
  for (const auto& e : errors) {
    INFO(e);
    CHECK(e.find("link to the job's store could not be made: no handshake with " + store + " within") != std::string::npos);
    CHECK(e.find("no answer to the handshake within") != std::string::npos);
  }
  // 1.5 s of trying, and the thread turned meanwhile (every 5 ms).
  CHECK(ticker.ticks() >= 20);
  // A later request is told at once, and the agent's callback heard it once.
  CHECK(store_error(*env.local(), [](TcpStore& t) { t.add("later", 1); }).find("could not be made") != std::string::npos);
  REQUIRE(env.on_io([&] { return said.size(); }) == 1);
  CHECK(said[0].find(store) != std::string::npos);
}

TEST_CASE("store upstream: a store that refuses connections is tried again until the timeout", "[rendezvous]") {
  Port refusing(false);
  HostEnv env({1, 1}, {.port = refusing.number, .timeout = 1000ms});
  const std::string e = store_error(*env.local(), [](TcpStore& t) { t.get("k"); });
  INFO(e);
  CHECK(e.find("no handshake with store at 127.0.0.1:" + std::to_string(refusing.number)) != std::string::npos);
  CHECK(e.find(" tries; the last: could not connect to 127.0.0.1:") != std::string::npos);
  CHECK(e.find("refused") != std::string::npos);
}

TEST_CASE("store upstream: a store holding another token fails the link at once, not tried again", "[rendezvous]") {
  HostEnv env({1, 1}, {.token = dl::wire::new_token(), .timeout = 30000ms});
  const std::string e = store_error(*env.local(), [](TcpStore& t) { t.add("k", 1); });
  INFO(e);
  CHECK(e.find("does not hold this job's token") != std::string::npos);
  CHECK(env.server.server.server().connections_accepted() == 1);
}

TEST_CASE("store upstream: a link that could not be made is tried again at a later launch once its pause is over",
          "[rendezvous]") {
  Port refusing(false);
  const std::string token = dl::wire::new_token();
  HostEnv env({2, 2}, {.port = refusing.number, .token = token, .timeout = 500ms});
  std::vector<std::string> said;
  env.on_io([&] { return env.host->upstream().set_on_unreachable([&](const std::string& why) { said.push_back(why); }), 0; });
  const std::string store = "store at 127.0.0.1:" + std::to_string(refusing.number);
  // The first launch's ranks: refused until the link's timeout.
  std::vector<std::string> errors(2);
  on_ranks(env, 2, [&](int i, TcpStore& s) {
    errors[i] = store_error(s, [](TcpStore& t) { t.barrier("first", 2, 30000ms); });
  });
  for (const auto& e : errors) {
    INFO(e);
    CHECK(e.find("link to the job's store could not be made: no handshake with " + store) != std::string::npos);
  }
  CHECK(env.on_io([&] { return env.host->upstream().state(); }) == State::kUnreachable);
  // The store comes up on that port. The next launches' ranks ask until the
  // pause is over: those in it are told at once, without a try; the first
  // after it makes the link, and the barrier passes.
  refusing.close();
  BackgroundStoreServer late("127.0.0.1", refusing.number, token);
  int launches = 0;
  std::string in_pause;
  const bool passed = poll_until([&] {
    std::vector<std::string> errs(2);
    const std::string key = "launch/" + std::to_string(++launches);
    on_ranks(env, 2, [&](int i, TcpStore& s) { errs[i] = store_error(s, [&](TcpStore& t) { t.barrier(key, 2, 30000ms); }); });
    if (errs[0] == "(no error)" && errs[1] == "(no error)") return true;
    in_pause = errs[0] != "(no error)" ? errs[0] : errs[1];
    return false;
  }, 20000ms);
  INFO(in_pause);
  REQUIRE(passed);
  CHECK(env.on_io([&] { return env.host->upstream().state(); }) == State::kUp);
  CHECK(late.server().connections_accepted() == 1);
  // One failed try, heard once: the requests in the pause made none.
  REQUIRE(env.on_io([&] { return said.size(); }) == 1);
  CHECK(said[0].find(store) != std::string::npos);
  if (launches > 1) {
    CHECK(in_pause.find("could not be made: no handshake with " + store) != std::string::npos);
    CHECK(in_pause.find("tried again at a request") != std::string::npos);
  }
}

TEST_CASE("store upstream: the pause between tries of a store that stays away grows", "[rendezvous]") {
  Port refusing(false);
  HostEnv env({1, 1}, {.port = refusing.number, .timeout = 200ms});
  auto client = env.local();
  auto pause_left = [&] {
    const std::string e = store_error(*client, [](TcpStore& t) { t.add("k", 1); });
    INFO(e);
    REQUIRE(e.find("could not be made") != std::string::npos);
    const auto at = e.find("tried again at a request ");
    return at == std::string::npos ? -1 : std::stol(e.substr(at + 25));
  };
  CHECK(pause_left() == -1);  // the first try's own failure
  const long first = pause_left();
  CHECK(first > 0);
  CHECK(first <= 2000);
  // Past the first pause: a second try, refused again, then a longer pause.
  REQUIRE(poll_until([&] { return pause_left() == -1; }, 10000ms));
  const long second = pause_left();
  CHECK(second > 2000);
  CHECK(second <= 4000);
}
