// The TCP store server's store/2 requests (rendezvous/store_protocol.h):
// ids, replies in any order, many parked requests on one connection, and the
// combined operations a host's forwarder sends, beside store/1 clients.
#include <map>
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
using proto::Op;
using proto::Request;
using proto::Status;

namespace {
// A blocking store/2 client on a raw socket: sends requests under ids and
// reads replies as they come, decoding each by its request's op.
struct Client2 {
  dl::wire::Socket s;
  std::map<uint32_t, Op> ops;

  explicit Client2(TcpEnv& env) : s(dl::wire::connect_tcp("127.0.0.1", env.server.port(), 5000ms)) {
    dl::wire::client_handshake(s, env.token, proto::kStoreTag, "test store");
  }
  void send(uint32_t id, const Request& r) {
    ops[id] = r.op;
    dl::wire::send_all(s, proto::frame_with_id(proto::kRequest2, id, proto::encode(r)), "store");
  }
  std::pair<uint32_t, proto::Reply> next() {
    auto f = dl::wire::read_frame(s, proto::kMaxFramePayload, 10000ms, "store");
    if (f.type != proto::kReply2) throw dl::RemoteError("frame type " + std::to_string(f.type) + ": " + f.payload);
    auto t = proto::split_id(f.payload);
    REQUIRE(ops.count(t.id));
    return {t.id, proto::decode_reply(t.payload, ops[t.id])};
  }
};

Request get(const std::string& key, uint32_t timeout_ms = 10000) { return {Op::kGet, {key}, {}, {}, timeout_ms}; }

Request weighted(const std::string& key, int64_t count, int64_t weight) {
  Request r{Op::kBarrierWeighted, {key}, {}, {}, 10000};
  r.count = count, r.weight = weight;
  return r;
}

Request gather_many(const std::string& prefix, int64_t count, std::vector<proto::Contribution> parts) {
  Request r{Op::kAllGatherMany, {prefix}, {}, {}, 10000};
  r.count = count, r.parts = std::move(parts);
  return r;
}
}  // namespace

TEST_CASE("store/2: parked requests on one connection are answered in any order with their ids", "[rendezvous]") {
  TcpEnv env;
  Client2 c(env);
  c.send(1, get("a"));
  c.send(2, get("b"));
  c.send(3, {Op::kNumKeys, {}, {}, {}, 0});
  auto [id, r] = c.next();  // not held up by the two parked gets
  CHECK(id == 3);
  CHECK(r.number == 0);
  auto other = env.client();
  other->set("b", "bee");
  std::tie(id, r) = c.next();
  CHECK(id == 2);
  CHECK(r.value == "bee");
  other->set("a", "ay");
  std::tie(id, r) = c.next();
  CHECK(id == 1);
  CHECK(r.value == "ay");
}

TEST_CASE("store/2: a weighted barrier arrival counts for several callers beside store/1 ones", "[rendezvous]") {
  TcpEnv env;
  Client2 c(env);
  c.send(7, weighted("bar", 5, 4));
  auto other = env.client();
  CHECK(other->barrier("bar", 5, 10000ms) == 5);  // 4 arrivals came as one
  auto [id, r] = c.next();
  CHECK(id == 7);
  CHECK(r.status == Status::kOk);
  CHECK(r.number == 4);
}

TEST_CASE("store/2: an all-gather takes several ranks' values in one request", "[rendezvous]") {
  TcpEnv env;
  Client2 a(env), b(env);
  a.send(1, gather_many("ids", 4, {{0, "zero"}, {2, "two"}}));
  b.send(9, gather_many("ids", 4, {{3, "three"}}));
  auto other = env.client();
  const std::vector<Bytes> want = {"zero", "one", "two", "three"};
  CHECK(other->all_gather("ids", 1, 4, "one", 10000ms) == want);
  for (Client2* c : {&a, &b}) {
    auto [id, r] = c->next();
    CHECK(r.status == Status::kOk);
    CHECK(proto::decode_values(r.value) == want);
  }
}

TEST_CASE("store/2: ids in use, repeated ranks and too many parked requests are refused, the connection kept",
          "[rendezvous]") {
  TcpEnv env;
  Client2 c(env);
  c.send(5, get("never"));
  c.send(5, get("also never"));
  auto [id, r] = c.next();
  CHECK(id == 5);
  CHECK(r.status == Status::kError);
  CHECK_THAT(r.value, Catch::Contains("id 5 is in use"));
  c.send(6, gather_many("g", 4, {{1, "x"}, {1, "y"}}));
  std::tie(id, r) = c.next();
  CHECK(r.status == Status::kError);
  CHECK_THAT(r.value, Catch::Contains("rank 1 contributes twice"));
  c.send(8, weighted("w", 4, 0));
  std::tie(id, r) = c.next();
  CHECK(r.status == Status::kError);
  CHECK_THAT(r.value, Catch::Contains("weight of 0"));
  // 5 is parked: kMaxParked - 1 more fill the connection, the next is refused.
  for (uint32_t i = 0; i < proto::kMaxParked - 1; ++i) c.send(100 + i, get("never"));
  c.send(99, get("never"));
  std::tie(id, r) = c.next();
  CHECK(id == 99);
  CHECK_THAT(r.value, Catch::Contains("requests parked on one store/2 connection"));
  env.client()->set("never", "now");
  size_t answered = 0;
  while (answered < proto::kMaxParked) {
    std::tie(id, r) = c.next();
    REQUIRE(r.value == "now");
    ++answered;
  }
}

TEST_CASE("store/2: a frame too short for its id closes the connection with a reason", "[rendezvous]") {
  TcpEnv env;
  Client2 c(env);
  dl::wire::write_frame(c.s, proto::kRequest2, "ab", "store");
  auto f = dl::wire::read_frame(c.s, proto::kMaxFramePayload, 10000ms, "store");
  CHECK(f.type == dl::wire::kErrorText);
  CHECK_THAT(f.payload, Catch::Contains("truncated request id"));
  CHECK(env.client()->num_keys() == 0);  // the server serves on
}

TEST_CASE("store/2: all-gather lists answered while another is still being sent arrive whole and in turn",
          "[rendezvous]") {
  TcpEnv env;
  Client2 c(env);
  const std::string big(12u << 20, 'x');  // over the socket buffers: the first list is still on its way
  c.send(1, gather_many("g1", 2, {{0, big}}));
  auto other = env.client();
  other->all_gather("g1", 1, 2, "one", 10000ms);
  // The first list is on its way to c, which reads nothing yet: its next
  // request is still served (a store/2 reply names its request, so nothing
  // need wait for the list to be gone), and both complete before c reads a byte.
  c.send(2, gather_many("g2", 2, {{0, "small"}}));
  other->all_gather("g2", 1, 2, "two", 10000ms);
  std::map<uint32_t, std::vector<std::string>> lists;
  for (int i = 0; i < 2; ++i) {
    auto [id, r] = c.next();
    REQUIRE(r.status == Status::kOk);
    lists[id] = proto::decode_values(r.value);
  }
  CHECK(lists[1] == std::vector<std::string>{big, "one"});
  CHECK(lists[2] == std::vector<std::string>{"small", "two"});
}
