// A job's life on real processes: fail-fast, --timeout, signals to dlaunch,
// and dlaunch killed outright. Nothing may outlive the job (checked in /proc).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <chrono>
#include <sstream>
#include <thread>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
void pause_s(double s) { std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(s * 1000))); }

bool still_running(pid_t pid) {
  int st;
  return ::waitpid(pid, &st, WNOHANG) == 0;
}

// Ranks (marker carriers other than dlaunch itself) once n of them run.
std::vector<pid_t> ranks_running(const std::string& m, size_t n, pid_t dlaunch) {
  auto found = wait_marked(m, n, 10, dlaunch);
  REQUIRE(found.size() >= n);
  return found;
}

// The local agent: the ancestor of the marked processes whose parent is
// dlaunch (a marked process may be a rank or the rank's own child); -1 if none.
pid_t agent_of(const std::vector<pid_t>& marked, pid_t dlaunch) {
  for (pid_t p : marked)
    for (pid_t a = p; a > 1; a = parent_of(a))
      if (parent_of(a) == dlaunch) return a;
  return -1;
}
}  // namespace

TEST_CASE("fail-fast: sleeping ranks are killed when one fails, within grace + 1 s", "[integration]") {
  const std::string m = new_marker();
  RunSpec s;
  // The sleepers ignore SIGTERM, so only the SIGKILL after --kill-grace ends them.
  s.argv = {bin("dlaunch"), "-n", "4", "--kill-grace", "1", "/bin/sh", "-c",
            "if [ \"$RANK\" = 0 ]; then sleep 0.5; exit 1; fi; trap '' TERM; sleep \"$0\"", m};
  RunResult r = run(s, 20);
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("rank 0 on localhost") != std::string::npos);
  // 0.5 s until the failure, 1 s of grace, 1 s of slack (start-up included).
  CHECK(r.seconds < 0.5 + 1 + 1);
  CHECK(r.seconds >= 1.5);  // the grace was honoured: SIGTERM alone did not end them
  auto left = wait_marked_gone(m, 0.5);
  CHECK(left.empty());
  kill_marked(m);
}

TEST_CASE("fail-fast: ranks that obey SIGTERM end without waiting out the grace", "[integration]") {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "4", "--kill-grace", "5", "/bin/sh", "-c",
            "if [ \"$RANK\" = 3 ]; then sleep 0.3; exit 2; fi; sleep \"$0\"", m};
  RunResult r = run(s, 20);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.seconds < 0.3 + 1.5);
  CHECK(wait_marked_gone(m, 0.5).empty());
  kill_marked(m);
}

TEST_CASE("dlaunch --timeout stops the job with 124 and says so", "[integration]") {
  const std::string m = new_marker();
  TempDir report;  // where the stack report goes (docs/hangs.md), rather than a temp dir left behind
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "3", "--timeout", "1", "--kill-grace", "1", "--report-dir", report.path, "/bin/sleep", m};
  RunResult r = run(s, 20);
  INFO(r.err);
  CHECK(r.code == 124);
  CHECK(r.err.find("--timeout 1") != std::string::npos);
  CHECK(r.err.find("ranks 0-2 (3): ") != std::string::npos);  // the sleepers' stacks, grouped
  CHECK(r.seconds >= 1.0);
  // The timeout, the stacks (eu-stack on three sleepers: well under 1 s), the grace.
  CHECK(r.seconds < 1 + 1 + 1 + 1);
  CHECK(wait_marked_gone(m, 0.5).empty());
  kill_marked(m);
}

TEST_CASE("SIGINT to dlaunch stops the ranks and exits 130", "[integration]") {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "3", "/bin/sleep", m};
  Child c = start(s);
  ChildGuard guard{c, m};
  ranks_running(m, 3, c.pid);
  ::kill(c.pid, SIGINT);
  RunResult r = wait(c, 10);
  INFO(r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 130);
  CHECK(r.err.find("interrupted") != std::string::npos);
  CHECK(wait_marked_gone(m, 1).empty());
  kill_marked(m);
}

