// Mesh setup (collectives/tcp/mesh.h) when others connect to a rank's port:
// whatever a connection does before its greeting completes, it is dropped
// and the real ranks still connect, without waiting on it. The greeting's
// decoder on its own is tested first; the attack by a real second user on a
// real job is in tests/security/collectives_test.cc.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <future>
#include <thread>

#include <catch2/catch.hpp>

#include "collectives/tcp/acceptor.h"
#include "collectives/tcp/greeting.h"
#include "collectives/tcp/mesh.h"
#include "errors/error.h"
#include "rendezvous/hash_store.h"
#include "wire/coding.h"
#include "wire/frame.h"
#include "wire/handshake.h"

using namespace dl;
using namespace dl::coll::tcp;
using Catch::Matchers::Contains;
using SClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

const std::string kToken = "mesh-test-token";

std::string be32(uint32_t v) {
  char b[4];
  wire::put_be32(b, v);
  return std::string(b, 4);
}

// Feeds `bytes` to g one byte at a time, as a trickling peer would.
void trickle(Greeting& g, const std::string& bytes) {
  for (char c : bytes) g.feed(std::string_view(&c, 1));
}

// The client's hello and, given the server's answer, its proof, as frames.
struct Client {
  wire::ClientHandshake hs{kToken, kHandshakeTag, "rank 0"};
  std::string hello() const { return wire::encode_frame(wire::kHandshake, hs.hello()); }
  std::string proof(const std::string& answer_frame) {
    wire::FrameParser p(1024);
    p.feed(answer_frame.data(), answer_frame.size());
    return wire::encode_frame(wire::kHandshake, hs.finish(*p.next()));
  }
};

MeshConfig config(rdzv::Store& store, int rank, int size, milliseconds timeout) {
  return MeshConfig{&store, "m", rank, size, kToken, "127.0.0.1", "h", timeout};
}

uint16_t port_of(rdzv::Store& store, int rank) {
  const std::string v = store.get("m/peer/" + std::to_string(rank));
  return wire::split_host_port(v.substr(v.find('\n') + 1), "test").second;
}

wire::Socket dial(uint16_t port) { return wire::connect_tcp("127.0.0.1", port, milliseconds(5000)); }

// A whole greeting as rank `me` over a fresh connection; the verdict frame.
wire::Frame greet(uint16_t port, int me, wire::Socket* keep = nullptr) {
  wire::Socket s = dial(port);
  wire::client_handshake(s, kToken, kHandshakeTag, "rank 0", milliseconds(5000));
  wire::send_all(s, be32(static_cast<uint32_t>(me)), "rank 0");
  wire::Frame f = wire::read_frame(s, 512, milliseconds(5000), "rank 0");
  if (keep) *keep = std::move(s);
  return f;
}

// True when the peer closes `s` within `within`.
bool closed_within(const wire::Socket& s, milliseconds within) {
  const auto end = SClock::now() + within;
  char b[64];
  while (SClock::now() < end) {
    pollfd p{s.fd(), POLLIN, 0};
    ::poll(&p, 1, 20);
    if (p.revents && ::recv(s.fd(), b, sizeof b, MSG_DONTWAIT) <= 0) return true;
  }
  return false;
}

// Rank 0 of `size` in a thread, the other ranks' entries published by hand.
struct LoneRankZero {
  rdzv::HashStore store;
  std::future<std::vector<MeshPeer>> done;
  LoneRankZero(int size, milliseconds timeout, milliseconds greeting) {
    for (int r = 1; r < size; ++r) store.set("m/peer/" + std::to_string(r), "h\n127.0.0.1:1");
    MeshConfig c = config(store, 0, size, timeout);
    c.greeting_timeout = greeting;
    done = std::async(std::launch::async, [this, c] { return connect_mesh(c); });
  }
};

// A non-blocking listening socket on 127.0.0.1, port 0.
wire::Socket listen_loopback(uint16_t& port) {
  wire::Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(s.fd(), 16) == 0);
  ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return s;
}

}  // namespace

TEST_CASE("greeting: a rank's whole greeting, fed a byte at a time, names it and reads nothing more",
          "[collectives]") {
  Greeting g(kToken, 1, 4);
  Client c;
  trickle(g, c.hello());
  REQUIRE(g.state() == Greeting::State::kProof);
  const std::string rest = c.proof(g.take_reply()) + be32(3) + "after";
  size_t used = 0;
  while (used < rest.size() && g.wanted() > 0) used += g.feed(std::string_view(rest).substr(used));
  CHECK(g.state() == Greeting::State::kDone);
  CHECK(g.peer() == 3);
  CHECK(rest.substr(used) == "after");  // left for the transports
  CHECK(g.wanted() == 0);
}

