// Nothing left behind (docs/security.md): the temp dirs of an agent killed
// outright (a real SIGKILL, mid-job) stay, and the next job on the host
// removes them; a launcher killed outright leaves none, its agent removes
// them as it leaves. The real dlaunch and agent, with a TMPDIR of the test's.
#include <signal.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include <dirent.h>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
// The entries of `dir` named dlaunch-*.
std::vector<std::string> dlaunch_entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = d ? ::readdir(d) : nullptr)
    if (std::string(e->d_name).rfind("dlaunch-", 0) == 0) out.push_back(e->d_name);
  if (d) ::closedir(d);
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += n + " ";
  return s;
}

bool any_has(const std::vector<std::string>& names, const std::string& part) {
  for (const auto& n : names)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

// Two Python ranks (so the agent makes their dir, and a store door for
// them); each says "up" once both dirs exist, then runs `then` and sleeps.
RunSpec python_job(const std::string& tmp, const std::string& marker, const std::string& then) {
  const std::string script =
      "import os, sys, time\n"
      "d = os.environ['TMPDIR']\n"
      "while len([n for n in os.listdir(d) if n.startswith('dlaunch-')]) < 2: time.sleep(0.01)\n"
      "print('up', flush=True)\n" +
      then + "time.sleep(60)\n";
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--gpus-per-node", "0", "/usr/bin/python3", "-c", script, marker};
  s.set_env = {{"TMPDIR", tmp}};
  return s;
}

// The next job on the host: one rank of /bin/true, and no PMIx server (whose
// thread, where there is one, reaps too: this is the agent's own reaping).
RunResult next_job(const std::string& tmp) {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "1", "--mpi", "none", "/bin/true"};
  s.set_env = {{"TMPDIR", tmp}};
  return run(s, 30);
}

// Polls until `dir` holds no dlaunch-* entry, up to `seconds`; what is left.
std::vector<std::string> wait_empty(const std::string& dir, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  auto left = dlaunch_entries(dir);
  while (!left.empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    left = dlaunch_entries(dir);
  }
  return left;
}
}  // namespace

TEST_CASE("nothing left behind: an agent SIGKILLed mid-job leaves its dirs, the next job removes them",
          "[integration]") {
  TempDir t;
  const std::string m = new_marker();
  // Rank 0 kills its agent (its parent) outright.
  Child c = start(python_job(t.path, m, "if os.environ['RANK'] == '0': os.kill(os.getppid(), 9)\n"));
  ChildGuard guard{c, m};
  RunResult first = wait(c, 60);
  INFO(first.out << first.err);
  CHECK(first.code != 0);
  CHECK(wait_marked_gone(m, 10).empty());
  const auto left = dlaunch_entries(t.path);
  INFO("left: " << joined(left));
  // What a SIGKILLed agent leaves: else this test proves nothing.
  REQUIRE(any_has(left, "-py-"));
  CHECK(any_has(left, "-store-"));

  RunResult second = next_job(t.path);
  INFO(second.err);
  CHECK(second.code == 0);
  const auto after = wait_empty(t.path, 5);
  INFO("left after the next job: " << joined(after));
  CHECK(after.empty());
}

TEST_CASE("nothing left behind: a launcher SIGKILLed mid-job leaves no dirs, its agent removes them",
          "[integration]") {
  TempDir t;
  const std::string m = new_marker();
  Child c = start(python_job(t.path, m, ""));
  ChildGuard guard{c, m};
  std::string out;
  REQUIRE(read_fd_until(c.out_fd, out, "up", 30));
  REQUIRE(dlaunch_entries(t.path).size() >= 2);
  REQUIRE(::kill(c.pid, SIGKILL) == 0);
  wait(c, 30);
  CHECK(wait_marked_gone(m, 20).empty());
  const auto left = wait_empty(t.path, 10);
  INFO("left: " << joined(left));
  CHECK(left.empty());
}
