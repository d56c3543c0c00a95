// A job's ranks reach its store through their agent's door (agent/
// store_door_service.h): the real dlaunch, agent and dlaunch-hello, whose
// ranks meet at a barrier in the store, what the store server logs of its
// connections (-v), the connections the kernel holds to its port, and an
// agent whose store cannot be reached (a launcher played by the test).
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "tests/integration/fake_launcher.h"
#include "tests/integration/run_command.h"

using namespace dl::it;
namespace msg = dl::control::msg;

namespace {
size_t count_lines(const std::string& text, const std::string& part) {
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(part) != std::string::npos;
  return n;
}

// Established TCP connections whose local port is `port` (the server's ends
// of its clients' connections), from the kernel's own tables.
size_t connections_to(uint16_t port) {
  size_t n = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the heading
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string slot, local, remote, state;
      f >> slot >> local >> remote >> state;
      n += state == "01" && std::stoul(local.substr(local.rfind(':') + 1), nullptr, 16) == port;
    }
  }
  return n;
}

RunSpec sim_run(const std::string& marker, std::vector<std::string> rank) {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-v", "--launcher", "sim", "-H", "sim0-" + marker + ":2,sim1-" + marker + ":2",
            "--gpus-per-node", "0"};
  s.argv.insert(s.argv.end(), rank.begin(), rank.end());
  s.set_env = {{"DLAUNCH_SIM", "1"}};
  s.unset_env = {"CUDA_VISIBLE_DEVICES"};
  return s;
}

}  // namespace

TEST_CASE("store door: six ranks pass a barrier in the store over one connection from their host",
          "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-v", "-n", "6", "--gpus-per-node", "0", bin("dlaunch-hello")};
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(count_lines(r.out, "passed the barrier with all 6 ranks") == 6);
  CHECK(count_lines(r.err, "is a host's store/2 link") == 1);
  CHECK(count_lines(r.err, "is a store/1 client") == 0);
}

TEST_CASE("store door: each rank is told its host's door and the agent removes it at the end", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "3", "--gpus-per-node", "0", "/bin/sh", "-c", "echo door=$DLAUNCH_STORE_DOOR"};
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  std::set<std::string> doors;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (auto at = line.find("door="); at != std::string::npos) doors.insert(line.substr(at + 5));
  REQUIRE(doors.size() == 1);
  const std::string door = *doors.begin();
  CHECK(door.find("/dlaunch-") != std::string::npos);
  CHECK(door.find("-store-") != std::string::npos);
  struct stat st{};
  CHECK(::stat(door.substr(0, door.rfind('/')).c_str(), &st) != 0);  // the agent removed its directory
}

TEST_CASE("store door: ranks that never use the store cost it no connection from their hosts' doors",
          "[integration][sim]") {
  const std::string m = new_marker();
  TempDir t;
  const std::string go = t.path + "/go";
  // Each rank says its door, then waits for the test to have looked.
  Child c = start(sim_run(m, {"sh", "-c", "echo door$RANK=$DLAUNCH_STORE_DOOR; until [ -e " + go + " ]; do sleep 0.05; done", m}));
  ChildGuard guard{c, m};
  std::string out, err;
  REQUIRE(read_fd_until(c.err_fd, err, ", job ", 60));
  std::smatch port;
  REQUIRE(std::regex_search(err, port, std::regex("store on port (\\d+)")));
  for (int r = 0; r < 4; ++r) REQUIRE(read_fd_until(c.out_fd, out, "door" + std::to_string(r) + "=/", 60));
  std::set<std::string> doors;
  std::smatch d;
  for (auto at = out.cbegin(); std::regex_search(at, out.cend(), d, std::regex("door\\d=(\\S+)")); at = d.suffix().first)
    doors.insert(d[1]);
  CHECK(doors.size() == 2);  // one per host, made at launch
  // Every rank runs, each host's door is open, and the store holds no connection.
  CHECK(connections_to(static_cast<uint16_t>(std::stoi(port[1]))) == 0);
  write_file(go, "");
  RunResult r = wait(c, 60);
  INFO(out << r.out << err << r.err);
  CHECK(r.code == 0);
  CHECK(count_lines(err + r.err, "is a host's store/2 link") == 0);
  CHECK(wait_marked_gone(m, 10).empty());
}

