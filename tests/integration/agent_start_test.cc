// The local agent that cannot start: a dlaunch copied alone into a dir (no
// dlaunch-agent beside it, none on PATH), or an agent that dies before it
// connects. dlaunch must say so at once, never die of SIGPIPE writing the
// token, and leave nothing behind. And a rank under PMIx where libpmix cannot
// be loaded (dlaunch's programs open it only then).
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
// Far beyond what a failed start may take: an answer within kPrompt seconds
// cannot come from this timer running out. A failed start takes some 30 ms;
// kPrompt leaves room for a machine loaded far beyond its cores.
constexpr const char* kAgentTimeout = "60";
constexpr double kPrompt = 20;

// A dir holding a copy of dlaunch and, when `agent` is not "", a
// dlaunch-agent script with that body beside it.
struct LoneDlaunch {
  TempDir dir;
  std::string dlaunch = dir.path + "/dlaunch";
  explicit LoneDlaunch(const std::string& agent = "") {
    std::filesystem::copy_file(bin("dlaunch"), dlaunch);
    std::filesystem::permissions(dlaunch, std::filesystem::perms::owner_all);
    if (!agent.empty()) write_file(dir.path + "/dlaunch-agent", "#!/bin/sh\n" + agent + "\n", 0755);
  }
  // dlaunch -n 2 sleep <marker>, with PATH holding no dlaunch-agent. The
  // local agent as a program of its own (DLAUNCH_LOCAL_AGENT=exec), as on a
  // remote host or when a lost local agent is started again: by default
  // dlaunch forks it from itself (remote/early_agent.h, tested below).
  RunResult run_job(const std::string& marker, bool exec_agent = true) const {
    RunSpec s;
    s.argv = {dlaunch, "-n", "2", "--agent-timeout", kAgentTimeout, "sleep", marker};
    s.set_env = {{"PATH", "/usr/bin:/bin"}};
    if (exec_agent) s.set_env["DLAUNCH_LOCAL_AGENT"] = "exec";
    return run(s, 90);
  }
};

// Nothing of the job may remain: no rank (the marker), no dlaunch copy nor a
// forked child that never became the agent (their argv names the dir).
void check_nothing_left(const LoneDlaunch& d, const std::string& marker) {
  CHECK(wait_marked_gone(marker, 2).empty());
  CHECK(wait_marked_gone(d.dir.path, 2).empty());
  kill_marked(marker);
  kill_marked(d.dir.path);
}

// A start failure: dlaunch itself not killed by a signal (before the fix,
// SIGPIPE at times, with no message at all), exit 1, and at once rather than
// after the --agent-timeout of 60 s.
void check_failed_at_once(const RunResult& r) {
  CHECK(r.signal == 0);
  CHECK(r.code == 1);
  CHECK(r.seconds < kPrompt);
}
}  // namespace

TEST_CASE("no dlaunch-agent beside dlaunch nor on PATH: exit 1 at once and the error names where it looked",
          "[integration]") {
  LoneDlaunch d;
  const std::string m = new_marker();
  RunResult r = d.run_job(m);
  INFO(r.err);
  check_failed_at_once(r);
  CHECK(r.err.find("localhost: dlaunch-agent was not found") != std::string::npos);
  CHECK(r.err.find("(" + d.dir.path + "/dlaunch-agent)") != std::string::npos);  // beside dlaunch
  CHECK(r.err.find("PATH (/usr/bin:/bin)") != std::string::npos);
  CHECK(r.err.find("install dlaunch-agent beside dlaunch") != std::string::npos);
  CHECK(r.err.find("did not connect within") == std::string::npos);
  CHECK(r.out.empty());
  check_nothing_left(d, m);
}

TEST_CASE("a lone dlaunch runs a local job: its agent is forked from dlaunch itself, named dlaunch-agent, and goes "
          "with the job",
          "[integration]") {
  LoneDlaunch d;
  const std::string m = new_marker();
  RunSpec s;
  // Each rank prints its rank and what its parent (the agent) is called and runs.
  s.argv = {d.dlaunch, "-n", "2", "--tag-output", "--agent-timeout", kAgentTimeout, "sh", "-c",
            "echo rank=$RANK comm=$(cat /proc/$PPID/comm) cmdline=$(tr '\\0' ' ' < /proc/$PPID/cmdline)", m};
  s.set_env = {{"PATH", "/usr/bin:/bin"}};
  s.unset_env = {"DLAUNCH_LOCAL_AGENT"};
  RunResult r = run(s, 90);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  for (int k = 0; k < 2; ++k) {
    CHECK(r.out.find("[" + std::to_string(k) + "@localhost] rank=" + std::to_string(k) + " comm=dlaunch-agent cmdline=dlaunch-agent --") !=
          std::string::npos);
  }
  check_nothing_left(d, m);
}

