// dlaunch's c10d store against torch's TCPStore client, byte for byte: an
// exchange of torch 2.x's client (validated dialect, written from its
// TCPStore.cpp and TCPStoreLibUvBackend.cpp) and one of Debian's torch 1.13
// (legacy dialect, as recorded between its client and its own server), then
// what the store refuses.
#include <future>
#include <mutex>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <catch2/catch.hpp>

#include "errors/error.h"
#include "rendezvous/c10d/c10d_keyspace.h"
#include "rendezvous/c10d/c10d_protocol.h"
#include "rendezvous/c10d/c10d_store.h"
#include "wire/socket.h"

using namespace dl::rdzv;
using namespace std::chrono_literals;

namespace {
struct Exchange {
  const char* what;
  const char* query;  // hex, as the client sends it
  const char* reply;  // hex, as torch's server answers it ("" = no reply)
};

// torch 2.x: VALIDATE and PING open the connection, then init_process_group's
// queries and the rest of the API (types one higher than the legacy ones).
const Exchange kTorch2[] = {
    {"VALIDATE", "00cef7853c", ""},
    {"PING 12345", "0d39300000", "39300000"},
    {"ADD init/ 1", "040500000000000000696e69742f0100000000000000", "0100000000000000"},
    {"SET pg/0/rank_0 = ab", "010b0000000000000070672f302f72616e6b5f3002000000000000006162", ""},
    {"WAIT pg/0/rank_0", "0601000000000000000b0000000000000070672f302f72616e6b5f30", "00"},
    {"GET pg/0/rank_0", "030b0000000000000070672f302f72616e6b5f30", "02000000000000006162"},
    {"CHECK pg/0/rank_0 pg/0/rank_1",
     "0502000000000000000b0000000000000070672f302f72616e6b5f300b0000000000000070672f302f72616e6b5f31", "01"},
    {"WAIT pg/0/rank_1 (parks)", "0601000000000000000b0000000000000070672f302f72616e6b5f31", ""},
    {"CANCEL_WAIT", "0c", "01"},
    {"COMPARE_SET cas '' -> x", "0203000000000000006361730000000000000000010000000000000078", "010000000000000078"},
    {"COMPARE_SET cas y -> z (fails)", "02030000000000000063617301000000000000007901000000000000007a",
     "010000000000000078"},
    {"APPEND cas y", "090300000000000000636173010000000000000079", ""},
    {"GET cas", "030300000000000000636173", "02000000000000007879"},
    {"MULTI_SET m1=v1 m2=v2",
     "0b020000000000000002000000000000006d310200000000000000763102000000000000006d3202000000000000007632", ""},
    {"MULTI_GET m1 m2", "0a020000000000000002000000000000006d3102000000000000006d32",
     "0200000000000000763102000000000000007632"},
    {"GETNUMKEYS", "07", "0500000000000000"},
    {"DELETE_KEY m2", "0802000000000000006d32", "0100000000000000"},
};

// Debian's torch 1.13 in init_process_group("gloo") with
// TORCHELASTIC_USE_AGENT_STORE=True: its TCPStore adds to "init/", gloo
// publishes rank 0's address and reads it back, torch's barrier counts.
const Exchange kTorch113[] = {
    {"ADD init/ 1", "030500000000000000696e69742f0100000000000000", "0100000000000000"},
    {"SET rank_0",
     "0027000000000000002f776f726b65722f617474656d70745f302f64656661756c745f70672f302f302f72616e6b5f300200000000000000"
     "766d",
     ""},
    {"WAIT rank_0",
     "05010000000000000027000000000000002f776f726b65722f617474656d70745f302f64656661756c745f70672f302f302f72616e6b5f30",
     "00"},
    {"GET rank_0", "0227000000000000002f776f726b65722f617474656d70745f302f64656661756c745f70672f302f302f72616e6b5f30",
     "0200000000000000766d"},
    {"ADD barrier 1",
     "0336000000000000002f776f726b65722f617474656d70745f302f64656661756c745f70672f73746f72655f62617365645f6261727269"
     "65725f6b65793a310100000000000000",
     "0100000000000000"},
    {"ADD barrier 0",
     "0336000000000000002f776f726b65722f617474656d70745f302f64656661756c745f70672f73746f72655f62617365645f6261727269"
     "65725f6b65793a310000000000000000",
     "0100000000000000"},
};

std::string unhex(std::string_view h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
  return out;
}

std::string hex(std::string_view b) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : b) out += d[c >> 4], out += d[c & 15];
  return out;
}

