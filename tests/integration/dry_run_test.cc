// --dry-run resolves each program on this machine as the launch would: it
// fails where the launch fails (same line, same exit code) and shows the
// command the ranks would run (docs/dlaunch.md, "--dry-run").
#include <catch2/catch.hpp>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
// The "dlaunch: cannot start ..." line of `err`, or "".
std::string start_error(const std::string& err) {
  const auto at = err.find("dlaunch: cannot start");
  return at == std::string::npos ? "" : err.substr(at, err.find('\n', at) - at);
}
}  // namespace

TEST_CASE("dry run: a program that does not exist fails as the launch does, exit 127", "[integration]") {
  TempDir tmp;
  RunSpec launch;
  launch.cwd = tmp.path;
  launch.argv = {bin("dlaunch"), "-n", "2", "./nonexistent"};
  const RunResult real = run(launch);
  RunSpec dry = launch;
  dry.argv = {bin("dlaunch"), "--dry-run", "-n", "2", "./nonexistent"};
  const RunResult r = run(dry);
  INFO(r.err);
  REQUIRE(real.code == 127);
  CHECK(r.code == 127);
  CHECK(!start_error(r.err).empty());
  CHECK(start_error(r.err) == start_error(real.err));
  CHECK(r.out.find("rank ") == std::string::npos);  // no rank map for a job that cannot start
}

TEST_CASE("dry run: a program that is not executable fails with 126, as the launch does", "[integration]") {
  TempDir tmp;
  RunSpec s;
  s.cwd = tmp.path;
  s.argv = {bin("dlaunch"), "--dry-run", "-n", "1", "--wdir", "/", "./etc"};
  const RunResult r = run(s);
  INFO(r.err);
  CHECK(r.code == 126);
  CHECK(r.err.find("dlaunch: cannot start rank 0 on localhost: ") != std::string::npos);
}

TEST_CASE("dry run: shows the resolved command, a .py program under its interpreter", "[integration]") {
  TempDir tmp;
  RunSpec s;
  s.cwd = tmp.path;
  s.argv = {bin("dlaunch"), "--dry-run", "-n", "2", "-x", "PATH=/usr/bin:/bin", "python3", "train.py"};
  RunResult r = run(s);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("ranks 0-1 run /usr/bin/python3 train.py\n") != std::string::npos);
  // The .py file alone runs under python3 too, found on the ranks' PATH.
  s.argv = {bin("dlaunch"), "--dry-run", "-n", "1", "-x", "PATH=/usr/bin:/bin", "train.py", "--lr", "1"};
  s.set_env["PYTHON"] = "";
  r = run(s);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("rank 0 run /usr/bin/python3 train.py --lr 1\n") != std::string::npos);
}

TEST_CASE("dry run: ranks on remote hosts only are not resolved here", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "--dry-run", "-n", "2", "-H", "nodeA:2", "--gpus-per-node", "0", "./only-on-nodeA"};
  const RunResult r = run(s);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find(" run ") == std::string::npos);
}
