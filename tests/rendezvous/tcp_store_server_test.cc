// The TCP store server under bad clients, and under a thousand good ones.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include <catch2/catch.hpp>

#include "errors/error.h"
#include "rendezvous/store_protocol.h"
#include "tests/rendezvous/store_envs.h"
#include "wire/handshake.h"
#include "wire/socket.h"

using namespace dl::rdzv;
using namespace dl::rdzv::testing;
using namespace std::chrono_literals;

namespace {
dl::wire::Socket raw(TcpEnv& env, bool authenticate) {
  auto s = dl::wire::connect_tcp("127.0.0.1", env.server.port(), 5000ms);
  if (authenticate) dl::wire::client_handshake(s, env.token, proto::kStoreTag, "test store");
  return s;
}

// Reads until the server closes; returns the kErrorText payloads seen.
std::string read_until_closed(const dl::wire::Socket& s) {
  std::string texts;
  for (;;) {
    try {
      auto f = dl::wire::read_frame(s, proto::kMaxFramePayload, 5000ms, "store");
      if (f.type == dl::wire::kErrorText) texts += f.payload;
    } catch (const dl::RemoteError&) {
      return texts;  // closed
    }
  }
}

void still_serving(TcpEnv& env) {
  auto c = env.client();
  CHECK(c->get("keep") == "intact");
  c->set("after", "ok");
  CHECK(c->get("after") == "ok");
}
}  // namespace

TEST_CASE("tcp store refuses a wrong token and serves on", "[rendezvous]") {
  TcpEnv env;
  env.client()->set("keep", "intact");
  CHECK_THROWS_AS(TcpStore("127.0.0.1", env.server.port(), "not-the-token", 5000ms), dl::AuthError);
  still_serving(env);
}

TEST_CASE("tcp store closes clients sending garbage, oversized or malformed frames", "[rendezvous]") {
  TcpEnv env;
  env.client()->set("keep", "intact");
  SECTION("garbage before the handshake") {
    auto s = raw(env, false);
    dl::wire::send_all(s, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "store");
    CHECK_THAT(read_until_closed(s), Catch::Contains("handshake"));
  }
  SECTION("oversized frame after the handshake") {
    auto s = raw(env, true);
    const uint32_t n = proto::kMaxFramePayload + 1;
    const char header[5] = {char(n >> 24), char(n >> 16), char(n >> 8), char(n), char(proto::kRequest)};
    dl::wire::send_all(s, std::string_view(header, 5), "store");
    CHECK_THAT(read_until_closed(s), Catch::Contains("over the limit"));
  }
  SECTION("malformed request") {
    auto s = raw(env, true);
    dl::wire::write_frame(s, proto::kRequest, "\xff\x01", "store");
    CHECK_THAT(read_until_closed(s), Catch::Contains("malformed"));
  }
  still_serving(env);
}

TEST_CASE("tcp store refuses keys and values over the limit, connection stays usable", "[rendezvous]") {
  TcpEnv env;
  auto c = env.client();
  c->set("keep", "intact");
  // Sets are pipelined: the refusal comes with the next call, or flush().
  try {
    c->set(std::string(proto::kMaxKeySize + 1, 'k'), "v");
    c->flush();
    FAIL("no error");
  } catch (const dl::RemoteError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("over the limit of 4096"));
  }
  c->set("big", std::string(proto::kMaxValueSize + 1, 'v'));
  CHECK_THROWS_AS(c->flush(), dl::RemoteError);
  CHECK_FALSE(c->check({"big"}));
  CHECK(c->get("keep") == "intact");  // same connection
  still_serving(env);
}

TEST_CASE("tcp store survives a client vanishing inside a wait", "[rendezvous]") {
  TcpEnv env;
  env.client()->set("keep", "intact");
  auto waiter = env.client();
  std::thread t([&] { waiter->wait({"released"}, 10000ms); });
  {
    auto s = raw(env, true);
    proto::Request r{proto::Op::kWait, {"released", "never"}, {}, {}, 60000};
    dl::wire::write_frame(s, proto::kRequest, proto::encode(r), "store");
    std::this_thread::sleep_for(100ms);
  }  // closed inside its wait
  std::this_thread::sleep_for(100ms);
  env.client()->set("released", "yes");
  t.join();  // the other waiter was answered
  still_serving(env);
}

TEST_CASE("tcp store: 1000 clients pass a barrier", "[rendezvous][slow]") {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  constexpr int kClients = 1000;
  if (lim.rlim_cur < 2 * kClients + 64) {
    WARN("skipped: RLIMIT_NOFILE hard limit " << lim.rlim_max << " is too low for " << kClients << " clients");
    return;
  }
  TcpEnv env;
  std::vector<std::unique_ptr<Store>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(env.client());
  std::atomic<int> passed{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kClients; ++i) {
    ts.emplace_back([&, i] {
      if (clients[i]->add("arrived", 1) == kClients) clients[i]->set("go", "1");
      clients[i]->wait({"go"}, 30000ms);
      ++passed;
    });
  }
  for (auto& t : ts) t.join();
  CHECK(passed == kClients);
  CHECK(clients[0]->get("arrived") == std::to_string(kClients));
}

