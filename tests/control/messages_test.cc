// The typed control messages: every message survives encode/decode, and a
// message with a missing or mistyped field is refused with a ProtocolError
// that names the message and the field.
#include <catch2/catch.hpp>

#include <fstream>
#include <random>
#include <sstream>

#include "control/messages.h"
#include "control/rank_identity.h"

namespace control = dl::control;
namespace msg = dl::control::msg;

namespace {
template <class T> struct is_variant : std::false_type {};
template <class... T> struct is_variant<std::variant<T...>> : std::true_type {};

// The message of type M that `v` holds, looking into MpiUp and MpiDown; null
// when it holds another.
template <class M, class V>
const M* find(const V& v) {
  return std::visit(
      [](const auto& x) -> const M* {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, M>) return &x;
        else if constexpr (is_variant<X>::value) return find<M>(x);
        else return nullptr;
      },
      v);
}

template <class M, class V>
M as(const V& v) {
  const M* m = find<M>(v);
  REQUIRE(m);
  return *m;
}

// The ProtocolError's text for `text`, or a failed test when it is accepted.
template <class Decode>
std::string refusal(Decode decode, const std::string& text) {
  try {
    decode(text);
  } catch (const control::ProtocolError& e) {
    return e.what();
  }
  FAIL("accepted: " << text);
  return "";
}
std::string refusal_from_agent(const std::string& text) { return refusal(control::decode_from_agent, text); }
std::string refusal_from_launcher(const std::string& text) { return refusal(control::decode_from_launcher, text); }
}  // namespace

TEST_CASE("control messages: an agent's messages survive encode and decode", "[control]") {
  msg::Hello h;
  h.version = "0.1.0", h.node = 2, h.host = "gpu7", h.pid = 1234, h.free_port = 40000, h.gpus = {"0", "3"};
  h.pmix = true, h.cpu = msg::CpuReport{{{0, 4}, {1, 5}}, {{0, 1, 4, 5}}};
  auto h2 = as<msg::Hello>(control::decode_from_agent(control::encode(h)));
  CHECK(h2.version == "0.1.0");
  CHECK(h2.node == 2);
  CHECK(h2.host == "gpu7");
  CHECK(h2.pid == 1234);
  CHECK(h2.free_port == 40000);
  CHECK(h2.gpus == std::vector<std::string>{"0", "3"});
  CHECK(h2.pmix);
  REQUIRE(h2.cpu);
  CHECK(h2.cpu->cores == std::vector<std::vector<int>>{{0, 4}, {1, 5}});
  CHECK(h2.cpu->numa == std::vector<std::vector<int>>{{0, 1, 4, 5}});

  msg::Hello bare = h;
  bare.cpu.reset();
  CHECK_FALSE(as<msg::Hello>(control::decode_from_agent(control::encode(bare))).cpu);
  CHECK(control::encode(bare).find("cpu") == std::string::npos);

  msg::Exited x;
  x.rank = 5, x.pid = 77, x.signal = 11, x.core = true, x.by_agent = false;
  auto x2 = as<msg::Exited>(control::decode_from_agent(control::encode(x)));
  CHECK(x2.rank == 5);
  CHECK(x2.pid == 77);
  CHECK_FALSE(x2.code);
  CHECK(x2.signal == 11);
  CHECK(x2.core == true);
  CHECK_FALSE(x2.by_agent);

  auto f = as<msg::SpawnFailed>(control::decode_from_agent(control::encode(msg::SpawnFailed{3, 127, "not found"})));
  CHECK(f.rank == 3);
  CHECK(f.code == 127);
  CHECK(f.message == "not found");
  auto a = as<msg::MpiAbort>(control::decode_from_agent(control::encode(msg::MpiAbort{1, 9, "MPI_Abort"})));
  CHECK(a.status == 9);
  CHECK(as<msg::Started>(control::decode_from_agent(control::encode(msg::Started{4, 8}))).pid == 8);
  as<msg::Heartbeat>(control::decode_from_agent(control::encode(msg::Heartbeat{})));
  auto ready = as<msg::Ready>(control::decode_from_agent(control::encode(msg::Ready{2, 31337})));
  CHECK(ready.attempt == 2);
  CHECK(ready.free_port == 31337);
}

