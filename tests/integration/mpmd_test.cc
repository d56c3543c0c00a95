// MPMD: several app contexts in one job (`A : B`, --app FILE), seen from the
// ranks: each context's program, arguments, -x and --wdir, MPI_APPNUM, the
// dry run's app column, and the errors for a ':' that starts no context.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::map<std::string, std::string> env_of(const std::string& dir, int rank) {
  return parse_env(read_file(dir + "/rank." + std::to_string(rank) + "/stdout"));
}

// Ranks of `n` contexts write `env` (and, first, their cwd) into DIR/rank.N.
// The -x GLOBAL=g given first reaches every context with --app FILE, and
// the first context only with ':' (as under mpirun and mpiexec.hydra).
void check_two_contexts(const std::vector<std::string>& args, const TempDir& out, const std::string& wdir,
                        bool global_everywhere) {
  RunSpec s;
  s.argv = {bin("dlaunch"), "--output-filename", out.path, "-x", "GLOBAL=g"};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  RunResult r = run(s, 60);
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    auto e = env_of(out.path, rank);
    const bool server = rank == 0;
    CHECK(e["MPI_APPNUM"] == (server ? "0" : "1"));
    CHECK(e["PMIX_APPNUM"] == (server ? "0" : "1"));
    CHECK(e["RANK"] == std::to_string(rank));
    CHECK(e["WORLD_SIZE"] == "3");
    CHECK(e.count("GLOBAL") == (server || global_everywhere ? 1u : 0u));
    if (server) CHECK(e["GLOBAL"] == "g");
    // Each context's program, arguments and -x.
    CHECK(e["ROLE"] == (server ? "server" : "worker"));
    CHECK(e.count("ONLY_SERVER") == (server ? 1u : 0u));
    CHECK(e.count("ONLY_WORKER") == (server ? 0u : 1u));
    if (!server) CHECK(e["PWD_SEEN"] == wdir);
  }
}
}  // namespace

TEST_CASE("mpmd: two contexts with their own program, arguments, -x and --wdir", "[integration]") {
  TempDir out, work;
  const std::string wdir = std::filesystem::canonical(work.path).string();
  // The server runs `env` directly; the workers run a shell that records its
  // cwd, so a context's --wdir is seen where the rank runs. The server's own
  // variable is set by env.
  check_two_contexts({"-n", "1", "/usr/bin/env", "ONLY_SERVER=1", "ROLE=server", "/usr/bin/env", ":",
                      "-n", "2", "-x", "ONLY_WORKER=1", "--wdir", wdir, "/bin/sh", "-c",
                      "PWD_SEEN=$(pwd -P) ROLE=worker exec /usr/bin/env"},
                     out, wdir, false);
}

TEST_CASE("mpmd: a -x before the first ':' reaches the first context only, --env-file every one", "[integration]") {
  TempDir tmp;
  write_file(tmp.path + "/env", "ALL=e\n");
  RunSpec s;
  s.argv = {bin("dlaunch"), "--tag-output", "--env-file", tmp.path + "/env", "-x", "FIRST=f", "-n", "1", "/bin/sh",
            "-c", "echo a$FIRST$ALL", ":", "-n", "1", "/bin/sh", "-c", "echo b$FIRST$ALL"};
  RunResult r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("] afe\n") != std::string::npos);
  CHECK(r.out.find("] be\n") != std::string::npos);
}

TEST_CASE("mpmd: a context's mpirun and hydra habits (-np -env --mca -wd --ntasks) are its own", "[integration]") {
  TempDir out, wd;
  RunSpec s;
  s.argv = {bin("dlaunch"), "--output-filename", out.path, "-np", "1", "/bin/sh", "-c", "pwd; env", ":",
            "--ntasks", "1", "-env", "ONLY_SECOND", "2", "--mca", "btl", "tcp", "-wd", wd.path, "/bin/sh", "-c",
            "pwd; env"};
  RunResult r = run(s, 60);
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto first = env_of(out.path, 0), second = env_of(out.path, 1);
  CHECK(first.count("ONLY_SECOND") == 0);
  CHECK(first.count("OMPI_MCA_btl") == 0);
  CHECK(second["ONLY_SECOND"] == "2");
  CHECK(second["OMPI_MCA_btl"] == "tcp");
  CHECK(lines(read_file(out.path + "/rank.1/stdout")).front() == std::filesystem::canonical(wd.path).string());
}

