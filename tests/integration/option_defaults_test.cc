// Option defaults as the real dlaunch reads them: a user config found through
// XDG_CONFIG_HOME, a system config, DLAUNCH_<OPTION> over both, the command
// line over all, and a bad line stopping the job before anything starts.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
// `dlaunch -n 2 sh -c 'echo hi'` with the given config files and extra environment.
RunResult run_with(const std::string& xdg, const std::string& system, std::map<std::string, std::string> env,
                   std::vector<std::string> options = {}) {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2"};
  s.argv.insert(s.argv.end(), options.begin(), options.end());
  for (const char* w : {"/bin/sh", "-c", "echo hi from $RANK"}) s.argv.push_back(w);
  s.set_env = std::move(env);
  s.set_env["XDG_CONFIG_HOME"] = xdg;
  s.set_env["DLAUNCH_SYSTEM_CONFIG"] = system;
  s.unset_env = {"DLAUNCH_CONFIG", "DLAUNCH_TAG_OUTPUT", "DLAUNCH_TIMESTAMP_OUTPUT"};
  return run(s, 60);
}

int tagged(const RunResult& r) {
  int n = 0;
  for (const auto& l : lines(r.out))
    if (l.rfind("[0@", 0) == 0 || l.rfind("[1@", 0) == 0) ++n;
  return n;
}
}  // namespace

TEST_CASE("option defaults: the user config tags a real job's output, DLAUNCH_TAG_OUTPUT=0 undoes it",
          "[integration]") {
  TempDir tmp;
  std::filesystem::create_directories(tmp.path + "/xdg/dlaunch");
  std::ofstream(tmp.path + "/xdg/dlaunch/config") << "# every job\ntag-output = true\n";
  const std::string system = tmp.path + "/system";
  std::ofstream(system) << "tag-output = false\n";

  RunResult r = run_with(tmp.path + "/xdg", system, {});
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  CHECK(r.code == 0);
  CHECK(tagged(r) == 2);

  r = run_with(tmp.path + "/xdg", system, {{"DLAUNCH_TAG_OUTPUT", "0"}});
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  CHECK(r.code == 0);
  CHECK(tagged(r) == 0);
  CHECK(r.out.find("hi from 1") != std::string::npos);

  // Without the user file the system's "false" is what counts.
  r = run_with(tmp.path + "/elsewhere", system, {});
  CHECK(r.code == 0);
  CHECK(tagged(r) == 0);
}

TEST_CASE("option defaults: a bad config line stops dlaunch with exit 2 naming FILE:LINE", "[integration]") {
  TempDir tmp;
  const std::string system = tmp.path + "/system";
  std::ofstream(system) << "kill-grace = 4\n\ntag-ouput = true\n";
  RunResult r = run_with(tmp.path + "/none", system, {});
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  CHECK(r.code == 2);
  CHECK(r.out.empty());  // nothing started
  CHECK(r.err == "dlaunch: error: " + system +
                     ":3: expected an option of `dlaunch help run` (long name, without dashes), got 'tag-ouput'; did "
                     "you mean 'tag-output'?\n");
}

TEST_CASE("option defaults: a hostfile that fails names the config file or variable that gave it", "[integration]") {
  TempDir tmp;
  const std::string missing = tmp.path + "/no-such-hosts", bad = tmp.path + "/bad-hosts";
  std::ofstream(bad) << "node1 slots=two\n";
  std::filesystem::create_directories(tmp.path + "/xdg/dlaunch");
  const std::string user = tmp.path + "/xdg/dlaunch/config", system = tmp.path + "/system";
  std::ofstream(user) << "# the cluster\nhostfile = " + missing + "\n";
  std::ofstream(system) << "hostfile = " + bad + "\n";
  const std::string hint = "; pass --hostfile or -H to use another)\n";
  RunResult r = run_with(tmp.path + "/xdg", system, {});  // the user config over the system's
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("cannot read it") != std::string::npos);
  CHECK(r.err.find(" (hostfile = " + missing + " from user config " + user + ":2" + hint) != std::string::npos);
  r = run_with(tmp.path + "/none", system, {});
  CHECK(r.code == 2);
  CHECK(r.err.find(bad + ":1:") == 16);  // after "dlaunch: error: "
  CHECK(r.err.find(" (hostfile = " + bad + " from system config " + system + ":1" + hint) != std::string::npos);
  r = run_with(tmp.path + "/none", system, {{"DLAUNCH_HOSTFILE", missing}});
  CHECK(r.code == 2);
  CHECK(r.err.find(" (hostfile = " + missing + " from env DLAUNCH_HOSTFILE" + hint) != std::string::npos);
  // Typed on the command line, the file is the user's own: no origin.
  r = run_with(tmp.path + "/none", system, {}, {"--hostfile", missing});
  CHECK(r.code == 2);
  CHECK(r.err.find("(hostfile = ") == std::string::npos);
}

TEST_CASE("option defaults: a bad config line does not hide --help and --version", "[integration]") {
  TempDir tmp;
  const std::string system = tmp.path + "/system";
  std::ofstream(system) << "tag-ouput = true\n";
  for (const char* flag : {"--help", "-h", "--version"}) {
    RunSpec s;
    s.argv = {bin("dlaunch"), flag};
    s.set_env["XDG_CONFIG_HOME"] = tmp.path + "/none";
    s.set_env["DLAUNCH_SYSTEM_CONFIG"] = system;
    s.unset_env = {"DLAUNCH_CONFIG"};
    RunResult r = run(s, 30);
    INFO(flag << "\nstdout:\n" << r.out << "stderr:\n" << r.err);
    CHECK(r.code == 0);
    if (std::string(flag) == "--version") {
      CHECK(r.out.rfind("dlaunch ", 0) == 0);
    } else {
      CHECK(r.out.find("usage: dlaunch") != std::string::npos);
      CHECK(r.out.find(system + ":1:") != std::string::npos);  // the help names what is wrong
    }
  }
  // A job still stops on it.
  RunResult r = run_with(tmp.path + "/none", system, {});
  CHECK(r.code == 2);
}

TEST_CASE("option defaults: dlaunch help run names where each default came from", "[integration]") {
  TempDir tmp;
  std::filesystem::create_directories(tmp.path + "/xdg/dlaunch");
  const std::string user = tmp.path + "/xdg/dlaunch/config";
  std::ofstream(user) << "kill-grace = 6\nssh-timeout = 20\n";
  RunSpec s;
  s.argv = {bin("dlaunch"), "help", "run"};
  s.set_env = {{"XDG_CONFIG_HOME", tmp.path + "/xdg"}, {"DLAUNCH_SYSTEM_CONFIG", "/dev/null"},
               {"DLAUNCH_SSH_TIMEOUT", "7"}};
  s.unset_env = {"DLAUNCH_CONFIG"};
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("--kill-grace arg (=6)") != std::string::npos);
  CHECK(r.out.find("--ssh-timeout arg (=7)") != std::string::npos);
  CHECK(r.out.find("user config:   " + user + " (read)\n") != std::string::npos);
  CHECK(r.out.find("kill-grace = 6") != std::string::npos);
  CHECK(r.out.find("user config " + user + ":1\n") != std::string::npos);
  CHECK(r.out.find("env DLAUNCH_SSH_TIMEOUT\n") != std::string::npos);
  CHECK(r.out.find("user config " + user + ":2") == std::string::npos);  // hidden by the variable
}