TEST_CASE("control messages: the launcher's messages survive encode and decode", "[control]") {
  msg::Launch l;
  l.env = {{"NCCL_DEBUG", "INFO"}}, l.wdir = "/work", l.hb_ms = 500, l.hb_timeout_ms = 7000;
  msg::RankSpec r;
  r.rank = 6, r.argv = {"python3", "train.py", "--lr", "0.1"}, r.env = {{"RANK", "6"}, {"CUDA_VISIBLE_DEVICES", "0,1"}};
  r.stdin_open = true, r.cpus = std::vector<int>{2, 3};
  l.ranks = {r};
  l.mpi = msg::MpiSection{"dl-ab", 8, 1, 8, {"a", "b"}, {{0, 1, 2, 3}, {4, 5, 6, 7}}, std::vector<int>{3, 5}, "pmix,pmi"};
  CHECK(l.mpi->served() == dl::control::MpiServe::kPmixAndPmi);
  auto unknown = *l.mpi;
  unknown.serve = "pmix3";
  CHECK_THROWS_AS(unknown.served(), control::ProtocolError);
  auto l2 = as<msg::Launch>(control::decode_from_launcher(control::encode(l)));
  CHECK(l2.env == l.env);
  CHECK(l2.wdir == "/work");
  CHECK(l2.hb_ms == 500);
  CHECK(l2.hb_timeout_ms == 7000);
  REQUIRE(l2.ranks.size() == 1);
  CHECK(l2.ranks[0].rank == 6);
  CHECK(l2.ranks[0].argv == r.argv);
  CHECK(l2.ranks[0].env == r.env);
  CHECK(l2.ranks[0].stdin_open);
  CHECK(l2.ranks[0].cpus == std::vector<int>{2, 3});
  REQUIRE(l2.mpi);
  CHECK(l2.mpi->nspace == "dl-ab");
  CHECK(l2.mpi->node_ranks == l.mpi->node_ranks);
  CHECK(l2.mpi->node_hosts == l.mpi->node_hosts);
  CHECK(l2.mpi->app_sizes == std::optional<std::vector<int>>(std::vector<int>{3, 5}));
  CHECK_FALSE(l2.ranks[0].wdir);
  CHECK(l2.mpi->serve == l.mpi->serve);

  // A fence id is a full u64.
  auto ff = as<msg::FenceFailed>(control::decode_from_launcher(control::encode(msg::FenceFailed{~0ull, "b (ranks 4)"})));
  CHECK(ff.id == ~0ull);
  CHECK(as<msg::Signal>(control::decode_from_launcher(control::encode(msg::Signal{10}))).signal == 10);
  CHECK(as<msg::Kill>(control::decode_from_launcher(control::encode(msg::Kill{3000}))).grace_ms == 3000);
  CHECK_FALSE(as<msg::Kill>(control::decode_from_launcher(control::encode(msg::Kill{3000}))).ready_for);
  msg::Kill asks;
  asks.grace_ms = 1000, asks.ready_for = 2;
  auto asked = as<msg::Kill>(control::decode_from_launcher(control::encode(asks)));
  CHECK(asked.grace_ms == 1000);
  CHECK(asked.ready_for == std::optional<int>(2));
  CHECK(as<msg::StdinEof>(control::decode_from_launcher(control::encode(msg::StdinEof{2}))).rank == 2);
  as<msg::Bye>(control::decode_from_launcher(control::encode(msg::Bye{})));
  CHECK(as<msg::Restart>(control::decode_from_launcher(control::encode(msg::Restart{3}))).attempt == 3);
}

TEST_CASE("control messages: a missing field is refused with the message and the field named", "[control]") {
  CHECK(refusal_from_agent(R"({"t":"exited","pid":1,"by_agent":true})") == "'exited' message: field 'rank' is missing");
  CHECK(refusal_from_agent(R"({"t":"hello","node":0})") == "'hello' message: field 'version' is missing");
  CHECK(refusal_from_launcher(R"({"t":"kill"})") == "'kill' message: field 'grace_ms' is missing");
  // Inside a nested struct the path says where.
  CHECK(refusal_from_launcher(
            R"({"t":"launch","env":{},"wdir":"","hb_ms":1,"hb_timeout_ms":1,"ranks":[{"rank":0,"argv":["a"],"env":{},"stdin":false},{"rank":1,"env":{},"stdin":false}]})") ==
        "'launch' message: field 'ranks[1].argv' is missing");
}