namespace {
std::string request_frame(const proto::Request& r) {
  return dl::wire::encode_frame(proto::kRequest, proto::encode(r));
}

proto::Reply read_reply(const dl::wire::Socket& s, proto::Op op) {
  auto f = dl::wire::read_frame(s, proto::kMaxFramePayload, 5000ms, "store");
  REQUIRE(f.type == proto::kReply);
  proto::Reply r;
  REQUIRE_NOTHROW(r = proto::decode_reply(f.payload, op));  // well-formed
  return r;
}

// Sends the hello on `s` and reads the server's answer; returns the proof
// frame, not yet sent: the real one, or with `forged` 32 bytes that are not.
std::string start_handshake(const dl::wire::Socket& s, const std::string& token, bool forged = false) {
  dl::wire::ClientHandshake hs(token, proto::kStoreTag, "test store");
  dl::wire::write_frame(s, dl::wire::kHandshake, hs.hello(), "store");
  auto answer = dl::wire::read_frame(s, dl::wire::kMaxHandshakePayload, 5000ms, "store");
  std::string proof = hs.finish(answer);
  return dl::wire::encode_frame(dl::wire::kHandshake, forged ? std::string(proof.size(), 'z') : proof);
}
}  // namespace

TEST_CASE("tcp store answers pipelined requests in order, whole or split across reads", "[rendezvous]") {
  TcpEnv env;
  auto s = raw(env, true);
  using proto::Op;
  std::string batch = request_frame({Op::kSet, {"p"}, "one", {}, 0}) + request_frame({Op::kAdd, {"n"}, {}, {}, 5}) +
                      request_frame({Op::kAdd, {"n"}, {}, {}, -2}) + request_frame({Op::kGet, {"p"}, {}, {}, 1000}) +
                      request_frame({Op::kWait, {"p", "n"}, {}, {}, 1000}) +
                      request_frame({Op::kCheck, {"p", "absent"}, {}, {}, 0}) +
                      request_frame({Op::kNumKeys, {}, {}, {}, 0});
  SECTION("in one send") { dl::wire::send_all(s, batch, "store"); }
  SECTION("a few bytes at a time") {
    for (size_t at = 0; at < batch.size(); at += 7) {
      dl::wire::send_all(s, std::string_view(batch).substr(at, 7), "store");
      std::this_thread::sleep_for(1ms);
    }
  }
  CHECK(read_reply(s, Op::kSet).status == proto::Status::kOk);
  CHECK(read_reply(s, Op::kAdd).number == 5);
  CHECK(read_reply(s, Op::kAdd).number == 3);
  CHECK(read_reply(s, Op::kGet).value == "one");
  CHECK(read_reply(s, Op::kWait).status == proto::Status::kOk);
  CHECK(read_reply(s, Op::kCheck).number == 0);
  CHECK(read_reply(s, Op::kNumKeys).number == 2);
}

TEST_CASE("tcp store: requests behind a parked wait run after it, in order", "[rendezvous]") {
  TcpEnv env;
  auto s = raw(env, true);
  using proto::Op;
  dl::wire::send_all(s, request_frame({Op::kWait, {"later"}, {}, {}, 10000}) + request_frame({Op::kAdd, {"n"}, {}, {}, 1}),
                     "store");
  std::this_thread::sleep_for(100ms);
  auto other = env.client();
  CHECK_FALSE(other->check({"n"}));  // the add waits behind the wait
  other->set("later", "now");
  CHECK(read_reply(s, Op::kWait).status == proto::Status::kOk);
  CHECK(read_reply(s, Op::kAdd).number == 1);
}

TEST_CASE("tcp store handles requests sent right behind the handshake proof", "[rendezvous]") {
  TcpEnv env;
  auto s = dl::wire::connect_tcp("127.0.0.1", env.server.port(), 5000ms);
  std::string proof = start_handshake(s, env.token);
  using proto::Op;
  dl::wire::send_all(s, proof + request_frame({Op::kSet, {"piped"}, "yes", {}, 0}) +
                            request_frame({Op::kAdd, {"count"}, {}, {}, 1}), "store");
  CHECK(read_reply(s, Op::kSet).status == proto::Status::kOk);
  CHECK(read_reply(s, Op::kAdd).number == 1);
  CHECK(env.client()->get("piped") == "yes");
}

