// Issue 14: a line a rank writes with print() or printf (no flush) reaches
// dlaunch's output while the rank runs, because each rank's stdout is a
// pseudo-terminal (stdio line-buffers a tty). The ranks here run with
// PYTHONUNBUFFERED unset; --no-output-pty shows the old behaviour, so these
// tests fail when the pty is not there.
#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
double now_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Prints a line, then sleeps: with a block-buffered stdout the line sits in
// the process until it exits (and is lost when a signal ends it).
const char* kPrintThenSleep = "import sys, time; print('stuck here'); time.sleep(30)";

// The same in C: printf without fflush, then a sleep that a signal ends.
const char* kPrintfThenSleep = R"(#include <stdio.h>
#include <unistd.h>
int main(void) {
  printf("printf line\n");
  for (int i = 0; i < 300; ++i) usleep(100000);
  return 0;
}
)";

// Every test's dlaunch: the ranks inherit its environment, so unsetting
// PYTHONUNBUFFERED here (ctest or a user's shell may set it) keeps Python's
// own choice of buffering.
RunSpec dlaunch(std::vector<std::string> args) {
  RunSpec s;
  s.argv = {bin("dlaunch")};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  s.unset_env = {"PYTHONUNBUFFERED", "PYTHONIOENCODING"};
  return s;
}

// Compiles kPrintfThenSleep into dir; the path of the program.
std::string build_printf_program(const std::string& dir) {
  write_file(dir + "/printf_sleep.c", kPrintfThenSleep);
  const std::string exe = dir + "/printf_sleep";
  RunSpec s;
  s.argv = {"/bin/sh", "-c", "cc -O1 -o '" + exe + "' '" + dir + "/printf_sleep.c'"};
  RunResult cc = run(s, 120);
  INFO(cc.err);
  REQUIRE(cc.code == 0);
  return exe;
}

// Reads the child's stdout into `out` until it holds `needle` or `seconds`
// pass; true when it arrived. The child keeps running.
bool read_until(Child& c, std::string& out, const std::string& needle, double seconds) {
  return read_fd_until(c.out_fd, out, needle, seconds);
}

// `--timeout 2` with a rank that printed and then sleeps: the job is killed
// and the output is what reached dlaunch before.
RunResult run_killed_by_timeout(const std::vector<std::string>& extra, const std::vector<std::string>& program,
                                const std::string& m) {
  // No stack report: these tests are about output, and it would leave its directory.
  std::vector<std::string> args = {"-n", "1", "--timeout", "2", "--kill-grace", "1", "--stack-timeout", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), program.begin(), program.end());
  args.push_back(m);
  RunResult r = run(dlaunch(args), 60);
  INFO(r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 124);
  CHECK(wait_marked_gone(m, 5).empty());
  return r;
}
}  // namespace

TEST_CASE("a python print() reaches dlaunch while the rank runs, one line at a time", "[integration][buffering]") {
  const std::string m = new_marker();
  Child c = start(dlaunch({"-n", "1", "/usr/bin/python3", "-c",
                           "import time; print('first'); time.sleep(2); print('second'); time.sleep(30)", m}));
  ChildGuard guard{c, m};
  std::string out;
  REQUIRE(read_until(c, out, "first\n", 20));
  const double first = now_s();
  CHECK(out.find("second") == std::string::npos);
  CHECK_FALSE(wait_marked(m, 1, 1).empty());  // the rank still runs: no exit flushed it
  REQUIRE(read_until(c, out, "second\n", 20));
  // Two prints 2 s apart arrive apart, not together at the rank's exit.
  CHECK(now_s() - first > 1.0);
  CHECK(out == "first\nsecond\n");
  ::kill(-c.pid, SIGTERM);
  RunResult r = wait(c, 60);
  CHECK_FALSE(r.timed_out);
}

TEST_CASE("a python print() survives --timeout (the rank is killed while it sleeps)", "[integration][buffering]") {
  const std::string m = new_marker();
  RunResult r = run_killed_by_timeout({}, {"/usr/bin/python3", "-c", kPrintThenSleep}, m);
  CHECK(r.out == "stuck here\n");
}

TEST_CASE("a C printf() without fflush survives --timeout", "[integration][buffering]") {
  TempDir tmp;
  const std::string exe = build_printf_program(tmp.path);
  const std::string m = new_marker();
  RunResult r = run_killed_by_timeout({}, {exe}, m);
  CHECK(r.out == "printf line\n");
}