// Peers are one version (the handshake's tag carries DLAUNCH_VERSION): a
// field that an older agent once left out is required, and its absence is an
// error naming it, never a guess (docs/wire-protocol.md, "Compatibility").
TEST_CASE("control messages: fields once left out by older peers are required, and their absence is refused by name",
          "[control]") {
  const std::string launch = R"({"t":"launch","env":{},"wdir":"","hb_ms":1,"hb_timeout_ms":1,"ranks":[])";
  CHECK(refusal_from_launcher(launch + "}") == "'launch' message: field 'stdout_pty' is missing");
  CHECK_NOTHROW(control::decode_from_launcher(launch + R"(,"stdout_pty":false})"));
  const std::string mpi = R"(,"stdout_pty":true,"mpi":{"nspace":"n","world_size":1,"node_rank":0,"universe_size":1,)"
                          R"("node_hosts":[],"node_ranks":[])";
  CHECK(refusal_from_launcher(launch + mpi + "}}") == "'launch' message: field 'mpi.serve' is missing");
  const auto m = std::get<msg::Launch>(control::decode_from_launcher(launch + mpi + R"(,"serve":"pmi"}})"));
  CHECK(m.mpi->served() == control::MpiServe::kPmi);
  CHECK(m.stdout_pty);
  const std::string hello = R"({"t":"hello","version":"v","node":0,"host":"a","pid":1,"free_port":2,"gpus":[],)"
                            R"("pmix":false,"gpu_vendor":"")";
  CHECK(refusal_from_agent(hello + "}") == "'hello' message: field 'machine' is missing");
  CHECK(refusal_from_agent(hello + R"(,"machine":"","cpu":{"cores":[],"numa":[],"numa_ids":[]}})") ==
        "'hello' message: field 'cpu.packages' is missing");
  msg::MpiSection bad;
  bad.serve = "pmix2";
  CHECK_THROWS_WITH(bad.served(), Catch::Contains("'mpi.serve' is 'pmix2'"));
}

TEST_CASE("control messages: a mistyped field is refused with the message and the field named", "[control]") {
  CHECK(refusal_from_agent(R"({"t":"started","rank":"0","pid":1})") ==
        "'started' message: field 'rank' is a string, expected an integer");
  CHECK(refusal_from_agent(R"({"t":"started","rank":1.5,"pid":1})") ==
        "'started' message: field 'rank' is a fractional number, expected an integer");
  CHECK(refusal_from_agent(R"({"t":"started","rank":4294967296,"pid":1})") == "'started' message: field 'rank' is out of range");
  CHECK(refusal_from_agent(R"({"t":"hello","version":"x","node":0,"host":"h","pid":1,"free_port":2,"gpus":[0],"pmix":true})") ==
        "'hello' message: field 'gpus[0]' is an integer, expected a string");
  CHECK(refusal_from_launcher(R"({"t":"signal","signal":true})") ==
        "'signal' message: field 'signal' is a boolean, expected an integer");
  CHECK(refusal_from_launcher(R"({"t":"fence_failed","id":-1,"message":""})") ==
        "'fence_failed' message: field 'id' is negative, expected an unsigned integer");
  CHECK(refusal_from_launcher(
            R"({"t":"launch","env":{"A":1},"wdir":"","hb_ms":1,"hb_timeout_ms":1,"ranks":[]})") ==
        "'launch' message: field 'env.A' is an integer, expected a string");
}

TEST_CASE("control messages: not JSON, no type, an unknown type or the other side's message are refused", "[control]") {
  CHECK(refusal_from_agent("{\"t\":") == "a control message from the agent is not valid JSON");
  CHECK(refusal_from_agent("[1,2]") == "a control message from the agent is not a JSON object");
  CHECK(refusal_from_agent(R"({"rank":1})") == "a control message from the agent has no type (field 't')");
  CHECK(refusal_from_agent(R"({"t":"launch"})") == "unknown control message 'launch' from the agent");
  CHECK(refusal_from_launcher(R"({"t":"hello"})") == "unknown control message 'hello' from the launcher");
  // A ProtocolError is a RemoteError: the connection closes, nothing crashes.
  CHECK_THROWS_AS(control::decode_from_agent("nonsense"), dl::RemoteError);
}

TEST_CASE("control messages: docs/wire-protocol.md lists exactly the messages and fields of the structs", "[control]") {
  std::ifstream f(DLAUNCH_SOURCE_DIR "/docs/wire-protocol.md");
  REQUIRE(f);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- control-messages:begin (checked by tests/control/messages_test.cc) -->\n```\n";
  const std::string end = "```\n<!-- control-messages:end -->";
  const auto b = doc.find(begin), e = doc.find(end);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  const std::string listed = doc.substr(b + begin.size(), e - b - begin.size());
  INFO("paste this between the markers in docs/wire-protocol.md:\n" << control::protocol_reference());
  CHECK(listed == control::protocol_reference());
}