TEST_CASE("SIGTERM to dlaunch is forwarded: exit 143", "[integration]") {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "/bin/sleep", m};
  Child c = start(s);
  ChildGuard guard{c, m};
  ranks_running(m, 2, c.pid);
  ::kill(c.pid, SIGTERM);
  RunResult r = wait(c, 10);
  INFO(r.err);
  CHECK(r.code == 143);
  CHECK(wait_marked_gone(m, 1).empty());
  kill_marked(m);
}

namespace {
// A process's state letter from /proc (R, S, T, Z, ...), or 0 when gone.
char proc_state(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? 0 : text[close + 2];
}

bool becomes(pid_t pid, char state, double seconds) {
  for (double waited = 0; waited < seconds; waited += 0.05) {
    if (proc_state(pid) == state) return true;
    pause_s(0.05);
  }
  return proc_state(pid) == state;
}

// A rank's shell is stopped: 'T' itself, or 'D' waiting in vfork for a
// child (dash's `sleep`) that the group's SIGTSTP stopped before its exec.
bool stopped(pid_t pid) {
  const char s = proc_state(pid);
  if (s == 'T') return true;
  if (s != 'D') return false;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t child = static_cast<pid_t>(std::stol(name));
    if (parent_of(child) == pid && proc_state(child) == 'T') return true;
  }
  return false;
}

bool becomes_stopped(pid_t pid, double seconds) {
  for (double waited = 0; waited < seconds; waited += 0.05) {
    if (stopped(pid)) return true;
    pause_s(0.05);
  }
  return stopped(pid);
}
}  // namespace

// Ctrl-Z on a terminal sends SIGTSTP to dlaunch (its children are in groups
// of their own). Before, dlaunch stopped alone: the ranks ran on, and after
// --heartbeat-timeout the agent ended the job as launcher-less. Now the
// ranks stop with it, stay stopped past twice the timeout, and SIGCONT (fg)
// continues the whole job to a clean end.
TEST_CASE("Ctrl-Z (SIGTSTP) stops dlaunch and its ranks past the heartbeat timeout - SIGCONT ends the job whole",
          "[integration][slow]") {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--heartbeat-timeout", "2", "/bin/sh", "-c",
            "i=0; while [ $i -lt 20 ]; do i=$((i+1)); echo tick $RANK $i; sleep 0.1; done", m};
  Child c = start(s);
  ChildGuard guard{c, m};
  const auto ranks = ranks_running(m, 2, c.pid);
  ::kill(c.pid, SIGTSTP);
  CHECK(becomes(c.pid, 'T', 5));
  for (pid_t r : ranks) CHECK(becomes_stopped(r, 5));
  pause_s(4.5);  // more than twice --heartbeat-timeout
  CHECK(proc_state(c.pid) == 'T');
  for (pid_t r : ranks) CHECK(stopped(r));
  ::kill(c.pid, SIGCONT);
  RunResult r = wait(c, 30);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("lost") == std::string::npos);
  CHECK(r.out.find("tick 0 20\n") != std::string::npos);
  CHECK(r.out.find("tick 1 20\n") != std::string::npos);
  CHECK(wait_marked_gone(m, 2, c.pid).empty());
}

TEST_CASE("ranks that ignore SIGINT: a second SIGINT kills them at once", "[integration]") {
  const std::string m = new_marker();
  TempDir tmp;
  RunSpec s;
  // Each rank says it is ready once its traps are set, so SIGINT never
  // arrives before them.
  s.argv = {bin("dlaunch"), "-n", "3", "--kill-grace", "30", "/bin/sh", "-c",
            "trap '' INT TERM; touch " + tmp.path + "/ready.$RANK; sleep \"$0\"", m};
  Child c = start(s);
  ChildGuard guard{c, m};
  ranks_running(m, 3, c.pid);
  for (int i = 0; i < 500; ++i) {
    if (::access((tmp.path + "/ready.0").c_str(), F_OK) == 0 && ::access((tmp.path + "/ready.1").c_str(), F_OK) == 0 &&
        ::access((tmp.path + "/ready.2").c_str(), F_OK) == 0)
      break;
    pause_s(0.02);
  }
  ::kill(c.pid, SIGINT);
  pause_s(0.5);
  // The first SIGINT was forwarded and ignored: everything still runs.
  CHECK(still_running(c.pid));
  CHECK(marked(m, c.pid).size() >= 3);
  ::kill(c.pid, SIGINT);
  RunResult r = wait(c, 10);
  INFO(r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.seconds < 0.5 + 3);  // not the 30 s grace
  CHECK(r.code == 130);
  CHECK(wait_marked_gone(m, 1).empty());
  kill_marked(m);
}

