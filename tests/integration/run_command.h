#pragma once
// Helpers for tests that run the real dlaunch: start a command with pipes,
// wait for it with a deadline, and find processes by a marker in their argv.
#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace dl::it {

struct RunSpec {
  std::vector<std::string> argv;              // argv[0] is a path
  std::map<std::string, std::string> set_env;  // added to (or replacing) the test's env
  std::vector<std::string> unset_env;          // removed from it
  std::string stdin_data;                      // written then closed; stdin_closed: /dev/null
  bool stdin_devnull = true;
  bool stdin_hold = false;                     // keep stdin open (after stdin_data) until wait() ends
  std::string cwd;                             // "" = the test's
  // Run as this user (uid, gid; no supplementary groups) instead of the
  // test's: an "other user on the same machine" (tests/security/other_user.h).
  // -1: the test's own. Needs root.
  long uid = -1, gid = -1;
};

struct RunResult {
  int code = -1;          // exit code, or 128+signal when killed
  int signal = 0;         // signal that killed the command, or 0
  bool timed_out = false; // it was still running at the deadline (then SIGKILLed)
  double seconds = 0;     // from start to exit
  std::string out, err;
};

// A started command. Its pipes are drained by wait().
struct Child {
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  int in_fd = -1;  // held stdin (stdin_hold), closed by wait()
  double started = 0;
};

// Starts spec in its own process group. Throws std::runtime_error on failure.
Child start(const RunSpec& spec);

// Kills a started child's process group and everything carrying `marker` when
// the test leaves the scope, also when a REQUIRE aborts it early: a failing
// test must not leave its dlaunch and ranks running.
struct ChildGuard {
  Child& child;
  std::string marker;
  ~ChildGuard();
};
// Collects output until the command exits and its pipes close, or until
// timeout_s (then SIGKILLs its process group and reports timed_out).
RunResult wait(Child& c, double timeout_s);
// start + wait.
RunResult run(const RunSpec& spec, double timeout_s = 30);

// Reads `fd` (a started child's out_fd or err_fd) into `out` until it holds
// `needle` or `seconds` pass; true when it arrived. The child keeps running.
bool read_fd_until(int fd, std::string& out, const std::string& needle, double seconds);

// build/bin/<name>.
std::string bin(const std::string& name);
// A fresh marker for one test: "1000.<16 digits>", unique across processes,
// usable as a `sleep` duration so sleepers carry it in their argv.
std::string new_marker();
// Live (not zombie) processes whose argv contains marker, except this
// process and `exclude`.
std::vector<pid_t> marked(const std::string& marker, pid_t exclude = -1);
// Parent pid of pid, or -1 when it is gone.
pid_t parent_of(pid_t pid);
// True while pid exists and is not a zombie.
bool alive(pid_t pid);
// Polls until no marked process (other than exclude) remains, up to
// timeout_s; returns those still alive then.
std::vector<pid_t> wait_marked_gone(const std::string& marker, double timeout_s, pid_t exclude = -1);
// Polls until at least n marked processes run, up to timeout_s.
std::vector<pid_t> wait_marked(const std::string& marker, size_t n, double timeout_s, pid_t exclude = -1);
// Kills (SIGKILL) whatever still carries the marker: a failed test's cleanup.
void kill_marked(const std::string& marker);

// A temporary directory, removed with its contents when this goes away.
struct TempDir {
  TempDir();
  ~TempDir();
  std::string path;
};
std::string read_file(const std::string& path);
// Runs `argv` with LD_DEBUG=libs and returns its exit code and ld.so's log of
// what it loaded (every process's, concatenated).
std::pair<int, std::string> run_ld_debug_libs(const std::vector<std::string>& argv);
// A shell fragment (for a rank's `sh -c`) that prints "NAME EXE" and then the
// /proc/PID/maps of the process whose pid is in shell variable `pid_var`,
// read again (up to 10 times, 0.1 s apart) while a read holds no libc. A CI
// run once printed the exe and then none of the maps, which 400 tries here
// did not show again; its "maps: read N times, B bytes" line tells, next
// time, whether the read came back empty (the kernel's, N > 1) or the
// output went missing (ours: no such line).
std::string print_maps_sh(const std::string& name, const std::string& pid_var);
void write_file(const std::string& path, const std::string& text, int mode = 0644);
// Lines of text (without '\n').
std::vector<std::string> lines(const std::string& text);
// The output of `env` as a map.
std::map<std::string, std::string> parse_env(const std::string& text);

}  // namespace dl::it