TEST_CASE("control messages: spawn_request and spawn_reply round-trip", "[control]") {
  msg::SpawnRequest q;
  q.id = 3, q.rank = 1, q.apps = {msg::SpawnApp{{"python3", "-m", "mpi4py.futures.server"}, 3}};
  auto q2 = as<msg::SpawnRequest>(control::decode_from_agent(control::encode(q)));
  CHECK(q2.id == 3);
  CHECK(q2.rank == 1);
  REQUIRE(q2.apps.size() == 1);
  CHECK(q2.apps[0].argv == q.apps[0].argv);
  CHECK(q2.apps[0].np == 3);
  msg::SpawnReply a;
  a.id = 3, a.error = "no";
  auto a2 = as<msg::SpawnReply>(control::decode_from_launcher(control::encode(a)));
  CHECK(a2.id == 3);
  CHECK(a2.error == std::optional<std::string>("no"));
  CHECK_FALSE(a2.nspace);
  CHECK_THROWS_WITH(control::decode_from_agent(R"({"t":"spawn_request","id":1,"rank":0})"),
                    Catch::Contains("'spawn_request' message: field 'apps' is missing"));
}

TEST_CASE("control messages: strings are bytes: escapes, non-UTF-8 and NUL survive encode and decode", "[control]") {
  msg::Launch l;
  std::string every;  // every byte value once, NUL, controls, quote, backslash, 0x80-0xff included
  for (int c = 0; c < 256; ++c) every += static_cast<char>(c);
  l.env = {{"BYTES", every}, {"LATIN1", "caf\xe9"}, {"Q", "say \"hi\"\\n"}};
  l.wdir = "/tmp/\xff\xfe";
  msg::RankSpec r;
  r.argv = {"echo", std::string("a\0b", 3), "\x01\x1f\x7f"};
  l.ranks = {r};
  const std::string text = control::encode(l);
  CHECK(text.rfind("{\"t\":\"launch\",", 0) == 0);  // the type first
  CHECK(text.find('\n') == std::string::npos);       // controls escaped: one line
  auto l2 = as<msg::Launch>(control::decode_from_launcher(text));
  CHECK(l2.env == l.env);
  CHECK(l2.wdir == l.wdir);
  REQUIRE(l2.ranks.size() == 1);
  CHECK(l2.ranks[0].argv == r.argv);
}

TEST_CASE("control messages: JSON written by others decodes: any member order, escapes, spaces, extra members",
          "[control]") {
  auto s = as<msg::Started>(control::decode_from_agent(" { \"pid\" : 7 ,\n\"extra\":[1,{\"x\":null}], \"rank\":3, \"t\":\"started\" } "));
  CHECK(s.rank == 3);
  CHECK(s.pid == 7);
  auto x = as<msg::SpawnFailed>(control::decode_from_agent(
      R"({"t":"spawn_failed","rank":1,"code":127,"message":"caf\u00e9 \ud83d\ude00 \/ \t\"q\""})"));
  CHECK(x.message == "caf\xc3\xa9 \xf0\x9f\x98\x80 / \t\"q\"");
  // An optional field sent as null is absent.
  auto e = as<msg::Exited>(control::decode_from_agent(R"({"t":"exited","rank":1,"pid":2,"code":null,"by_agent":false})"));
  CHECK_FALSE(e.code);
  // The last "t" counts, as the last of any repeated member.
  CHECK(as<msg::Started>(control::decode_from_agent(R"({"t":"hello","t":"started","rank":1,"pid":2,"pid":5})")).pid == 5);
}