TEST_CASE("a local agent that exits before it connects fails the job at once with its status", "[integration]") {
  // It neither reads its token nor connects: the token write may meet a
  // closed pipe, which must not kill dlaunch either.
  LoneDlaunch d("echo 'agent-start-test: cannot go on' >&2; exit 3");
  const std::string m = new_marker();
  RunResult r = d.run_job(m);
  INFO(r.err);
  check_failed_at_once(r);
  CHECK(r.err.find("agent-start-test: cannot go on") != std::string::npos);  // the agent's own words
  CHECK(r.err.find("localhost: dlaunch-agent (" + d.dir.path + "/dlaunch-agent) exited with status 3 before it "
                   "connected") != std::string::npos);
  check_nothing_left(d, m);
}

TEST_CASE("a local agent killed before it connects: the signal is named", "[integration]") {
  LoneDlaunch d("kill -KILL $$");
  const std::string m = new_marker();
  RunResult r = d.run_job(m);
  INFO(r.err);
  check_failed_at_once(r);
  CHECK(r.err.find("was killed by signal 9") != std::string::npos);
  check_nothing_left(d, m);
}

namespace {
// The file the loader opens for dlopen("libpmix.so.2"), symlinks resolved;
// "" when there is none. Probed in a child, so libpmix never enters the test.
std::string libpmix_file() {
  int p[2];
  if (::pipe(p) != 0) return "";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    link_map* lm = nullptr;
    void* h = ::dlopen("libpmix.so.2", RTLD_LAZY | RTLD_LOCAL);
    char real[PATH_MAX] = {};
    if (h && ::dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && ::realpath(lm->l_name, real))
      (void)!::write(p[1], real, std::strlen(real));
    ::_exit(0);
  }
  ::close(p[1]);
  std::string path;
  char buf[512];
  for (ssize_t k; (k = ::read(p[0], buf, sizeof buf)) > 0;) path.append(buf, static_cast<size_t>(k));
  ::close(p[0]);
  int st;
  ::waitpid(pid, &st, 0);
  return path;
}
}  // namespace

TEST_CASE("a rank under PMIx on a host without libpmix: the error says so and names libpmix2", "[integration]") {
  // dlaunch-hello links no libpmix (it opens it when PMIX_* are set), so it
  // starts here; hiding the library in a private mount namespace needs root.
  const std::string lib = libpmix_file();
  if (::geteuid() != 0 || lib.empty()) {
    WARN("needs root and an installed libpmix.so.2 to hide it; skipped");
    return;
  }
  RunSpec s;
  s.argv = {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
            "mount --bind /dev/null \"$0\" && exec \"$1\"", lib, bin("dlaunch-hello")};
  s.set_env = {{"PMIX_RANK", "0"}, {"PMIX_NAMESPACE", "agent-start-test"}};
  s.unset_env = {"DLAUNCH_RANK", "DLAUNCH_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                 "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"};
  RunResult r = run(s, 30);
  INFO(r.err);
  CHECK(r.signal == 0);
  CHECK(r.code == 1);
  CHECK(r.err.find("PMIX_RANK/PMIX_NAMESPACE are set but libpmix cannot be loaded") != std::string::npos);
  CHECK(r.err.find("libpmix2") != std::string::npos);
}

// Started with stdin, stdout or stderr closed (a cron job, a daemon, a CI
// runner that closes stdin): the first pipe or socket dlaunch opened got that
// number, so "stdin" was the local agent's control link or the rank's stdout
// went to /dev/null. Before the fix `dlaunch ... <&-` lost its local agent
// ("connection closed") or a rank's output in about one run of six: twelve
// runs each way would all pass by chance less than once in eight.
TEST_CASE("dlaunch started with stdin, stdout or stderr closed runs the job whole", "[integration]") {
  const std::string marker = new_marker();
  const std::string job = "'" + bin("dlaunch") + "' -n 2 --tag-output sh -c 'echo rank=$RANK; echo err=$RANK >&2' " + marker;
  struct Way {
    std::string redirect;
    bool out, err;  // which of the job's streams reach the test
  };
  for (const Way& w : {Way{"<&-", true, true}, Way{">&-", false, true}, Way{"2>&-", true, false}}) {
    for (int i = 0; i < 12; ++i) {
      RunSpec s;
      s.argv = {"/bin/sh", "-c", job + " " + w.redirect};
      RunResult r = run(s, 60);
      INFO(w.redirect << " run " << i << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
      REQUIRE(r.code == 0);
      CHECK(r.err.find("lost the agent") == std::string::npos);
      for (int k = 0; k < 2; ++k) {
        const std::string tag = "[" + std::to_string(k) + "@localhost] ";
        if (w.out) CHECK(r.out.find(tag + "rank=" + std::to_string(k) + "\n") != std::string::npos);
        if (w.err) CHECK(r.err.find(tag + "err=" + std::to_string(k) + "\n") != std::string::npos);
      }
    }
  }
  CHECK(wait_marked_gone(marker, 2).empty());
}
