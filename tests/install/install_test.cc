// The installed tree: `cmake --install` of this build dir into a fresh
// prefix, then the installed dlaunch runs the installed demo from a directory
// outside the build tree, with a PATH that reaches nothing (so a dlaunch that
// found its agent in build/bin or on PATH would fail). Every case installs
// into its own temp dir, removed at its end, so cases run in parallel.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "tests/install/installed_tree.h"
#include "tests/integration/run_command.h"

using namespace dl::it;
namespace fs = std::filesystem;

namespace {

const std::string kBuildDir = DLAUNCH_BUILD_DIR;

// `cmake --install <this build dir> --prefix prefix`.
void install_to(const std::string& prefix) {
  RunSpec s;
  s.argv = {DLAUNCH_CMAKE_COMMAND, "--install", kBuildDir, "--prefix", prefix};
  RunResult r = run(s, 120);
  INFO("cmake --install " << kBuildDir << " --prefix " << prefix << "\n" << r.out << r.err);
  REQUIRE_FALSE(r.timed_out);
  REQUIRE(r.code == 0);
}

// A scratch dir (the case's temp dir) holding an empty dir for PATH and one
// to work in: neither is under the build tree.
struct Outside {
  explicit Outside(const std::string& root) : empty_bin(root + "/empty-bin"), cwd(root + "/work") {
    fs::create_directories(empty_bin);
    fs::create_directories(cwd);
  }
  std::string empty_bin, cwd;
};

// The installed `bin/dlaunch --tag-output -n 2 [options] bin/dlaunch-hello`,
// run from outside.cwd with PATH = an empty dir.
RunResult run_hello(const std::string& prefix, const Outside& outside, const std::vector<std::string>& options = {},
                    const std::map<std::string, std::string>& env = {}) {
  RunSpec s;
  s.argv = {prefix + "/bin/dlaunch", "--tag-output", "-n", "2"};
  s.argv.insert(s.argv.end(), options.begin(), options.end());
  s.argv.push_back(prefix + "/bin/dlaunch-hello");
  s.cwd = outside.cwd;
  s.set_env = env;
  s.set_env["PATH"] = outside.empty_bin;
  s.unset_env = {"LD_LIBRARY_PATH"};
  Child c = start(s);
  ChildGuard guard{c, prefix + "/"};
  return wait(c, 60);
}

// Both ranks' identity line and barrier line, tagged "[r@host] ".
void check_hello_output(const RunResult& r) {
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 0);
  CHECK(hello_ranks_ok(r.out, 2) == 2);
}

// Runs the installed demo from outside the build tree, checks its output,
// and that nothing from `prefix` is left running.
void run_hello_clean(const std::string& prefix, const Outside& outside) {
  RunResult r = run_hello(prefix, outside);
  check_hello_output(r);
  auto left = wait_gone(prefix, 5);
  INFO("left running from " << prefix << ":\n" << describe(left));
  CHECK(left.empty());
}
}  // namespace

TEST_CASE("installed dlaunch runs the installed demo from outside the build tree", "[install]") {
  TempDir tmp;
  const std::string prefix = tmp.path + "/prefix";
  install_to(prefix);
  run_hello_clean(prefix, Outside(tmp.path));
}

TEST_CASE("an installed tree still runs after its prefix dir is renamed", "[install]") {
  TempDir tmp;
  const std::string before = tmp.path + "/before";
  const std::string after = tmp.path + "/after";
  install_to(before);
  fs::rename(before, after);
  REQUIRE_FALSE(fs::exists(before));
  run_hello_clean(after, Outside(tmp.path));
}

TEST_CASE("the install holds the launcher's programs, and they load no library from the build tree", "[install]") {
  TempDir tmp;
  const std::string prefix = tmp.path + "/prefix";
  install_to(prefix);

  std::set<std::string> want{"dlaunch", "dlaunch-agent", "dlaunch-hello"};
  if (DLAUNCH_INSTALLS_NCCL_CHECK) want.insert("dlaunch-nccl-check");
  std::set<std::string> got;
  for (const auto& e : fs::directory_iterator(prefix + "/bin")) got.insert(e.path().filename().string());
  CHECK(got == want);  // no test binary, no benchmark

  for (const auto& name : got) {
    const std::string path = prefix + "/bin/" + name;
    INFO(path);
    CHECK(::access(path.c_str(), X_OK) == 0);
    RunSpec s;
    s.argv = {"/usr/bin/ldd", path};
    s.unset_env = {"LD_LIBRARY_PATH"};
    RunResult r = run(s, 30);
    INFO("ldd:\n" << r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("not found") == std::string::npos);
    CHECK(r.out.find(kBuildDir) == std::string::npos);
  }
}

TEST_CASE("an install without dlaunch-agent fails, naming the agent", "[install]") {
  // The premise of the cases above: nothing outside the prefix can stand in
  // for an installed file. With the agent removed, a job whose agent is
  // dlaunch-agent (a remote host's; here the local one, by
  // DLAUNCH_LOCAL_AGENT=exec) must not start.
  TempDir tmp;
  const std::string prefix = tmp.path + "/prefix";
  install_to(prefix);
  REQUIRE(fs::remove(prefix + "/bin/dlaunch-agent"));
  Outside outside(tmp.path);

  // dlaunch may notice the missing agent only when it fails to connect
  // (--agent-timeout, 30 s by default): 5 s keeps this case short.
  RunResult r = run_hello(prefix, outside, {"--agent-timeout", "5"}, {{"DLAUNCH_LOCAL_AGENT", "exec"}});
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code != 0);
  CHECK(r.err.find("dlaunch-agent") != std::string::npos);
  CHECK(r.out.find("passed the barrier") == std::string::npos);
  auto left = wait_gone(prefix, 5);
  INFO("left running from " << prefix << ":\n" << describe(left));
  CHECK(left.empty());

  // By default the local agent is forked from dlaunch itself: the job runs.
  run_hello_clean(prefix, outside);
}