TEST_CASE("mpmd: every context takes mpirun's spellings (-np=N, -np N, -x, -wdir, -xVAR)", "[integration]") {
  TempDir out, wd;
  const std::string wdir = std::filesystem::canonical(wd.path).string();
  const std::string script = "echo \"ctx=$CTX rank=$RANK size=$WORLD_SIZE app=$MPI_APPNUM v=$V pwd=$(pwd -P)\"";
  RunSpec s;
  s.unset_env = {"V", "CTX"};
  s.argv = {bin("dlaunch"), "-tag-output", "-np=2", "-x", "CTX=a", "/bin/sh", "-c", script, ":",
            "-np=3", "-x", "V=two", "-xCTX=b", "-wdir", wdir, "/bin/sh", "-c", script, ":",
            "-np", "1", "-wd", wdir, "--x=CTX=c", "/bin/sh", "-c", script};
  RunResult r = run(s, 90);
  INFO(r.err << r.out);
  REQUIRE(r.code == 0);
  std::vector<std::string> got;
  for (const auto& line : lines(r.out)) got.push_back(line.substr(line.find("] ") + 2));
  std::sort(got.begin(), got.end());
  const std::string cwd = std::filesystem::current_path().string();
  std::vector<std::string> want;
  for (int rank = 0; rank < 6; ++rank) {
    const int app = rank < 2 ? 0 : rank < 5 ? 1 : 2;
    want.push_back("ctx=" + std::string(1, static_cast<char>('a' + app)) + " rank=" + std::to_string(rank) +
                   " size=6 app=" + std::to_string(app) + " v=" + (app == 1 ? "two" : "") +
                   " pwd=" + (app == 0 ? std::filesystem::canonical(cwd).string() : wdir));
  }
  std::sort(want.begin(), want.end());
  CHECK(got == want);
}

TEST_CASE("mpmd: --app FILE runs one context per line", "[integration]") {
  TempDir out, work;
  const std::string wdir = std::filesystem::canonical(work.path).string();
  const std::string app = work.path + "/appfile";
  write_file(app, "# server first\n-n 1 -x ONLY_SERVER=1 /usr/bin/env ROLE=server /usr/bin/env\n\n"
                  "-n 2 -x ONLY_WORKER=1 --wdir " + wdir +
                  " /bin/sh -c 'PWD_SEEN=$(pwd -P) ROLE=worker exec /usr/bin/env'\n");
  check_two_contexts({"--app", app}, out, wdir, true);
}

TEST_CASE("mpmd: an argument ':' after '--' is the program's", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "1", "--", "/bin/echo", "a", ":", "-n", "1", "b"};
  RunResult r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "a : -n 1 b\n");
  // Without "--", the same line is two contexts of one echo each.
  s.argv = {bin("dlaunch"), "-n", "1", "--tag-output", "/bin/echo", "a", ":", "-n", "1", "/bin/echo", "b"};
  r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto ls = lines(r.out);
  std::sort(ls.begin(), ls.end());
  REQUIRE(ls.size() == 2);
  CHECK(ls[0].find("a") != std::string::npos);
  CHECK(ls[0].rfind("[0@", 0) == 0);
  CHECK(ls[1].rfind("[1@", 0) == 0);
  CHECK(ls[1].substr(ls[1].size() - 1) == "b");
}

