// Where is everything stuck (docs/hangs.md), on real processes: 8 ranks of
// which rank 5 waits in another function than the others, in Python (the
// interpreter's fault handler) and in C (eu-stack or gdb); --timeout reports
// and still ends with 124 and nothing left; SIGQUIT reports and the job goes
// on; a host without a stack tool says so; a rank that cannot answer is named.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/integration/run_command.h"

using namespace dl::it;
namespace fs = std::filesystem;

namespace {
const char* kStuckPython = R"(import os, sys, time
def spin_here():
    open(os.path.join(os.environ["READY_DIR"], "ready." + os.environ["RANK"]), "w").close()
    while True:
        time.sleep(0.05)
def elsewhere():
    open(os.path.join(os.environ["READY_DIR"], "ready." + os.environ["RANK"]), "w").close()
    while True:
        time.sleep(0.05)
def main():
    (elsewhere if os.environ["RANK"] == os.environ["STUCK_ELSEWHERE"] else spin_here)()
main()
)";

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// dlaunch -n 8 with rank 5 stuck elsewhere; `program` gets the marker last.
RunSpec stuck_job(const TempDir& tmp, std::vector<std::string> options, std::vector<std::string> program,
                  const std::string& m) {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "8", "-x", "READY_DIR=" + tmp.path, "-x", "STUCK_ELSEWHERE=5"};
  s.argv.insert(s.argv.end(), options.begin(), options.end());
  s.argv.insert(s.argv.end(), program.begin(), program.end());
  s.argv.push_back(m);
  return s;
}

std::vector<std::string> python_program(const TempDir& tmp) {
  write_file(tmp.path + "/stuck.py", kStuckPython);
  return {"/usr/bin/python3", tmp.path + "/stuck.py"};
}