TEST_CASE("greeting: refusals are states with a reason, never exceptions", "[collectives]") {
  SECTION("a rank that does not connect to this one") {
    for (uint32_t bad : {0u, 1u, 4u, 0xffffffffu}) {
      Greeting g(kToken, 1, 4);
      Client c;
      trickle(g, c.hello());
      trickle(g, c.proof(g.take_reply()) + be32(bad));
      CHECK(g.state() == Greeting::State::kRefused);
      CHECK_THAT(g.error(), Contains("does not connect to rank 1"));
      CHECK(g.take_reply().find("does not connect") != std::string::npos);  // told, as kErrorText
    }
  }
  SECTION("a frame over the limit, refused at its header") {
    Greeting g(kToken, 0, 2);
    g.feed(std::string("\x7f\xff\xff\xff\x00", 5));
    CHECK(g.state() == Greeting::State::kRefused);
    CHECK_THAT(g.error(), Contains("over the limit"));
  }
  SECTION("another token") {
    Greeting g("other-token", 0, 2);
    Client c;
    trickle(g, c.hello());
    CHECK_THROWS_AS(c.proof(g.take_reply()), AuthError);
    trickle(g, wire::encode_frame(wire::kHandshake, std::string(32, 'x')));
    CHECK(g.state() == Greeting::State::kRefused);
    CHECK_THAT(g.error(), Contains("does not hold this job's token"));
  }
  SECTION("another protocol's tag, kept printable in the reason") {
    Greeting g(kToken, 0, 2);
    wire::ClientHandshake other(kToken, "coll/\x1b[31m", "x");
    trickle(g, wire::encode_frame(wire::kHandshake, other.hello()));
    CHECK(g.state() == Greeting::State::kRefused);
    CHECK(g.error().find('\x1b') == std::string::npos);
  }
}

TEST_CASE("mesh: intruders that close, stay silent or send garbage cost the real ranks no time",
          "[collectives]") {
  rdzv::HashStore store;
  MeshConfig c0 = config(store, 0, 2, milliseconds(20000)), c1 = config(store, 1, 2, milliseconds(20000));
  c0.greeting_timeout = milliseconds(5000);
  auto r0 = std::async(std::launch::async, [&] { return connect_mesh(c0); });
  store.wait({"m/peer/0"}, milliseconds(10000));
  const uint16_t port = port_of(store, 0);
  std::vector<wire::Socket> intruders;
  for (int i = 0; i < 5; ++i) {
    dial(port).close();                         // connect and close
    intruders.push_back(dial(port));            // connect and say nothing
    intruders.push_back(dial(port));            // a valid hello, then nothing
    wire::send_all(intruders.back(), Client().hello(), "x");
    intruders.push_back(dial(port));            // garbage
    wire::send_all(intruders.back(), "GET / HTTP/1.0\r\n\r\n", "x");
  }
  const auto t0 = SClock::now();
  auto r1 = std::async(std::launch::async, [&] { return connect_mesh(c1); });
  auto m0 = r0.get(), m1 = r1.get();
  const auto ms = std::chrono::duration_cast<milliseconds>(SClock::now() - t0).count();
  CHECK(ms < 2500);  // one silent intruder waited out would take 5000
  REQUIRE(m0[1].sock.valid());
  REQUIRE(m1[0].sock.valid());
  wire::write_frame(m1[0].sock, wire::kData, "hi", "rank 0");
  CHECK(wire::read_frame(m0[1].sock, 16, milliseconds(5000), "rank 1").payload == "hi");
  for (auto& s : intruders) CHECK(closed_within(s, milliseconds(5000)));
}

TEST_CASE("mesh: a connection that does not finish its greeting in time is dropped while the rank waits",
          "[collectives]") {
  LoneRankZero z(2, milliseconds(20000), milliseconds(300));
  z.store.wait({"m/peer/0"}, milliseconds(10000));
  const uint16_t port = port_of(z.store, 0);
  wire::Socket silent = dial(port);
  const auto t0 = SClock::now();
  CHECK(closed_within(silent, milliseconds(5000)));
  const auto ms = std::chrono::duration_cast<milliseconds>(SClock::now() - t0).count();
  CHECK(ms >= 250);
  CHECK(ms < 3000);
  CHECK(greet(port, 1).payload == kWelcome);
  CHECK(z.done.get()[1].sock.valid());
}