TEST_CASE("tcp store executes nothing sent behind a failed handshake", "[rendezvous]") {
  TcpEnv env;
  env.client()->set("keep", "intact");
  auto s = dl::wire::connect_tcp("127.0.0.1", env.server.port(), 5000ms);
  // A client without the token cannot make a proof; one that sends a forged
  // one with requests behind it gets nothing executed.
  std::string forged = start_handshake(s, env.token, true);
  using proto::Op;
  dl::wire::send_all(s, forged + request_frame({Op::kSet, {"evil"}, "1", {}, 0}) +
                            request_frame({Op::kAdd, {"count"}, {}, {}, 1}) +
                            request_frame({Op::kDelete, {"keep"}, {}, {}, 0}), "store");
  CHECK_THAT(read_until_closed(s), Catch::Contains("token"));
  auto c = env.client();
  CHECK_FALSE(c->check({"evil"}));
  CHECK_FALSE(c->check({"count"}));
  still_serving(env);
}

TEST_CASE("tcp store sends a reply larger than the socket buffer to a slow reader", "[rendezvous]") {
  TcpEnv env;
  auto c = env.client();
  std::string big(8u << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + (i / 4096) % 26);
  c->set("big", big);
  auto s = raw(env, true);
  using proto::Op;
  dl::wire::send_all(s, request_frame({Op::kGet, {"big"}, {}, {}, 1000}) + request_frame({Op::kNumKeys, {}, {}, {}, 0}),
                     "store");
  std::this_thread::sleep_for(200ms);  // the server meets a full socket meanwhile
  CHECK(read_reply(s, Op::kGet).value == big);
  CHECK(read_reply(s, Op::kNumKeys).number == 1);
  CHECK(c->get("big") == big);
}

TEST_CASE("tcp store: a client that leaves a barrier is forgotten, the others pass", "[rendezvous]") {
  TcpEnv env;
  env.client()->set("keep", "intact");
  {
    auto s = raw(env, true);
    proto::Request req{proto::Op::kBarrier, {"b"}, {}, {}, 10000};
    req.count = 3;
    dl::wire::send_all(s, request_frame(req), "store");
    auto probe = env.client();
    while (probe->add("b", 0) < 1) std::this_thread::sleep_for(5ms);
  }  // closed while parked: its arrival stays counted, its waiter goes
  auto a = env.client(), b = env.client();
  std::thread t([&] { CHECK(a->barrier("b", 3, 5000ms) >= 2); });
  CHECK(b->barrier("b", 3, 5000ms) >= 2);
  t.join();
  // A parked barrier holds the connection's later requests, like a wait.
  auto s = raw(env, true);
  proto::Request req{proto::Op::kBarrier, {"c"}, {}, {}, 10000};
  req.count = 2;
  dl::wire::send_all(s, request_frame(req) + request_frame({proto::Op::kAdd, {"after"}, {}, {}, 1}), "store");
  std::this_thread::sleep_for(100ms);
  CHECK_FALSE(env.client()->check({"after"}));
  CHECK(env.client()->barrier("c", 2, 5000ms) == 2);
  CHECK(read_reply(s, proto::Op::kBarrier).number == 1);
  CHECK(read_reply(s, proto::Op::kAdd).number == 1);
  still_serving(env);
}

namespace {
// A listener on 127.0.0.1, port 0, that accepts nothing itself; stop()
// closes it.
struct ClosingListener {
  int fd = -1;
  uint16_t port = 0;
  ClosingListener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 16) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~ClosingListener() { stop(); }
  void stop() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};
}  // namespace

TEST_CASE("tcp store client: closed and refused tries are tried again until the store serves", "[rendezvous]") {
  ClosingListener l;
  const std::string token = dl::wire::new_token();
  std::unique_ptr<BackgroundStoreServer> server;
  // The port's first holder closes two connections and goes; the store
  // takes the port a moment later (connections meanwhile are refused).
  std::thread t([&] {
    for (int i = 0; i < 2; ++i) ::close(::accept(l.fd, nullptr, nullptr));
    l.stop();
    std::this_thread::sleep_for(300ms);
    server = std::make_unique<BackgroundStoreServer>("127.0.0.1", l.port, token);
  });
  std::unique_ptr<TcpStore> c;
  try {
    c = std::make_unique<TcpStore>("127.0.0.1", l.port, token, 20000ms);
  } catch (...) {
    t.join();
    throw;
  }
  t.join();
  c->set("k", "v");
  CHECK(c->get("k") == "v");
}

TEST_CASE("tcp store client: a silent server's error names the store, the wait and the tries", "[rendezvous]") {
  ClosingListener l;  // listens and never accepts: the kernel completes connects, nobody answers
  const auto t0 = std::chrono::steady_clock::now();
  std::string err;
  try {
    TcpStore("127.0.0.1", l.port, dl::wire::new_token(), 2500ms);
  } catch (const dl::TimeoutError& e) {
    err = e.what();
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK_THAT(err, Catch::Contains("no handshake with store at 127.0.0.1:" + std::to_string(l.port) + " within") &&
                      Catch::Contains("tries") && Catch::Contains("no reply from store"));
  CHECK(took >= 2400ms);
  CHECK(took < 4500ms);
}