TEST_CASE("mpmd: --dry-run shows each rank's app", "[integration]") {
  TempDir tmp;  // the programs exist: --dry-run resolves them as the launch would
  for (const char* p : {"/server", "/worker"}) {
    write_file(tmp.path + p, "#!/bin/sh\n");
    ::chmod((tmp.path + p).c_str(), 0755);
  }
  RunSpec s;
  s.cwd = tmp.path;
  s.argv = {bin("dlaunch"), "--dry-run", "--gpus-per-node", "0", "-n", "1", "./server", "--port", "7", ":",
            "-n", "2", "./worker", "x"};
  RunResult r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto ls = lines(r.out);
  REQUIRE(ls.size() >= 4);
  CHECK(ends_with(ls[0], "  app"));
  CHECK(ls[1].rfind("0 ", 0) == 0);
  CHECK(ends_with(ls[1], "  0 ./server --port 7"));
  CHECK(ends_with(ls[2], "  1 ./worker x"));
  CHECK(ends_with(ls[3], "  1 ./worker x"));
  CHECK(r.out.find("\nrank 0 run ./server --port 7\nranks 1-2 run ./worker x\n") != std::string::npos);
  // A context whose program is missing fails as its launch would.
  s.argv.back() = "y";
  s.argv.at(s.argv.size() - 2) = "./missing";
  r = run(s, 30);
  CHECK(r.code == 127);
  CHECK(r.err.find("dlaunch: cannot start rank 1 on localhost: " + tmp.path + "/./missing: No such file or directory") !=
        std::string::npos);
}

TEST_CASE("mpmd: a ':' that starts no app context is an error saying what was expected", "[integration]") {
  TempDir tmp;
  const std::string bad_app = tmp.path + "/app";
  write_file(bad_app, "-n 1 /bin/true\n-n 2 --bind-to core /bin/true\n");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-n", "1", "/bin/true", ":"}, "expected an app context after the last ':'"},
      {{"-n", "1", "/bin/true", ":", "-n", "2"}, "app context 2: expected a program after its options, got the end"},
      {{"-n", "1", "/bin/true", ":", "-n", "2", ":", "/bin/true"}, "app context 2: expected a program after its options, got ':'"},
      {{"-n", "1", ":", "-n", "1", "/bin/true"}, "app context 1: expected a program before ':'"},
      {{"-n", "1", "/bin/true", ":", "/bin/true"}, "app context 2 (/bin/true) needs -n N"},
      {{"-n", "1", "/bin/true", ":", "-n", "0", "/bin/true"}, "app context 2: -n needs a positive number"},
      {{"-n", "1", "/bin/true", ":", "-n", "1", "--tag-output", "/bin/true"},
       "app context 2: --tag-output is an option for the whole job: give it before the first program"},
      {{"-np=1", "/bin/true", ":", "-np=1", "-tag-output", "/bin/true"},
       "app context 2: -tag-output (--tag-output) is an option for the whole job"},
      {{"-n", "1", "/bin/true", ":", "-np=1", "/bin/true", ":", "-np", "x", "/bin/true"},
       "app context 3: -n needs a positive number of ranks, got 'x'"},
      {{"-n", "1", "/bin/true", ":", "-n", "1", "-host", "h2", "/bin/true"},
       "app context 2: -host: the hosts are the whole job's"},
      {{"--app", bad_app}, bad_app + ":2: app context 2: --bind-to is an option for the whole job"},
      {{"--app", bad_app, "/bin/true"}, "--app " + bad_app + " names the programs"},
      {{"--app", tmp.path + "/missing"}, "cannot read it"},
  };
  for (const auto& [args, want] : cases) {
    RunSpec s;
    s.argv = {bin("dlaunch")};
    s.argv.insert(s.argv.end(), args.begin(), args.end());
    RunResult r = run(s, 30);
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("dlaunch: error: ") != std::string::npos);
    CHECK(r.err.find(want) != std::string::npos);
    CHECK(r.out.empty());
  }
}