// A store on its own thread; what it refused, by reason.
struct Served {
  boost::asio::io_context io;
  std::unique_ptr<C10dStore> store;
  std::mutex mu;
  std::vector<std::string> refused;
  std::thread thread;
  Served() : Served(C10dStore::Options{}) {}
  explicit Served(C10dStore::Options o) {
    o.refused = [this](const std::string& why, const std::string&, bool) {
      std::lock_guard<std::mutex> l(mu);
      refused.push_back(why);
    };
    store = std::make_unique<C10dStore>(io, std::move(o));
    thread = std::thread([this] { io.run(); });
  }
  ~Served() {
    io.stop();
    thread.join();
    store.reset();
  }
  dl::wire::Socket client() { return dl::wire::connect_tcp("127.0.0.1", store->port(), 5000ms); }
  std::string first_refusal() {
    for (auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;) {
      {
        std::lock_guard<std::mutex> l(mu);
        if (!refused.empty()) return refused.front();
      }
      std::this_thread::sleep_for(5ms);
    }
    return "(nothing refused within 10 s)";
  }
};

// Sends every query at once (torch's client sends one at a time; the store
// must not care) and reads back exactly the replies torch's server sends.
void replay(Served& s, const Exchange* begin, const Exchange* end) {
  auto c = s.client();
  std::string queries, replies;
  for (auto* e = begin; e != end; ++e) queries += unhex(e->query), replies += unhex(e->reply);
  dl::wire::write_all_fd(c.fd(), queries);
  std::string got(replies.size(), '\0');
  dl::wire::recv_exact(c, got.data(), got.size(), 5000ms, "c10d store");
  CHECK(hex(got) == hex(replies));
}

// True when the server closed `c` (a read returns 0) within 5 s.
bool closed_by_server(const dl::wire::Socket& c) {
  char b;
  try {
    dl::wire::recv_exact(c, &b, 1, 5000ms, "c10d store");
  } catch (const dl::Error&) {
    return true;
  }
  return false;
}
}  // namespace

TEST_CASE("c10d store answers torch 2.x's recorded exchange byte for byte", "[rendezvous]") {
  Served s;
  replay(s, std::begin(kTorch2), std::end(kTorch2));
}

TEST_CASE("c10d store answers torch 1.13's recorded exchange byte for byte", "[rendezvous]") {
  Served s;
  replay(s, std::begin(kTorch113), std::end(kTorch113));
}

TEST_CASE("c10d store wakes a parked WAIT when another client sets the key", "[rendezvous]") {
  Served s;
  auto waiter = s.client(), setter = s.client();
  dl::wire::write_all_fd(waiter.fd(), unhex(kTorch2[0].query) + unhex(kTorch2[7].query));  // VALIDATE, WAIT rank_1
  dl::wire::write_all_fd(setter.fd(), unhex(kTorch2[0].query) + unhex(kTorch2[1].query));  // VALIDATE, PING
  char pong[4];
  dl::wire::recv_exact(setter, pong, 4, 5000ms, "c10d store");  // the WAIT has arrived before this SET
  dl::wire::write_all_fd(setter.fd(), unhex("010b0000000000000070672f302f72616e6b5f3102000000000000006364"));
  char stop = 1;
  dl::wire::recv_exact(waiter, &stop, 1, 5000ms, "c10d store");
  CHECK(stop == c10d::kStopWaiting);
}

TEST_CASE("c10d store refuses a query type it does not know and names it", "[rendezvous]") {
  Served s;
  auto c = s.client();
  dl::wire::write_all_fd(c.fd(), unhex("00cef7853c") + unhex("2a"));
  CHECK(closed_by_server(c));
  const auto why = s.first_refusal();
  CHECK_THAT(why, Catch::Contains("query type 42") && Catch::Contains("torch 2.x, validated"));
}

TEST_CASE("c10d store refuses torch's queues and 1.x's WATCH_KEY by name", "[rendezvous]") {
  Served s;
  auto c = s.client();
  dl::wire::write_all_fd(c.fd(), unhex("00cef7853c") + unhex("0e0100000000000000710000000000000000"));
  CHECK(closed_by_server(c));
  CHECK_THAT(s.first_refusal(), Catch::Contains("QUEUE_PUSH"));
  c10d::Dialect d = c10d::Dialect::kUnknown;
  auto p = c10d::parse(unhex("07"), d);
  CHECK(p.status == c10d::Parsed::Status::kRefused);
  CHECK_THAT(p.why, Catch::Contains("WATCH_KEY") && Catch::Contains("legacy"));
}

TEST_CASE("c10d store closes a client whose key is over the limit", "[rendezvous]") {
  C10dStore::Options o;
  o.limits.max_key = 16;
  Served s(o);
  auto c = s.client();
  // SET with a key of 17 bytes: refused from its length, before its bytes come.
  dl::wire::write_all_fd(c.fd(), unhex("011100000000000000"));
  CHECK(closed_by_server(c));
  CHECK_THAT(s.first_refusal(), Catch::Contains("a key of 17 bytes (at most 16)"));
}

