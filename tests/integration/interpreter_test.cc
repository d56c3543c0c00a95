// -v names the interpreter a .py program runs under, as resolved on the
// ranks' PATH, and says when it is a pyenv shim (docs/dlaunch.md, "-v").
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
// The "dlaunch: ... runs under ..." line of `err`, or "".
std::string runs_under(const std::string& err) {
  for (const auto& l : lines(err))
    if (l.find(" runs under ") != std::string::npos) return l;
  return "";
}
}  // namespace

TEST_CASE("interpreter: -v names the python a .py rank runs under, the one the rank reports", "[integration]") {
  TempDir tmp;
  const std::string script = tmp.path + "/which.py";
  std::ofstream(script) << "import sys\nprint('exe', sys.executable)\n";
  RunSpec s;
  s.argv = {bin("dlaunch"), "-v", "-n", "1", "-x", "PATH=/usr/bin:/bin", script};
  s.unset_env = {"PYTHON"};
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(runs_under(r.err) == "dlaunch: " + script +
                                 " runs under python3: /usr/bin/python3 on this machine (the ranks' PATH; $PYTHON "
                                 "names another)");
  CHECK(r.out.find("exe /usr/bin/python3\n") != std::string::npos);
  // Without -v, nothing is said.
  s.argv.erase(s.argv.begin() + 1);
  r = run(s, 60);
  CHECK(r.code == 0);
  CHECK(runs_under(r.err).empty());
}

TEST_CASE("interpreter: -v says when the python on the ranks' PATH is a pyenv shim", "[integration]") {
  TempDir tmp;
  const std::string shims = tmp.path + "/shims";
  std::filesystem::create_directories(shims);
  std::ofstream(shims + "/python3") << "#!/bin/sh\nexec /usr/bin/python3 \"$@\"\n";
  ::chmod((shims + "/python3").c_str(), 0755);
  const std::string script = tmp.path + "/hi.py";
  std::ofstream(script) << "print('hi')\n";
  RunSpec s;
  s.argv = {bin("dlaunch"), "-v", "-n", "1", "-x", "PATH=" + shims + ":/usr/bin:/bin", script};
  s.unset_env = {"PYTHON"};
  const RunResult r = run(s, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  const std::string line = runs_under(r.err);
  CHECK(line.find("runs under python3: " + shims + "/python3 on this machine") != std::string::npos);
  CHECK(line.find("; a pyenv shim: the version it runs depends on the rank's directory") != std::string::npos);
}

TEST_CASE("interpreter: a ModuleNotFoundError verdict names the interpreter the rank ran under and the fix",
          "[integration]") {
  TempDir tmp;
  const std::string script = tmp.path + "/needs.py";
  std::ofstream(script) << "import os\nimport dlaunch_no_such_module\n";
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "1", "-x", "PATH=/usr/bin:/bin", script};
  s.unset_env = {"PYTHON"};
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("exited with code 1: ModuleNotFoundError: No module named 'dlaunch_no_such_module' (at " + script +
                   ":2); the rank ran under python3: /usr/bin/python3 on this machine (the ranks' PATH; $PYTHON "
                   "names another); install the module for that interpreter, or name the one that has it with "
                   "$PYTHON") != std::string::npos);
}

TEST_CASE("interpreter: any uncaught Python exception is the verdict's cause, without torch's @record",
          "[integration]") {
  TempDir tmp;
  const std::string script = tmp.path + "/raises.py";
  std::ofstream(script) << "def train(lr):\n    raise ValueError('bad lr %g' % lr)\n\ntrain(3.0)\n";
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", script};
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("exited with code 1: ValueError: bad lr 3 (at " + script + ":2)") != std::string::npos);
  CHECK(r.err.find("the rank ran under") == std::string::npos);  // only a missing module is the interpreter's
}
