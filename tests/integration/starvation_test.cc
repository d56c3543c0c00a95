// Agents starved of CPU (issue 45): a job runs beside one busy loop per CPU,
// its ranks print megabytes through block-buffered stdio, and one rank fails
// once the others have printed everything, so the job is torn down while
// every CPU is taken. Then: every line arrived whole and in order, the exit
// code and the verdict name the failed rank, and /proc shows no process of
// the job left, none stopped (state T: a stack tool killed while attached
// leaves its target so), and the job's TMPDIR is empty (no store directory,
// no socket file). The loop watch's threshold is lowered so that a starved
// agent's watch runs its stack tool under the same starvation.
//
// Label "stress", run serially (the busy loops would slow every test beside
// them); no timing is asserted, only generous bounds on each wait.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <memory>
#include <sstream>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
// Each printing rank writes kLines lines "L r i len <len letters> E r i" into
// a 64 KiB stdio buffer (never a line at a time, even on a pty: the writes
// split lines anywhere), every 500th line 5000 letters long, flushes, marks
// itself done in DIR and sleeps; rank 1 ignores SIGTERM, so the teardown
// needs the SIGKILL after --kill-grace. The failing rank waits for every
// other rank's mark, prints its own lines and exits 3.
constexpr int kLines = 3000;
const char* kRank = R"(import io, os, signal, sys, time
r, world, fail = int(os.environ['RANK']), int(os.environ['WORLD_SIZE']), int(sys.argv[1])
lines, d = int(sys.argv[2]), sys.argv[3]
out = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, 'w', closefd=False), 65536), write_through=False)
def say(n):
    for i in range(n):
        k = (i * 37) % 300 + (5000 if i % 500 == 499 else 0)
        out.write('L %d %d %d %s E %d %d\n' % (r, i, k, chr(97 + r) * k, r, i))
    out.flush()
if r == fail:
    deadline = time.time() + 600
    while any(not os.path.exists('%s/done.%d' % (d, k)) for k in range(world) if k != r):
        if time.time() > deadline:
            sys.exit('rank %d: the other ranks did not mark themselves done in 600 s' % r)
        time.sleep(0.05)
    say(10)
    sys.exit(3)
if r == 1:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
say(lines)
open('%s/done.%d' % (d, r), 'w').close()
time.sleep(3600)
)";

// The whole of a /proc file, or "" when its process is gone (a read of an
// exited process's file fails with ESRCH).
std::string read_all(const std::string& path) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return n < 0 ? std::string() : out;
}

// A process of the job: its argv or its environment holds `marker`.
struct Leftover {
  pid_t pid;
  char state;
  std::string cmd;
};
std::vector<Leftover> job_processes(const std::string& marker) {
  std::vector<Leftover> out;
  DIR* d = ::opendir("/proc");
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (!end || *end || pid <= 0 || pid == ::getpid()) continue;
    const std::string dir = std::string("/proc/") + e->d_name;
    std::string cmd = read_all(dir + "/cmdline"), env = read_all(dir + "/environ");
    if (cmd.find(marker) == std::string::npos && env.find(marker) == std::string::npos) continue;
    // /proc/PID/stat: "pid (comm) S ...", comm may hold blanks and parentheses.
    const std::string stat = read_all(dir + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) continue;  // gone meanwhile
    const char state = stat[close + 2];
    if (state == 'Z' || state == 'X') continue;
    for (auto& c : cmd) if (c == '\0') c = ' ';
    out.push_back({static_cast<pid_t>(pid), state, cmd.substr(0, 160)});
  }
  if (d) ::closedir(d);
  return out;
}