TEST_CASE("c10d store refuses a key past its key count and keeps serving others", "[rendezvous]") {
  C10dStore::Options o;
  o.max_keys = 1;
  Served s(o);
  auto c = s.client();
  // ADD init/ fills the one key; a SET of another key is over.
  dl::wire::write_all_fd(c.fd(), unhex(kTorch113[0].query) + unhex(kTorch113[1].query));
  char one[8];
  dl::wire::recv_exact(c, one, 8, 5000ms, "c10d store");
  CHECK(closed_by_server(c));
  CHECK_THAT(s.first_refusal(), Catch::Contains("holds 1 keys"));
  Served* sp = &s;
  auto other = sp->client();
  dl::wire::write_all_fd(other.fd(), unhex(kTorch113[0].query));
  dl::wire::recv_exact(other, one, 8, 5000ms, "c10d store");
  CHECK(one[0] == 2);
}

TEST_CASE("c10d protocol waits for a whole query and tells the dialects apart", "[rendezvous]") {
  c10d::Dialect d = c10d::Dialect::kUnknown;
  const std::string validate = unhex("00cef7853c");
  CHECK(c10d::parse(validate.substr(0, 3), d).status == c10d::Parsed::Status::kNeedMore);
  CHECK(d == c10d::Dialect::kUnknown);
  auto p = c10d::parse(validate, d);
  CHECK(d == c10d::Dialect::kValidated);
  CHECK(p.used == 5);
  // A legacy SET also starts with 0: the length that follows is no magic.
  c10d::Dialect l = c10d::Dialect::kUnknown;
  const std::string set = unhex(kTorch113[1].query);
  CHECK(c10d::parse(set.substr(0, set.size() - 1), l).status == c10d::Parsed::Status::kNeedMore);
  CHECK(l == c10d::Dialect::kLegacy);
  CHECK(c10d::parse(set, l).used == set.size());
  // The encoder writes what torch's client writes.
  c10d::Query q{c10d::Op::kAdd, {"init/"}, {}, 1};
  CHECK(hex(c10d::encode(q, c10d::Dialect::kValidated)) == kTorch2[2].query);
  CHECK(hex(c10d::encode(q, c10d::Dialect::kLegacy)) == kTorch113[0].query);
}

TEST_CASE("c10d keyspace names the ranks in torch's barrier by the client that published each rank", "[rendezvous]") {
  c10d::Keyspace keys;
  std::string reply;
  auto set = [&](uint64_t client, const std::string& key) {
    keys.handle(client, c10d::Query{c10d::Op::kSet, {key}, {"host"}, 0}, reply);
  };
  auto arrive = [&](uint64_t client) {
    keys.handle(client, c10d::Query{c10d::Op::kAdd, {"/worker/attempt_0/default_pg/store_based_barrier_key:1"}, {}, 1},
                reply);
  };
  set(10, "/worker/attempt_0/default_pg/0/0/rank_0");
  set(11, "/worker/attempt_0/default_pg/0/0/rank_1");
  set(12, "/worker/attempt_0/default_pg/0/0/rank_2");
  arrive(10);
  arrive(13);  // a client that names its rank only later
  set(13, "/worker/attempt_0/default_pg/0/0/rank_3");
  CHECK(keys.ranks == std::set<int>{0, 1, 2, 3});
  CHECK(keys.barrier == 2);
  CHECK(keys.at_barrier == std::set<int>{0, 3});
  keys.clear();
  CHECK(keys.ranks.empty());
  CHECK(keys.at_barrier.empty());
  CHECK(keys.keys() == 0);
}

// One query may not make the store build a reply past its bound: a
// MULTI_GET naming one large value many times is refused before any of its
// reply is built, and the store goes on.
TEST_CASE("c10d keyspace refuses a MULTI_GET whose reply would pass the bound, before building it", "[rendezvous]") {
  c10d::Keyspace keys({1u << 20, 256u << 20, 1u << 20, 64u << 20});
  std::string reply;
  REQUIRE(keys.handle(1, c10d::Query{c10d::Op::kSet, {"big"}, {std::string(300 << 10, 'x')}, 0}, reply).empty());
  REQUIRE(keys.handle(1, c10d::Query{c10d::Op::kMultiGet, {"big", "big", "big"}, {}, 0}, reply).empty());
  CHECK(reply.size() == 3 * (8 + (300u << 10)));
  reply.clear();
  const std::vector<std::string> four(4, "big");
  const std::string why = keys.handle(1, c10d::Query{c10d::Op::kMultiGet, four, {}, 0}, reply);
  CHECK_THAT(why, Catch::Contains("reply would take 1 MiB") && Catch::Contains("over the 1 MiB"));
  CHECK(reply.empty());
  // Replies a client left unread count too: a GET that would pass the bound with them.
  reply.assign(900u << 10, 'r');
  CHECK_FALSE(keys.handle(2, c10d::Query{c10d::Op::kGet, {"big"}, {}, 0}, reply).empty());
  CHECK(reply.size() == (900u << 10));
}

