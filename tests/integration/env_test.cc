// Every rank's environment, as `env` prints it, for N = 1, 3 and 8 ranks on
// this machine: every dialect dlaunch promises, checked value by value.
#include <catch2/catch.hpp>

#include <sstream>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
std::map<std::string, std::string> rank_env_of(const std::string& dir, int rank) {
  return parse_env(read_file(dir + "/rank." + std::to_string(rank) + "/stdout"));
}

void check_world(int n) {
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", std::to_string(n), "--gpus-per-node", "0", "--output-filename", tmp.path,
            "/usr/bin/env"};
  s.unset_env = {"CUDA_VISIBLE_DEVICES"};
  RunResult r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(r.out.empty());  // with --output-filename nothing goes to dlaunch's stdout
  const std::string N = std::to_string(n);
  std::string job_id, token, store, master_port;
  for (int rank = 0; rank < n; ++rank) {
    auto e = rank_env_of(tmp.path, rank);
    INFO("rank " << rank);
    const std::string R = std::to_string(rank);
    const std::map<std::string, std::string> expected = {
        {"RANK", R}, {"WORLD_SIZE", N}, {"LOCAL_RANK", R}, {"LOCAL_WORLD_SIZE", N},
        {"GROUP_RANK", "0"}, {"GROUP_WORLD_SIZE", "1"}, {"ROLE_RANK", R}, {"ROLE_WORLD_SIZE", N},
        {"NODE_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"},
        {"OMPI_COMM_WORLD_RANK", R}, {"OMPI_COMM_WORLD_SIZE", N}, {"OMPI_COMM_WORLD_LOCAL_RANK", R},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", N}, {"OMPI_COMM_WORLD_NODE_RANK", "0"},
        {"PMI_RANK", R}, {"PMI_SIZE", N}, {"MPI_LOCALRANKID", R}, {"MPI_LOCALNRANKS", N},
        {"HOROVOD_RANK", R}, {"HOROVOD_SIZE", N}, {"HOROVOD_LOCAL_RANK", R}, {"HOROVOD_LOCAL_SIZE", N},
        {"HOROVOD_CROSS_RANK", "0"}, {"HOROVOD_CROSS_SIZE", "1"},
        {"DLAUNCH_RANK", R}, {"DLAUNCH_WORLD_SIZE", N}, {"DLAUNCH_LOCAL_RANK", R},
        {"DLAUNCH_LOCAL_WORLD_SIZE", N}, {"DLAUNCH_NODE_RANK", "0"}, {"DLAUNCH_NNODES", "1"},
    };
    for (const auto& [k, v] : expected) {
      INFO(k);
      REQUIRE(e.count(k) == 1);
      CHECK(e[k] == v);
    }
    CHECK(e.count("CUDA_VISIBLE_DEVICES") == 0);
    // Job-wide values: present, well-formed, the same on every rank.
    REQUIRE(!e["DLAUNCH_JOB_ID"].empty());
    REQUIRE(e["DLAUNCH_TOKEN"].size() >= 16);
    CHECK(e["DLAUNCH_HOST_ID"] == e["DLAUNCH_JOB_ID"] + "/0");
    REQUIRE(e["DLAUNCH_STORE_ADDR"].rfind("127.0.0.1:", 0) == 0);
    const int port = std::stoi(e["MASTER_PORT"]);
    CHECK(port > 0);
    CHECK(port < 65536);
    CHECK(e["MASTER_PORT"] != e["DLAUNCH_STORE_ADDR"].substr(10));  // not dlaunch's own store port
    if (rank == 0) {
      job_id = e["DLAUNCH_JOB_ID"], token = e["DLAUNCH_TOKEN"], store = e["DLAUNCH_STORE_ADDR"];
      master_port = e["MASTER_PORT"];
    }
    CHECK(e["DLAUNCH_JOB_ID"] == job_id);
    CHECK(e["DLAUNCH_TOKEN"] == token);
    CHECK(e["DLAUNCH_STORE_ADDR"] == store);
    CHECK(e["MASTER_PORT"] == master_port);
  }
  // The token reaches ranks only through their environment, never argv or output.
  CHECK(r.err.find(token) == std::string::npos);
}
}  // namespace

TEST_CASE("every rank gets every dialect's variables, 1 rank", "[integration]") { check_world(1); }
TEST_CASE("every rank gets every dialect's variables, 3 ranks", "[integration]") { check_world(3); }
TEST_CASE("every rank gets every dialect's variables, 8 ranks", "[integration]") { check_world(8); }

TEST_CASE("two jobs get different job ids, tokens and store ports", "[integration]") {
  TempDir a, b;
  for (auto* d : {&a, &b}) {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "1", "--output-filename", d->path, "/usr/bin/env"};
    REQUIRE(run(s, 30).code == 0);
  }
  auto ea = rank_env_of(a.path, 0), eb = rank_env_of(b.path, 0);
  CHECK(ea["DLAUNCH_JOB_ID"] != eb["DLAUNCH_JOB_ID"]);
  CHECK(ea["DLAUNCH_TOKEN"] != eb["DLAUNCH_TOKEN"]);
}

TEST_CASE("the launcher and agent raise their descriptor limit to the hard one, a rank gets the one given",
          "[integration]") {
  // The agent is each rank's parent: its limits are the rank's $PPID's.
  RunSpec s;
  s.argv = {"/usr/bin/prlimit", "--nofile=1024:4096", bin("dlaunch"), "-n", "1", "sh", "-c",
            "echo rank $(ulimit -Sn); grep 'open files' /proc/$PPID/limits"};
  RunResult r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("rank 1024\n") != std::string::npos);
  CHECK(r.out.find("Max open files            4096                 4096") != std::string::npos);
}

TEST_CASE("env: -x FOO=bar over the shell's FOO is the user's choice, no inherited-identity warning", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "1", "-x", "FOO=bar", "/bin/sh", "-c", "echo $FOO"};
  s.set_env["FOO"] = "shell";
  RunResult r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "bar\n");
  CHECK(r.err.find("instead of the inherited") == std::string::npos);
}

// The agent ignores SIGPIPE (its stderr is a channel the launcher may have
// closed; agent/agent_main.cc), and so does this test process, which dlaunch
// inherits: a rank still starts with the default, so `yes | head -1` ends.
TEST_CASE("ranks start with SIGPIPE at its default though dlaunch and its agent ignore it", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "sh", "-c", "yes | head -1 && grep SigIgn /proc/self/status"};
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  std::istringstream lines(r.out);
  int ys = 0, defaults = 0, other = 0;
  for (std::string l; std::getline(lines, l);)
    (l == "y" ? ys : l == "SigIgn:\t0000000000000000" ? defaults : other) += 1;
  CHECK(ys == 2);
  CHECK(defaults == 2);  // nothing ignored: SIGPIPE (bit 13) included
  CHECK(other == 0);
}