TEST_CASE("dlaunch killed by SIGKILL leaves no agent and no rank behind", "[integration]") {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "3", "/bin/sh", "-c", "sleep \"$0\"; echo survived", m};
  Child c = start(s);
  ChildGuard guard{c, m};
  const pid_t agent = agent_of(ranks_running(m, 3, c.pid), c.pid);
  REQUIRE(agent > 0);
  REQUIRE(alive(agent));
  ::kill(c.pid, SIGKILL);
  RunResult r = wait(c, 5);
  CHECK(r.signal == SIGKILL);
  for (int i = 0; i < 100 && alive(agent); ++i) pause_s(0.02);
  CHECK_FALSE(alive(agent));
  CHECK(wait_marked_gone(m, 2).empty());
  CHECK(r.out.find("survived") == std::string::npos);
  kill_marked(m);
  if (alive(agent)) ::kill(agent, SIGKILL);
}

namespace {
// The port of the launcher's control listener, from its --verbose line
// ("control server on 127.0.0.1:PORT, store ..."). The local agent does not
// use it (it inherits a socketpair); remote agents would.
int control_port(Child& c) {
  std::string err;
  const std::string tag = "control server on 127.0.0.1:";
  if (!read_fd_until(c.err_fd, err, ", store", 20) || err.find(tag) == std::string::npos) return -1;
  return std::stoi(err.substr(err.find(tag) + tag.size()));
}
}  // namespace

TEST_CASE("an idle connection to the control port is closed once the handshake time is up", "[integration]") {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "--verbose", "-n", "1", "/bin/sh", "-c", "sleep 25", m};
  Child c = start(s);
  ChildGuard guard{c, m};
  const int port = control_port(c);
  REQUIRE(port > 0);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval tv{20, 0};  // the launcher's limit is 5 s
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char byte;
  const ssize_t got = ::recv(fd, &byte, 1, 0);
  ::close(fd);
  CHECK(got == 0);                // closed by the launcher, not timed out (-1) here,
  CHECK(still_running(c.pid));    // and while the job runs on
  ::kill(c.pid, SIGTERM);
  RunResult r = wait(c, 20);
  INFO(r.err);
  CHECK(r.code == 143);
  CHECK(r.err.find("refused a control connection: no handshake within 5 s") != std::string::npos);
}

// 16 ranks started from the agent's spawn threads (--mpi auto: each with a
// PMI socket), side by side: each rank's descriptor table holds its stdio and
// its own PMI socket as fd 3 (PMI_FD=3), nothing else of the agent's: no other
// rank's pipes or sockets, not the agent's control socket (docs/design.md, "A
// rank's descriptor table holds its own descriptors only"); and the ranks
// that sleep past the start are still there to print.
TEST_CASE("16 ranks started from the agent's spawn threads run to the end, each with only its own PMI socket",
          "[integration]") {
  RunSpec s;
  // The shell lists its own descriptors with a glob (no $(ls ...): the
  // command substitution's pipe could still be open in the shell while ls
  // read the list, an extra fd 4 seen once in CI); the socket's inode comes
  // after the list.
  s.argv = {bin("dlaunch"), "-n", "16", "--mpi", "auto", "/bin/sh", "-c",
            "sleep 0.5; fds=; for f in /proc/$$/fd/*; do fds=\"$fds ${f##*/}\"; done; "
            "echo \"id $RANK $PMIX_RANK $PMI_RANK $PMI_FD $(stat -L -c %i /proc/$$/fd/$PMI_FD) fds$fds\""};
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  std::set<int> ranks;
  std::set<std::string> sockets;  // the PMI sockets' inodes
  for (const auto& l : lines(r.out)) {
    std::istringstream in(l.substr(l.find("id ")));
    std::string id, inode, word;
    int rank, pmix_rank, pmi_rank, pmi_fd;
    in >> id >> rank >> pmix_rank >> pmi_rank >> pmi_fd >> inode >> word;
    INFO(l);
    CHECK(pmix_rank == rank);
    CHECK(pmi_rank == rank);
    CHECK(pmi_fd == 3);
    std::set<int> mine;
    for (int fd; in >> fd;) mine.insert(fd);
    // 4 is the shell's own: the directory its glob is reading.
    CHECK(mine == std::set<int>{0, 1, 2, 3, 4});
    ranks.insert(rank);
    sockets.insert(inode);
  }
  CHECK(ranks.size() == 16);
  CHECK(sockets.size() == 16);  // 16 distinct sockets
}