TEST_CASE("with --no-output-pty the rank's stdio holds the line and --timeout loses it (the old behaviour)",
          "[integration][buffering]") {
  // The control: proves the other tests would fail without the pty.
  const std::string m = new_marker();
  RunResult r = run_killed_by_timeout({"--no-output-pty"}, {"/usr/bin/python3", "-c", kPrintThenSleep}, m);
  CHECK(r.out.find("stuck here") == std::string::npos);
  TempDir tmp;
  const std::string exe = build_printf_program(tmp.path);
  const std::string m2 = new_marker();
  RunResult rc = run_killed_by_timeout({"--no-output-pty"}, {exe}, m2);
  CHECK(rc.out.find("printf line") == std::string::npos);
}

TEST_CASE("a rank's print() survives the teardown after another rank fails", "[integration][buffering]") {
  const std::string m = new_marker();
  const char* prog =
      "import os, sys, time\n"
      "if os.environ['RANK'] == '0':\n"
      "    print('rank 0 was here'); time.sleep(30)\n"
      "else:\n"
      "    time.sleep(1); sys.exit(1)\n";
  RunResult r = run(dlaunch({"-n", "2", "--kill-grace", "1", "/usr/bin/python3", "-c", prog, m}), 60);
  INFO(r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 1);
  CHECK(r.out == "rank 0 was here\n");
  CHECK(wait_marked_gone(m, 5).empty());
}

TEST_CASE("a C printf() survives Ctrl-C (SIGINT to dlaunch's process group)", "[integration][buffering]") {
  TempDir tmp;
  const std::string exe = build_printf_program(tmp.path);
  for (bool pty : {true, false}) {
    INFO((pty ? "with the pty" : "--no-output-pty"));
    const std::string m = new_marker();
    std::vector<std::string> args = {"-n", "2"};
    if (!pty) args.push_back("--no-output-pty");
    args.push_back(exe);
    args.push_back(m);
    Child c = start(dlaunch(args));
    ChildGuard guard{c, m};
    // Both ranks run, then time for their lines to travel: stdout is not read
    // until the signal went out, so only what dlaunch received counts.
    REQUIRE(wait_marked(m, 2, 20, c.pid).size() == 2);
    ::usleep(1500 * 1000);
    ::kill(-c.pid, SIGINT);  // a terminal's Ctrl-C goes to the foreground group
    RunResult r = wait(c, 60);
    INFO(r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.code == 130);
    // printf's default SIGINT disposition ends it with its buffer unwritten.
    CHECK(r.out == (pty ? "printf line\nprintf line\n" : ""));
    CHECK(wait_marked_gone(m, 5).empty());
  }
}

TEST_CASE("a rank's stdout is a terminal (80x24 and raw) but not its controlling one, or a pipe with --no-output-pty",
          "[integration][buffering]") {
  const char* prog =
      "import os, sys\n"
      "size = os.get_terminal_size(1) if os.isatty(1) else None\n"
      "try:\n"
      "    os.tcgetpgrp(1); ctty = 'ctty'\n"
      "except OSError:\n"
      "    ctty = 'no-ctty'\n"
      "tty = [os.isatty(0), os.isatty(1), os.isatty(2)]\n"
      "sys.stdout.write('%s %s %s %s %s\\n' % (*tty, size and '%dx%d' % size, ctty))\n"
      "sys.stdout.flush()\n"
      "os.write(1, b'raw\\tbytes\\r\\n\\x1b[1mbold\\x1b[0m\\n')\n";
  RunResult r = run(dlaunch({"-n", "1", "/usr/bin/python3", "-c", prog}));
  INFO(r.err);
  REQUIRE(r.code == 0);
  // No "\n" -> "\r\n" translation, no echo: the bytes arrive as written.
  CHECK(r.out == "False True False 80x24 no-ctty\nraw\tbytes\r\n\x1b[1mbold\x1b[0m\n");
  RunResult p = run(dlaunch({"-n", "1", "--no-output-pty", "/usr/bin/python3", "-c", prog}));
  INFO(p.err);
  REQUIRE(p.code == 0);
  CHECK(p.out == "False False False None no-ctty\nraw\tbytes\r\n\x1b[1mbold\x1b[0m\n");
}