// Every entry under `dir`, recursively (paths relative to it).
void entries_under(const std::string& dir, const std::string& rel, std::vector<std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    out.push_back(rel + name);
    struct stat st{};
    if (::lstat((dir + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      entries_under(dir + "/" + name, rel + name + "/", out);
  }
  if (d) ::closedir(d);
}

// Runs `args` (dlaunch's options before the rank program) for a job of
// `world` ranks whose rank `fail` fails, beside the busy loops, and checks
// everything the header says. The job's processes carry `m` in their argv
// or environment; `host_of(rank)` is the host a rank's tag names.
void starved_job(const std::string& m, std::vector<std::string> args, int world, int fail,
                 const std::function<std::string(int)>& host_of, std::map<std::string, std::string> env) {
  const std::string busy = new_marker();
  TempDir tmp, marks;
  RunSpec s;
  s.argv = {bin("dlaunch")};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  for (const char* a : {"--tag-output", "--kill-grace", "3", "--heartbeat-timeout", "300", "--stack-timeout", "0",
                        "/usr/bin/python3", "-c"})
    s.argv.push_back(a);
  s.argv.push_back(kRank);
  for (const auto& a : {std::to_string(fail), std::to_string(kLines), marks.path, m}) s.argv.push_back(a);
  s.set_env = std::move(env);
  s.set_env["TMPDIR"] = tmp.path;
  s.set_env["DL_STARVATION_JOB"] = m;         // every process of the job inherits it
  s.set_env["DLAUNCH_AGENT_STALL_MS"] = "500";  // the loop watch fires (and runs its stack tool) when starved
  s.unset_env = {"PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES"};

  std::vector<Leftover> left, stopped;
  RunResult r;
  {
    // One busy loop per CPU, printing into /dev/null; killed with their
    // process groups as this block ends (also when a REQUIRE leaves it).
    std::vector<std::unique_ptr<Child>> children;
    std::vector<std::unique_ptr<ChildGuard>> guards;
    const long cpus = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
    for (long k = 0; k < cpus; ++k) {
      RunSpec b;
      b.argv = {"/bin/sh", "-c", "exec /usr/bin/yes \"$0\" >/dev/null", busy};
      children.push_back(std::make_unique<Child>(start(b)));
      // Made in place: a temporary guard would kill the loop as it goes.
      guards.emplace_back(new ChildGuard{*children.back(), busy});
    }
    REQUIRE(wait_marked(busy, static_cast<size_t>(cpus), 60).size() >= static_cast<size_t>(cpus));
    Child c = start(s);
    ChildGuard job_guard{c, m};
    r = wait(c, 600);
    // Still starved: whatever the job left must be gone within a bound, and
    // a stopped process never goes by itself.
    for (int k = 0; k < 300; ++k) {
      left = job_processes(m);
      for (const auto& p : left)
        if (p.state == 'T' || p.state == 't') stopped.push_back(p);
      if (left.empty() || !stopped.empty()) break;
      ::usleep(100000);
    }
  }
  std::ostringstream why;
  for (const auto& p : left) why << "  pid " << p.pid << " state " << p.state << ": " << p.cmd << "\n";
  INFO("stderr:\n" << r.err.substr(0, 6000));
  INFO("left after the job:\n" << why.str());
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 3);
  CHECK(stopped.empty());
  CHECK(left.empty());
  std::vector<std::string> files;
  entries_under(tmp.path, "", files);
  std::string names;
  for (const auto& f : files) names += f + " ";
  INFO("left in TMPDIR: " << names);
  CHECK(files.empty());

  // The verdict: the failed rank, its host and exit code, and no other rank blamed.
  std::vector<std::string> verdict;
  for (const auto& l : lines(r.err))
    if (l.find(" exited with code ") != std::string::npos || l.find(" was killed by ") != std::string::npos)
      verdict.push_back(l);
  REQUIRE(verdict.size() == 1);
  CHECK(verdict[0].rfind("dlaunch: rank " + std::to_string(fail) + " on " + host_of(fail) + " (pid ", 0) == 0);
  CHECK(verdict[0].find(") exited with code 3") != std::string::npos);

  // Every line whole and in order; every rank's lines all there.
  std::map<int, int> next;
  long bad = 0;
  std::string first_bad;
  for (const auto& l : lines(r.out)) {
    int rank = -1, i = -1, k = -1;
    std::istringstream in(l);
    std::string tag, word;
    in >> tag >> word >> rank >> i >> k;
    const int want_i = next[rank];
    const std::string want = "[" + std::to_string(rank) + "@" + host_of(rank) + "] L " + std::to_string(rank) + " " +
                             std::to_string(want_i) + " " + std::to_string(k) + " " +
                             std::string(static_cast<size_t>(std::max(k, 0)), static_cast<char>('a' + rank)) + " E " +
                             std::to_string(rank) + " " + std::to_string(want_i);
    const int want_k = (want_i * 37) % 300 + (want_i % 500 == 499 ? 5000 : 0);
    if (rank < 0 || rank >= world || i != want_i || k != want_k || l != want) {
      if (bad++ == 0) first_bad = l.substr(0, 200);
      continue;
    }
    ++next[rank];
  }
  INFO("first line not whole or out of order: " << first_bad);
  CHECK(bad == 0);
  for (int rank = 0; rank < world; ++rank) {
    INFO("rank " << rank);
    CHECK(next[rank] == (rank == fail ? 10 : kLines));
  }
}
}  // namespace

TEST_CASE("starved CPUs: a local job's output arrives whole, its failure tears it down, nothing is left",
          "[integration][stress]") {
  starved_job(new_marker(), {"-n", "4"}, 4, 3, [](int) { return std::string("localhost"); }, {});
}

TEST_CASE("starved CPUs: a job on 2 simulated hosts tears down whole, no agent left stopped or running",
          "[integration][stress][sim]") {
  const std::string m = new_marker();
  const std::string a = "sima-" + m, b = "simb-" + m;
  starved_job(m, {"--launcher", "sim", "-H", a + ":2," + b + ":2", "--gpus-per-node", "0"}, 4, 3,
              [=](int rank) { return rank < 2 ? a : b; }, {{"DLAUNCH_SIM", "1"}});
}