TEST_CASE("store door: two simulated hosts' ranks pass a barrier through their doors, one link per host",
          "[integration][sim]") {
  const std::string m = new_marker();
  RunResult r = run(sim_run(m, {bin("dlaunch-hello"), m}), 90);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(count_lines(r.out, "passed the barrier with all 4 ranks") == 4);
  CHECK(count_lines(r.err, "is a host's store/2 link") == 2);
  CHECK(count_lines(r.err, "is a store/1 client") == 0);
  CHECK(wait_marked_gone(m, 10).empty());
}

namespace {
// What the agent sent while its ranks asked an unreachable store.
struct Seen {
  int asked = 0, failed = 0, exited = 0;
  int beats_while_asking = 0;  // heartbeats after both ranks asked, before either was answered
  std::string errors;          // the ranks' stderr
};

Seen watch_agent(const dl::wire::Socket& s) {
  Seen seen;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (seen.exited < 2 && std::chrono::steady_clock::now() < until) {
    auto f = dl::wire::read_frame(s, dl::control::kMaxControlFrame, std::chrono::seconds(60), "the agent");
    if (f.type == dl::wire::kData) {
      auto chunk = dl::control::parse_data(f.payload);
      std::string text(chunk.bytes);
      for (size_t at = text.find("asking"); at != std::string::npos; at = text.find("asking", at + 1)) ++seen.asked;
      if (chunk.stream == dl::control::kStderr) seen.errors += text, ++seen.failed;
    } else if (f.type == dl::wire::kJson) {
      auto m = dl::control::decode_from_agent(f.payload);
      if (std::holds_alternative<msg::Heartbeat>(m) && seen.asked == 2 && seen.failed == 0) ++seen.beats_while_asking;
      if (std::holds_alternative<msg::Exited>(m)) ++seen.exited;
    }
  }
  return seen;
}
}  // namespace

TEST_CASE("store door: a store the door cannot reach fails the ranks' requests naming it, and the agent serves on",
          "[integration]") {
  const std::string mark = new_marker();
  LoopbackPort store;  // takes connections, never answers them
  const std::string addr = "127.0.0.1:" + std::to_string(store.port);
  FakeLauncher l;
  Child c = start_agent(l.port);
  ChildGuard guard{c, mark};
  auto [s, hello] = l.accept_agent();
  msg::Launch launch;
  launch.wdir = "/";
  launch.hb_ms = 100, launch.hb_timeout_ms = 60000;
  launch.env = {{"DLAUNCH_STORE_ADDR", addr}, {"DLAUNCH_TOKEN", kToken}, {"DLAUNCH_WORLD_SIZE", "2"}};
  for (int r = 0; r < 2; ++r) {
    msg::RankSpec spec;
    spec.rank = r;
    spec.argv = {"sh", "-c", "echo asking; exec " + bin("dlaunch-hello"), mark};
    spec.env = {{"DLAUNCH_RANK", std::to_string(r)}, {"DLAUNCH_LOCAL_RANK", std::to_string(r)},
                {"DLAUNCH_LOCAL_WORLD_SIZE", "2"}, {"DLAUNCH_NODE_RANK", "0"}, {"DLAUNCH_NNODES", "1"}};
    launch.ranks.push_back(spec);
  }
  dl::wire::write_frame(s, dl::wire::kJson, dl::control::encode(launch), "the agent");
  const Seen seen = watch_agent(s);
  INFO(seen.errors);
  REQUIRE(seen.exited == 2);
  // The ranks hear, within the door's connect timeout, what it waited for.
  CHECK(count_lines(seen.errors, "could not be made: no handshake with store at " + addr + " within") == 2);
  // The door tried for 10 s at 100 ms a heartbeat; a loop held up by the
  // connect would have sent none in that time.
  CHECK(seen.beats_while_asking >= 20);
  s.close();  // the launcher goes: the agent leaves
  RunResult r = wait(c, 20);
  INFO(r.err);
  CHECK(count_lines(r.err, "cannot reach the job's store") == 1);
  CHECK(r.err.find("store at " + addr) != std::string::npos);
  CHECK(wait_marked_gone(mark, 10).empty());
}