TEST_CASE("mesh: more intruders than it holds at once: the oldest go, the rank still gets in",
          "[collectives]") {
  LoneRankZero z(2, milliseconds(20000), milliseconds(20000));
  z.store.wait({"m/peer/0"}, milliseconds(10000));
  const uint16_t port = port_of(z.store, 0);
  std::vector<wire::Socket> silent;
  for (int i = 0; i < 200; ++i) silent.push_back(dial(port));
  const auto t0 = SClock::now();
  wire::Frame f;
  for (int tries = 0; tries < 50 && f.payload != kWelcome; ++tries) {
    try {
      f = greet(port, 1);
    } catch (const Error&) {
      // evicted by our own later intruders before its greeting ended: again
    }
  }
  CHECK(f.payload == kWelcome);
  CHECK(std::chrono::duration_cast<milliseconds>(SClock::now() - t0).count() < 5000);
  CHECK(z.done.get()[1].sock.valid());
}

TEST_CASE("mesh: a second connection claiming a connected rank is refused, naming the rank", "[collectives]") {
  LoneRankZero z(3, milliseconds(20000), milliseconds(5000));
  z.store.wait({"m/peer/0"}, milliseconds(10000));
  const uint16_t port = port_of(z.store, 0);
  wire::Socket one, two;
  CHECK(greet(port, 1, &one).payload == kWelcome);
  const wire::Frame again = greet(port, 1);
  CHECK(again.type == wire::kErrorText);
  CHECK_THAT(again.payload, Contains("rank 1 is connected already"));
  CHECK(greet(port, 2, &two).payload == kWelcome);
  auto mesh = z.done.get();
  CHECK(mesh[1].sock.valid());
  CHECK(mesh[2].sock.valid());
}

TEST_CASE("mesh: the timeout names the rank that never came and what was dropped", "[collectives]") {
  LoneRankZero z(2, milliseconds(1500), milliseconds(300));
  z.store.wait({"m/peer/0"}, milliseconds(10000));
  wire::Socket junk = dial(port_of(z.store, 0));
  wire::send_all(junk, std::string("\0\0\0\x03\0abc", 8), "x");
  try {
    z.done.get();
    FAIL("connect_mesh returned");
  } catch (const TimeoutError& e) {
    CHECK_THAT(e.what(), Contains("waiting for rank 1") && Contains("1 connection(s)") &&
                             Contains("malformed handshake hello"));
  }
}

TEST_CASE("mesh: a rank dropped before its welcome dials again and gets in", "[collectives]") {
  rdzv::HashStore store;
  uint16_t port = 0;
  wire::Socket lsn = listen_loopback(port);
  store.set("m/peer/0", "h\n127.0.0.1:" + std::to_string(port));
  auto r1 = std::async(std::launch::async, [&] { return connect_mesh(config(store, 1, 2, milliseconds(20000))); });
  // Rank 0's part by hand: the first connection is taken for an intruder
  // (as one slower than the greeting's bound is) and dropped after its
  // hello; the second after its whole greeting, without the welcome.
  pollfd p{lsn.fd(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10000) == 1);
  {
    wire::Socket first(::accept4(lsn.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    REQUIRE(first.valid());
    CHECK(wire::read_frame(first, 512, milliseconds(5000), "rank 1").type == wire::kHandshake);
  }
  REQUIRE(::poll(&p, 1, 10000) == 1);
  {
    wire::Socket second(::accept4(lsn.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    REQUIRE(second.valid());
    Greeting g(kToken, 0, 2);
    char b[600];
    while (g.wanted() > 0) {
      wire::recv_exact(second, b, 1, milliseconds(5000), "rank 1");
      g.feed(std::string_view(b, 1));
      wire::send_all(second, g.take_reply(), "rank 1");
    }
    CHECK(g.state() == Greeting::State::kDone);
  }
  std::vector<MeshPeer> peers(2);
  peers[1].info = dl::coll::PeerInfo{1, "h", "?"};
  accept_ranks(config(store, 0, 2, milliseconds(20000)), lsn, peers, SClock::now() + milliseconds(10000));
  REQUIRE(peers[1].sock.valid());
  auto m1 = r1.get();
  REQUIRE(m1[0].sock.valid());
  wire::write_frame(peers[1].sock, wire::kData, "hi", "rank 1");
  CHECK(wire::read_frame(m1[0].sock, 16, milliseconds(5000), "rank 0").payload == "hi");
}