bool all_ready(const TempDir& tmp, int n, double seconds) {
  const double deadline = now_s() + seconds;
  for (;;) {
    int k = 0;
    for (int r = 0; r < n; ++r) k += fs::exists(tmp.path + "/ready." + std::to_string(r)) ? 1 : 0;
    if (k == n) return true;
    if (now_s() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The summary line that starts with `prefix`, or "".
std::string line_starting(const std::string& text, const std::string& prefix) {
  for (const auto& l : lines(text))
    if (l.rfind(prefix, 0) == 0) return l;
  return "";
}

// Entries of `dir` whose name starts with `prefix`.
std::vector<std::string> entries(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().string());
  return out;
}
}  // namespace

TEST_CASE("stacks: --timeout on 8 Python ranks groups 7 and names rank 5, then 124 and nothing left",
          "[integration][stacks]") {
  const std::string m = new_marker();
  TempDir tmp, report, tmpdir;
  RunSpec s = stuck_job(tmp, {"--timeout", "8", "--kill-grace", "1", "--report-dir", report.path},
                        python_program(tmp), m);
  s.set_env["TMPDIR"] = tmpdir.path;  // the agent's own files go there, and must go
  RunResult r = run(s, 60);
  INFO(r.err);
  CHECK(r.code == 124);
  CHECK(r.err.find("ran past --timeout 8") != std::string::npos);
  CHECK(line_starting(r.err, "dlaunch:   rank 5 on ") != "");
  CHECK(line_starting(r.err, "dlaunch:   rank 5 on ").find(": elsewhere (stuck.py:9) <- main (stuck.py:11) <- <module>") != std::string::npos);
  CHECK(line_starting(r.err, "dlaunch:   ranks 0-4, 6-7 (7): spin_here (stuck.py:5) <- main (stuck.py:11) <- <module>") != "");
  // The odd one out comes first.
  CHECK(r.err.find("rank 5 on ") < r.err.find("ranks 0-4, 6-7 (7)"));
  // The full stacks, in the directory named.
  const std::string full = read_file(report.path + "/stacks-1.txt");
  CHECK(full.find("=== rank 5 on ") != std::string::npos);
  CHECK(full.find("in elsewhere") != std::string::npos);
  CHECK(r.err.find(report.path + "/stacks-1.txt") != std::string::npos);
  CHECK(read_file(report.path + "/stacks-1.json").find("\"reason\": \"--timeout 8 s\"") != std::string::npos);
  CHECK(wait_marked_gone(m, 2).empty());
  CHECK(entries(tmpdir.path, "").empty());  // no agent directory left
  kill_marked(m);
}

TEST_CASE("stacks: --timeout on 8 C ranks (eu-stack or gdb) groups 7 and names rank 5", "[integration][stacks]") {
  const std::string m = new_marker();
  TempDir tmp, tmpdir;
  // No --report-dir: a temp dir under TMPDIR, named on stderr and left behind.
  RunSpec s = stuck_job(tmp, {"--timeout", "5", "--kill-grace", "1"}, {bin("dlaunch-stuck-rank")}, m);
  s.set_env["TMPDIR"] = tmpdir.path;
  RunResult r = run(s, 60);
  INFO(r.err);
  CHECK(r.code == 124);
  const std::string odd = line_starting(r.err, "dlaunch:   rank 5 on ");
  CHECK(odd.find("stuck_elsewhere <- main") != std::string::npos);
  CHECK(odd.find("pause") != std::string::npos);
  const std::string rest = line_starting(r.err, "dlaunch:   ranks 0-4, 6-7 (7): ");
  CHECK(rest.find("stuck_here <- main") != std::string::npos);
  CHECK(rest.find("0x") == std::string::npos);  // no addresses in a summary
  auto left = entries(tmpdir.path, "");
  REQUIRE(left.size() == 1);  // the report's directory, and nothing of the agent's
  CHECK(fs::path(left[0]).filename().string().rfind("dlaunch-stacks-", 0) == 0);
  CHECK(r.err.find(left[0] + " is left for you to read (dlaunch removes its reports after 7 days)") != std::string::npos);
  CHECK(read_file(left[0] + "/stacks-1.txt").find("stuck_elsewhere") != std::string::npos);
  CHECK(wait_marked_gone(m, 2).empty());
  kill_marked(m);
}

TEST_CASE("stacks: SIGQUIT prints the report and the job goes on", "[integration][stacks]") {
  const std::string m = new_marker();
  TempDir tmp, report;
  Child c = start(stuck_job(tmp, {"--report-dir", report.path}, python_program(tmp), m));
  ChildGuard guard{c, m};
  REQUIRE(all_ready(tmp, 8, 30));
  std::string err;
  ::kill(c.pid, SIGQUIT);
  REQUIRE(read_fd_until(c.err_fd, err, "stacks-1.json", 30));
  INFO(err);
  CHECK(line_starting(err, "dlaunch:   rank 5 on ").find("elsewhere (stuck.py:9) <- main") != std::string::npos);
  CHECK(line_starting(err, "dlaunch:   ranks 0-4, 6-7 (7): spin_here") != "");
  // Everything still runs, and a second SIGQUIT gives a second report.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(alive(c.pid));
  CHECK(marked(m, c.pid).size() == 8);
  ::kill(c.pid, SIGQUIT);
  REQUIRE(read_fd_until(c.err_fd, err, "stacks-2.json", 30));
  CHECK(fs::exists(report.path + "/stacks-2.txt"));
  CHECK(marked(m, c.pid).size() == 8);
  ::kill(c.pid, SIGTERM);
  RunResult r = wait(c, 20);
  CHECK(r.code == 143);
  CHECK(wait_marked_gone(m, 2).empty());
  kill_marked(m);
}

TEST_CASE("stacks: a host without eu-stack and gdb says so, and the job still ends", "[integration][stacks]") {
  const std::string m = new_marker();
  TempDir tmp, report, empty;
  RunSpec s = stuck_job(tmp, {"--timeout", "3", "--kill-grace", "1", "--report-dir", report.path},
                        {bin("dlaunch-stuck-rank")}, m);
  s.set_env["PATH"] = empty.path;  // the agent inherits it: no tool to be found
  RunResult r = run(s, 60);
  INFO(r.err);
  CHECK(r.code == 124);
  CHECK(line_starting(r.err, "dlaunch:   ranks 0-7 (8) on localhost: neither eu-stack nor gdb is installed") != "");
  CHECK(wait_marked_gone(m, 2).empty());
  kill_marked(m);
}

TEST_CASE("stacks: a stopped rank is named as stopped by a signal, at once, not as a rank that did not answer",
          "[integration][stacks]") {
  const std::string m = new_marker();
  TempDir tmp, report;
  write_file(tmp.path + "/stop.py",
             "import os, signal, sys, time\n"
             "if os.environ['RANK'] == '1':\n    os.kill(os.getpid(), signal.SIGSTOP)\n"
             "while True:\n    time.sleep(0.05)\n");
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--timeout", "4", "--stack-timeout", "1", "--kill-grace", "1",
            "--report-dir", report.path, "/usr/bin/python3", tmp.path + "/stop.py", m};
  RunResult r = run(s, 60);
  INFO(r.err);
  CHECK(r.code == 124);
  CHECK(line_starting(r.err, "dlaunch:   rank 1 on localhost: stopped by a signal (SIGSTOP or SIGTSTP") != "");
  CHECK(line_starting(r.err, "dlaunch:   rank 0 on localhost: <module>") != "");
  CHECK(wait_marked_gone(m, 2).empty());
  kill_marked(m);
}

TEST_CASE("stacks: with gdb alone on the host, gdb reads the C ranks", "[integration][stacks]") {
  const std::string m = new_marker();
  TempDir tmp, report, path;
  std::filesystem::create_symlink("/usr/bin/gdb", path.path + "/gdb");
  // gdb takes about a second per rank, eight at once on a busy machine: a generous bound.
  RunSpec s = stuck_job(tmp, {"--timeout", "3", "--stack-timeout", "40", "--kill-grace", "1", "--report-dir", report.path},
                        {bin("dlaunch-stuck-rank")}, m);
  s.set_env["PATH"] = path.path;
  RunResult r = run(s, 90);
  INFO(r.err);
  CHECK(r.code == 124);
  CHECK(line_starting(r.err, "dlaunch:   rank 5 on localhost: ").find("stuck_elsewhere <- main") != std::string::npos);
  CHECK(line_starting(r.err, "dlaunch:   ranks 0-4, 6-7 (7): ").find("stuck_here <- main") != std::string::npos);
  CHECK(read_file(report.path + "/stacks-1.txt").find("(pid ") != std::string::npos);
  CHECK(read_file(report.path + "/stacks-1.txt").find(", gdb) ===") != std::string::npos);
  CHECK(wait_marked_gone(m, 2).empty());
  kill_marked(m);
}