TEST_CASE("control messages: text that is not JSON is refused as such, before any field is read", "[control]") {
  for (const char* bad : {"", "{", "{\"t\":\"started\",\"rank\":1,\"pid\":2", "{\"t\":\"started\",\"rank\":01,\"pid\":2}",
                          "{\"t\":\"started\",\"rank\":1.,\"pid\":2}", "{\"t\":\"started\",\"rank\":1,\"pid\":2} x",
                          "{\"t\":\"started\",\"rank\":1,\"pid\":2,}", "{\"t\":\"started\" \"rank\":1}",
                          "{\"t\":\"spawn_failed\",\"rank\":1,\"code\":1,\"message\":\"\\ud800\"}",  // a lone surrogate
                          "{\"t\":\"spawn_failed\",\"rank\":1,\"code\":1,\"message\":\"\\x\"}",
                          "{\"t\":\"spawn_failed\",\"rank\":1,\"code\":1,\"message\":\"a\nb\"}",    // a raw newline
                          "{\"t\":\"started\",\"rank\":\"1,\"pid\":2}", "{\"t\":tru}", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"}) {
    INFO(bad);
    CHECK(refusal_from_agent(bad) == "a control message from the agent is not valid JSON");
  }
  // Big numbers are numbers, only not integers that fit.
  CHECK(refusal_from_agent(R"({"t":"started","rank":1e3,"pid":2})") ==
        "'started' message: field 'rank' is a fractional number, expected an integer");
  CHECK(refusal_from_agent(R"({"t":"started","rank":-99999999999999999999,"pid":2})") ==
        "'started' message: field 'rank' is a fractional number, expected an integer");
  CHECK(as<msg::FenceFailed>(control::decode_from_launcher(R"({"t":"fence_failed","id":18446744073709551615,"message":""})"))
            .id == ~0ull);
}

// Launches of 1-70 ranks whose every string is random bytes (quotes,
// backslashes, controls, NUL, bytes above 0x7f), with optional fields present
// or not at random: each decodes to exactly what was encoded, rank by rank.
TEST_CASE("control messages: random launches of many ranks round-trip field by field", "[control]") {
  std::mt19937 rng(20261126);
  auto num = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto bytes = [&] {
    static const std::string special = std::string("\"\\/\b\f\n\r\t\0\x01\x1f\x7f\x80\xc3\xa9\xed\xa0\x80\xff{}[]:,", 28);
    std::string s;
    for (int i = num(0, 24); i > 0; --i)
      s += num(0, 2) == 0 ? special[static_cast<size_t>(num(0, static_cast<int>(special.size()) - 1))]
                          : static_cast<char>(num(0, 255));
    return s;
  };
  auto vars = [&] {
    control::EnvVars e;
    for (int i = num(0, 12); i > 0; --i) e[bytes()] = bytes();
    return e;
  };
  for (int round = 0; round < 300; ++round) {
    msg::Launch l;
    l.env = vars(), l.wdir = bytes(), l.hb_ms = num(1, 100000), l.hb_timeout_ms = num(1, 1000000);
    if (num(0, 1)) l.stdout_pty = num(0, 1) == 1;
    for (int k = num(1, 70); k > 0; --k) {
      msg::RankSpec r;
      r.rank = num(0, 1 << 30);
      for (int a = num(1, 5); a > 0; --a) r.argv.push_back(bytes());
      r.env = vars(), r.stdin_open = num(0, 1) == 1;
      if (num(0, 1)) r.cpus = std::vector<int>(static_cast<size_t>(num(0, 4)), num(0, 4095));
      if (num(0, 1)) r.wdir = bytes();
      l.ranks.push_back(std::move(r));
    }
    if (num(0, 1)) l.mpi = msg::MpiSection{bytes(), num(0, 100), num(0, 100), num(0, 100), {bytes(), bytes()}, {{1, 2}, {}},
                                           std::nullopt, "pmix"};
    const std::string text = control::encode(l);
    INFO("round " << round << ": " << text.size() << " bytes");
    auto d = as<msg::Launch>(control::decode_from_launcher(text));
    CHECK(d.env == l.env);
    CHECK(d.wdir == l.wdir);
    CHECK(d.hb_ms == l.hb_ms);
    CHECK(d.hb_timeout_ms == l.hb_timeout_ms);
    CHECK(d.stdout_pty == l.stdout_pty);
    REQUIRE(d.ranks.size() == l.ranks.size());
    for (size_t i = 0; i < l.ranks.size(); ++i) {
      INFO("rank spec " << i);
      CHECK(d.ranks[i].rank == l.ranks[i].rank);
      CHECK(d.ranks[i].argv == l.ranks[i].argv);
      CHECK(d.ranks[i].env == l.ranks[i].env);
      CHECK(d.ranks[i].stdin_open == l.ranks[i].stdin_open);
      CHECK(d.ranks[i].cpus == l.ranks[i].cpus);
      CHECK(d.ranks[i].wdir == l.ranks[i].wdir);
    }
    REQUIRE(d.mpi.has_value() == l.mpi.has_value());
    if (l.mpi) {
      CHECK(d.mpi->nspace == l.mpi->nspace);
      CHECK(d.mpi->node_hosts == l.mpi->node_hosts);
      CHECK(d.mpi->node_ranks == l.mpi->node_ranks);
    }
  }
}

TEST_CASE("control messages: MPI's messages arrive inside MpiUp and MpiDown with their own names on the wire",
          "[control]") {
  const std::string lookup = control::encode(msg::MpiLookup{4, 2, {"svc"}, true, 500});
  CHECK(lookup.rfind(R"({"t":"mpi_lookup",)", 0) == 0);
  CHECK(control::encode(control::MpiUp(msg::MpiLookup{4, 2, {"svc"}, true, 500})) == lookup);
  const control::FromAgent up = control::decode_from_agent(lookup);
  REQUIRE(std::holds_alternative<control::MpiUp>(up));
  const auto& l = std::get<msg::MpiLookup>(std::get<control::MpiUp>(up));
  CHECK(l.id == 4);
  CHECK(l.keys == std::vector<std::string>{"svc"});

  const control::FromLauncher down = control::decode_from_launcher(control::encode(msg::MpiDmodexServe{9, 3}));
  REQUIRE(std::holds_alternative<control::MpiDown>(down));
  CHECK(std::get<msg::MpiDmodexServe>(std::get<control::MpiDown>(down)).rank == 3);
  CHECK(std::holds_alternative<control::MpiDown>(
      control::decode_from_launcher(control::encode(msg::FenceFailed{1, "b (ranks 4)"}))));

  // Each group belongs to one direction.
  CHECK(refusal_from_launcher(lookup) == "unknown control message 'mpi_lookup' from the launcher");
  CHECK(refusal_from_agent(control::encode(msg::MpiDmodexServe{9, 3})) ==
        "unknown control message 'mpi_dmodex_serve' from the agent");
}

TEST_CASE("control messages: mpi_connect's op is one of three words, typed, and any other is refused", "[control]") {
  for (auto op : {control::ConnectOp::kConnect, control::ConnectOp::kDisconnect, control::ConnectOp::kFence}) {
    const msg::MpiConnect c{1, control::connect_op_word(op), {"dl-1:*"}, std::nullopt};
    const auto back = std::get<msg::MpiConnect>(std::get<control::MpiUp>(control::decode_from_agent(control::encode(c))));
    CHECK(back.connect_op() == op);
  }
  CHECK(std::string(control::connect_op_word(control::ConnectOp::kDisconnect)) == "disconnect");
  const msg::MpiConnect merge{1, "merge", {"dl-1:*"}, std::nullopt};
  CHECK_THROWS_AS(merge.connect_op(), control::ProtocolError);
  CHECK_THROWS_WITH(merge.connect_op(), Catch::Contains("field 'op' is 'merge'"));
}

TEST_CASE("complete_launch: with identity.node the agent writes the host's variables, over launch_env's, under the launch's",
          "[control]") {
  msg::Launch m;
  m.ranks.resize(3);
  for (int i = 0; i < 3; ++i) m.ranks[static_cast<size_t>(i)].rank = 10 + i;
  m.identity = msg::RankIdentity{{4, 4, 4}, {5, 5, 5}, true, 4};
  m.env["GROUP_RANK"] = "launch's own";
  const control::EnvVars shared = {{"DLAUNCH_JOB_ID", "dl-x"}, {"NODE_RANK", "from -x"}, {"WORLD_SIZE", "15"}};
  control::complete_launch(m, shared);
  CHECK_FALSE(m.identity);
  CHECK(m.env.at("NODE_RANK") == "4");
  CHECK(m.env.at("OMPI_COMM_WORLD_NODE_RANK") == "4");
  CHECK(m.env.at("LOCAL_WORLD_SIZE") == "3");
  CHECK(m.env.at("MPI_LOCALNRANKS") == "3");
  CHECK(m.env.at("DLAUNCH_HOST_ID") == "dl-x/4");
  CHECK(m.env.at("SLURM_NODEID") == "4");
  CHECK(m.env.at("GROUP_RANK") == "launch's own");
  CHECK(m.env.at("WORLD_SIZE") == "15");
  CHECK(m.ranks[2].env.at("RANK") == "12");
  CHECK(m.ranks[2].env.at("LOCAL_RANK") == "2");
  // Without the node index the host's variables are the launcher's to send.
  msg::Launch bare;
  bare.ranks.resize(1);
  bare.identity = msg::RankIdentity{{0}, {1}, false, std::nullopt};
  control::complete_launch(bare, shared);
  CHECK(bare.env.at("NODE_RANK") == "from -x");
  CHECK(bare.env.count("LOCAL_WORLD_SIZE") == 0);
}