TEST_CASE("with --output-filename a print() reaches the rank's file before --timeout kills it",
          "[integration][buffering]") {
  TempDir tmp;
  const std::string m = new_marker();
  RunResult r = run_killed_by_timeout({"--output-filename", tmp.path + "/out"},
                                      {"/usr/bin/python3", "-c", kPrintThenSleep}, m);
  CHECK(r.out.empty());
  CHECK(read_file(tmp.path + "/out/rank.0/stdout") == "stuck here\n");
}

TEST_CASE("4 ranks x 20000 print()ed lines arrive whole and in order through the pty", "[integration][buffering]") {
  // print() line-buffers on a tty: one small write per line, and every 1000th
  // line is 20000 bytes, longer than the pty's buffer, so it arrives in
  // pieces. The ranks exit right after their last line: the agent must read
  // the pty to its end before it reports the exit.
  const char* prog =
      "import os\n"
      "r = int(os.environ['RANK'])\n"
      "for i in range(20000):\n"
      "    print('%d:%d:%s' % (r, i, chr(97 + r) * (20000 if i % 1000 == 999 else i % 50)))\n";
  RunResult res = run(dlaunch({"-n", "4", "--tag-output", "/usr/bin/python3", "-c", prog}), 180);
  INFO(res.err.substr(0, 2000));
  REQUIRE_FALSE(res.timed_out);
  REQUIRE(res.code == 0);
  std::map<int, int> next;
  long bad = 0;
  std::string first_bad;
  for (const auto& l : lines(res.out)) {
    // "[r@localhost] r:i:aaa"
    const auto close = l.find("@localhost] ");
    int r = -1;
    if (l.size() > 1 && l[0] == '[' && close != std::string::npos) r = std::stoi(l.substr(1, close - 1));
    const int i = next[r];
    const size_t len = i % 1000 == 999 ? 20000u : static_cast<size_t>(i % 50);
    const std::string want = "[" + std::to_string(r) + "@localhost] " + std::to_string(r) + ":" + std::to_string(i) +
                             ":" + std::string(len, static_cast<char>('a' + r));
    if (r < 0 || r > 3 || l != want) {
      if (bad++ == 0) first_bad = l.substr(0, 120);
      continue;
    }
    ++next[r];
  }
  INFO("first bad line: " << first_bad);
  CHECK(bad == 0);
  for (int r = 0; r < 4; ++r) CHECK(next[r] == 20000);
  CHECK(res.out.find('\r') == std::string::npos);
}

// Issue 30: the ranks' pty fakes a terminal for output that reaches none. The
// pty stays (the tests above: a pipe loses printf's line on --timeout), but
// the ranks get TERM=dumb, so programs that colour or decorate for a
// terminal (ls, grep, git, rich) write plain text into files and pipes.
TEST_CASE("with dlaunch's stdout a pipe the ranks get TERM=dumb, and ls --color=auto writes no escape codes",
          "[integration][buffering]") {
  RunSpec s = dlaunch({"-n", "1", "/bin/ls", "--color=auto", "-d", "/"});
  s.set_env["TERM"] = "xterm-256color";
  RunResult r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "/\n");
  CHECK(r.err.find("instead of the inherited") == std::string::npos);  // TERM is no inherited identity
  // The user's own TERM (-x) wins.
  RunSpec x = dlaunch({"-n", "1", "-x", "TERM=xterm", "/bin/sh", "-c", "echo $TERM"});
  RunResult rx = run(x, 30);
  INFO(rx.err);
  CHECK(rx.out == "xterm\n");
}

TEST_CASE("with dlaunch's stdout a terminal the ranks keep its TERM and ls colours", "[integration][buffering]") {
  // script(1) gives dlaunch a pty for stdout; what it writes comes back through ours.
  if (::access("/usr/bin/script", X_OK) != 0) {
    WARN("no /usr/bin/script: skipped");
    return;
  }
  const std::string cmd = "'" + bin("dlaunch") + "' -n 1 /bin/sh -c 'echo term=$TERM; ls --color=auto -d /'";
  RunSpec s;
  s.argv = {"/usr/bin/script", "-qec", cmd, "/dev/null"};
  s.set_env["TERM"] = "xterm";
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("term=xterm") != std::string::npos);
  CHECK(r.out.find("\x1b[") != std::string::npos);
}
