// -v names the interpreter a .py program runs under, as resolved on the
// ranks' PATH, and says when it is a pyenv shim (docs/dlaunch.md, "-v");
// a Python rank's failure names its interpreter where that explains it, and
// dlaunch's hook never shows in the rank's own traceback.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

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

TEST_CASE("interpreter: a ModuleNotFoundError of a rank whose program is python itself names that python",
          "[integration]") {
  // The README's `dlaunch -n 4 python spmd.py`: the user chose the
  // interpreter, so the note is the same as for a .py, without $PYTHON.
  TempDir tmp;
  std::filesystem::create_symlink("/usr/bin/python3", tmp.path + "/python");
  const std::string script = tmp.path + "/spmd.py";
  std::ofstream(script) << "import dlaunch_no_such_module\n";
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "1", "-x", "PATH=" + tmp.path + ":/usr/bin:/bin", "python", script};
  s.unset_env = {"PYTHON"};
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("ModuleNotFoundError: No module named 'dlaunch_no_such_module' (at " + script +
                   ":1); the rank ran under python: " + tmp.path +
                   "/python on this machine (the ranks' PATH); install the module for that interpreter, or run the "
                   "one that has it by its full path\n") != std::string::npos);
}

TEST_CASE("interpreter: a python not on the ranks' PATH says where python3 is, at launch and in --dry-run",
          "[integration]") {
  TempDir tmp;
  const std::string script = tmp.path + "/spmd.py";
  std::ofstream(script) << "print('hi')\n";
  REQUIRE(::access("/usr/bin/python", X_OK) != 0);  // Debian without python-is-python3
  const std::string said = "cannot start rank 0 on localhost: python: command not found in PATH; python3 is "
                           "/usr/bin/python3 on this machine: run python3 instead of python\n";
  for (bool dry : {false, true}) {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "1", "-x", "PATH=/usr/bin:/bin", "python", script};
    if (dry) s.argv.insert(s.argv.begin() + 1, "--dry-run");
    RunResult r = run(s, 60);
    INFO(dry << "\n" << r.out << r.err);
    CHECK(r.code == 127);
    CHECK(r.err.find(said) != std::string::npos);
  }
  // python3 itself missing: nothing to point at, and no hint for it.
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "1", "-x", "PATH=" + tmp.path, "python3", script};
  RunResult r = run(s, 60);
  INFO(r.err);
  CHECK(r.code == 127);
  CHECK(r.err.find("python3: command not found in PATH\n") != std::string::npos);
}

TEST_CASE("interpreter: Ctrl-C pending as a Python rank's last error rises: its own traceback, never dlaunch's hook",
          "[integration]") {
  // As a torch rank in gloo's wait: the forwarded SIGINT arrives while the
  // main thread is in C that does not look at signals (here SIGINT is
  // blocked in it and a helper thread takes it), then that C call raises.
  // Python runs the pending KeyboardInterrupt at the first Python frame it
  // enters, which is sys.excepthook's: a hook written as a Python function
  // printed "Error in sys.excepthook" with a traceback through
  // sitecustomize.py (2 of 3 ranks, 3 of 3 runs).
  TempDir tmp;
  const std::string script = tmp.path + "/waits.py";
  // 'ready' comes once the main thread is asleep in that call (50 ms in a
  // row in state S): a SIGINT sent on a busy machine while it was still on
  // its way there was run at a line of the script, as it should be, and
  // tested nothing.
  std::ofstream(script) << "import queue, signal, threading, time\n"
                           "main = threading.main_thread().native_id\n"
                           "def say_ready():\n"
                           "    asleep = 0\n"
                           "    while asleep < 5:\n"
                           "        with open(f'/proc/self/task/{main}/stat') as f:\n"
                           "            state = f.read().rsplit(')', 1)[1].split()[0]\n"
                           "        asleep = asleep + 1 if state == 'S' else 0\n"
                           "        time.sleep(0.01)\n"
                           "    print('ready', flush=True)\n"
                           "    threading.Event().wait()\n"
                           "threading.Thread(target=say_ready, daemon=True).start()  # SIGINT open: it takes it\n"
                           "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
                           "queue.SimpleQueue().get(timeout=3)\n";
  const std::string marker = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", script, marker};
  Child c = start(s);
  ChildGuard guard{c, marker};
  std::string out;
  REQUIRE(read_fd_until(c.out_fd, out, "ready\nready\n", 30));
  ::kill(c.pid, SIGINT);
  RunResult r = wait(c, 30);
  INFO(r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code != 0);
  CHECK(r.err.find("Error in sys.excepthook") == std::string::npos);
  CHECK(r.err.find("sitecustomize") == std::string::npos);
  CHECK(r.err.find("KeyboardInterrupt") == std::string::npos);
  // The rank's own error, whole (the first to fail may end the job before
  // the other rank's error is written).
  size_t tracebacks = 0;
  for (size_t at = r.err.find("\n_queue.Empty\n"); at != std::string::npos; at = r.err.find("\n_queue.Empty\n", at + 1))
    ++tracebacks;
  CHECK(tracebacks >= 1);
}