TEST_CASE("c10d keyspace bounds the keys parked WAITs hold, all clients together", "[rendezvous]") {
  c10d::Keyspace keys({1u << 20, 256u << 20, 64u << 20, 100});
  std::string reply;
  const std::vector<std::string> forty{std::string(40, 'a')}, other{std::string(40, 'b')}, third{std::string(40, 'c')};
  CHECK(keys.handle(1, c10d::Query{c10d::Op::kWait, forty, {}, 0}, reply).empty());
  CHECK(keys.handle(2, c10d::Query{c10d::Op::kWait, other, {}, 0}, reply).empty());
  CHECK_THAT(keys.handle(3, c10d::Query{c10d::Op::kWait, third, {}, 0}, reply), Catch::Contains("over 0 MiB"));
  // A woken WAIT and a closed client give their keys back.
  CHECK(keys.handle(4, c10d::Query{c10d::Op::kSet, forty, {"v"}, 0}, reply).empty());
  CHECK(keys.take_woken() == std::vector<uint64_t>{1});
  CHECK(keys.handle(3, c10d::Query{c10d::Op::kWait, third, {}, 0}, reply).empty());
  keys.forget(2);
  keys.forget(3);
  CHECK(keys.handle(5, c10d::Query{c10d::Op::kWait, {std::string(90, 'd')}, {}, 0}, reply).empty());
}

TEST_CASE("c10d keyspace tells the job's ranks from other clients by what they did", "[rendezvous]") {
  c10d::Keyspace keys;
  std::string reply;
  keys.handle(1, c10d::Query{c10d::Op::kAdd, {"init/"}, {}, 1}, reply);
  keys.handle(2, c10d::Query{c10d::Op::kSet, {"/worker/attempt_0/default_pg/0/0/rank_1"}, {"h"}, 0}, reply);
  keys.handle(3, c10d::Query{c10d::Op::kGet, {"init/"}, {}, 0}, reply);
  keys.handle(4, c10d::Query{c10d::Op::kAdd, {"init/"}, {}, 0}, reply);  // reads the count: counts nobody in
  CHECK(keys.is_rank(1));
  CHECK(keys.is_rank(2));
  CHECK_FALSE(keys.is_rank(3));
  CHECK_FALSE(keys.is_rank(4));
  keys.forget(1);
  CHECK_FALSE(keys.is_rank(1));
}

// A client that connects, sends and closes before its connection is
// accepted leaves an end no process owns (which the kernel lists as uid 0):
// it is refused as an unknown user, whoever runs the store (root too). A
// flood of them is counted, not echoed: one line per peer and second.
TEST_CASE("c10d store refuses clients that closed before their accept, told once a second", "[rendezvous]") {
  C10dStore::Options o;
  std::mutex mu;
  std::vector<std::string> lines;
  o.log = [&](const std::string& l) {
    std::lock_guard<std::mutex> g(mu);
    lines.push_back(l);
  };
  Served s(o);
  // Holds the store's thread while `n` clients connect, send a SET and close.
  auto send_and_close = [&](int n) {
    std::promise<void> go;
    boost::asio::post(s.io, [f = go.get_future().share()] { f.wait(); });
    for (int i = 0; i < n; ++i) {
      auto c = s.client();
      dl::wire::write_all_fd(c.fd(), unhex(kTorch113[1].query));
    }
    std::this_thread::sleep_for(50ms);  // the clients' ends are orphaned (FIN_WAIT2, then TIME_WAIT)
    go.set_value();
  };
  send_and_close(30);
  std::this_thread::sleep_for(1100ms);
  send_and_close(5);
  std::this_thread::sleep_for(300ms);
  {
    std::lock_guard<std::mutex> g(mu);
    INFO(Catch::rangeToString(lines));
    REQUIRE(lines.size() == 2);
    CHECK_THAT(lines[0], Catch::Contains("closed a connection from 127.0.0.1 of an unknown user"));
    CHECK_THAT(lines[1], Catch::Contains("connections from 127.0.0.1 of an unknown user: only the job's user"));
  }
  // Nothing they sent was executed: "init/" is the only key (legacy ADD, then GETNUMKEYS).
  auto c = s.client();
  dl::wire::write_all_fd(c.fd(), unhex(kTorch113[0].query) + unhex("06"));
  char add[8], numkeys[8];
  dl::wire::recv_exact(c, add, 8, 5000ms, "c10d store");
  dl::wire::recv_exact(c, numkeys, 8, 5000ms, "c10d store");
  CHECK(numkeys[0] == 1);
}