TEST_CASE("an agent killed by SIGKILL takes the 16 ranks its spawn threads started with it", "[integration]") {
  const std::string m = new_marker();
  RunSpec s;
  // Each rank is the sleep itself (exec): a rank's own children outlive a
  // SIGKILLed agent (docs/design.md, "Ranks are started from several threads").
  s.argv = {bin("dlaunch"), "-n", "16", "/bin/sh", "-c", "exec sleep \"$0\"", m};
  Child c = start(s);
  ChildGuard guard{c, m};
  const pid_t agent = agent_of(ranks_running(m, 16, c.pid), c.pid);
  REQUIRE(agent > 0);
  ::kill(agent, SIGKILL);
  RunResult r = wait(c, 10);
  INFO(r.err);
  CHECK(r.code != 0);
  CHECK_THAT(r.err, Catch::Contains("lost the agent on localhost"));
  CHECK(wait_marked_gone(m, 2, c.pid).empty());
  kill_marked(m);
}

// The ranks' SIGCHLD goes to the agent's loop, never to a helper thread
// asleep (the MPI server's, the spawn helpers, the loop watch): every thread
// but the agent's own blocks it (wire/quiet_thread.h). Read from each
// thread's SigBlk in /proc while 16 ranks run.
std::string line_hex(uint64_t v) {
  std::ostringstream out;
  out << std::hex << v;
  return out.str();
}

TEST_CASE("only the agent's own thread takes its ranks' SIGCHLD", "[integration]") {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "16", "--mpi", "auto", "/bin/sh", "-c", "exec sleep \"$0\"", m};
  Child c = start(s);
  ChildGuard guard{c, m};
  const pid_t agent = agent_of(ranks_running(m, 16, c.pid), c.pid);
  REQUIRE(agent > 0);
  const uint64_t chld = uint64_t{1} << (SIGCHLD - 1);
  int threads = 0, taking = 0;
  bool own_takes = false;
  std::string seen;
  // One look at every thread's mask. A thread being started blocks every
  // signal in its creator for a moment (wire::quiet_thread), so a look that
  // falls into that moment is taken again, a few times at most.
  auto look = [&] {
    threads = 0, taking = 0, own_takes = false, seen.clear();
    for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(agent) + "/task")) {
      std::ifstream status(task.path() / "status");
      std::string line;
      uint64_t blocked = ~uint64_t{0};
      while (std::getline(status, line))
        if (line.rfind("SigBlk:", 0) == 0) blocked = std::stoull(line.substr(7), nullptr, 16);
      const bool takes = (blocked & chld) == 0;
      seen += "thread " + task.path().filename().string() + " SigBlk " + line_hex(blocked) + "\n";
      ++threads;
      taking += takes;
      if (task.path().filename() == std::to_string(agent)) own_takes = takes;
    }
  };
  const int at_least = std::thread::hardware_concurrency() > 1 ? 4 : 3;
  look();
  for (int again = 0; again < 20 && !(own_takes && taking == 1 && threads >= at_least); ++again) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    look();
  }
  INFO(seen);
  // The agent's own, the MPI server's and the loop watch's at least, and a
  // spawn helper where there is a second CPU (RankSupervisor's spawn_shares:
  // one CPU, no helper).
  CHECK(threads >= at_least);
  CHECK(own_takes);
  CHECK(taking == 1);
  kill_marked(m);
  wait(c, 10);
}
