#pragma once
// Starting one rank: fork/exec with its own process group, stdout on a
// pseudo-terminal (or a pipe), stderr on a pipe, and PR_SET_PDEATHSIG so it
// dies with its agent.
#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "control/env_names.h"

namespace dl::agent {

// What looking up a program the way a shell does found.
struct Resolved {
  std::string path;     // the file to exec, when code == 0
  int code = 0;         // 0, 127 (not found) or 126 (not executable)
  std::string message;  // why, when code != 0
};

// Resolves argv0 as execvp would: a name with '/' is taken as a path, else
// each directory of `path_var` is searched. Pure apart from stat/access.
// `dir`, when not empty, is the directory the program will be exec'd from
// (the rank's --wdir): a relative path (./train, or a PATH entry such as
// "." or bin) is looked up there, as the exec after the chdir will, and
// comes back joined to it. (Resolved from the agent's own directory, a
// remote agent's $HOME, `--wdir /scratch ./worker` was "not found".)
Resolved resolve_program(const std::string& argv0, const std::string& path_var, const std::string& dir = "");

// The descriptor a rank gets SpawnSpec::inherit_fd as (control/env_names.h).
// A rank's table holds 0, 1, 2 and this one, nothing else of the agent's.
using env::kRankInheritedFd;

struct SpawnSpec {
  std::string exe;                 // resolved path
  std::vector<std::string> argv;   // argv[0] as the user wrote it
  std::vector<std::string> env;    // "K=V", the complete environment
  std::string wdir;                // "" = inherit
  bool want_stdin = false;         // a pipe for stdin, else /dev/null
  std::vector<int> cpus;           // --bind-to: the CPUs it may run on; empty = inherit
  // stdout on a pseudo-terminal, so C and Python stdio line-buffer it
  // (docs/design.md, "Each rank's stdout is a pseudo-terminal"); else a pipe.
  bool stdout_pty = false;
  // An fd (>= 3, close-on-exec) the rank inherits as kRankInheritedFd: its
  // PMI socket (PMI_FD=3). spawn_rank closes the agent's copy once the clone
  // returned (whether or not it succeeded). -1: none.
  int inherit_fd = -1;
  // The signals whose disposition in the agent is not SIG_DFL
  // (non_default_signals(), taken once per launch): the only ones the child
  // has to reset. Null: every signal is reset (one system call each).
  const sigset_t* reset_signals = nullptr;
};

// The signals whose disposition in this process is a handler or SIG_IGN:
// what a child must set back to SIG_DFL before it execs. Read from
// /proc/self/status (else NSIG-1 system calls): take it once for many spawns.
sigset_t non_default_signals();

struct Spawned {
  pid_t pid = -1;                  // also the process group id
  int out_fd = -1, err_fd = -1;    // read ends, close-on-exec (blocking: an Asio descriptor makes them non-blocking)
  int in_fd = -1;                  // write end when want_stdin, else -1
  bool out_is_pty = false;         // out_fd is a pty master: EIO on it means the rank's side closed
  std::string pty_error;           // stdout_pty was asked for but no pty could be had (then a pipe)
};

// Starts the rank with clone(CLONE_VM | CLONE_VFORK), as posix_spawn does:
// the child borrows the agent's memory until it execs, so no page table is
// copied and no page is copied on write (fork's cost grows with the agent's
// mappings, libpmix's included), and the agent's thread resumes only after
// the exec. The child is a process-group leader, gets SIGKILL when the agent
// dies, has default signal dispositions and an empty signal mask.
// If exec fails (rare: the file changed under us), the child writes why to
// its stderr and exits 127/126. Throws IoError if the clone fails.
// With stdout_pty the rank's fd 1 is the slave of a new pty in raw mode (no
// echo, no "\n" -> "\r\n"), never its controlling terminal; if no pty can be
// opened (none left, no /dev/pts) stdout falls back to a pipe and pty_error
// says why.
Spawned spawn_rank(const SpawnSpec& spec);

// Grows this process's file-descriptor table to hold descriptors below
// `fds` (capped by RLIMIT_NOFILE) by opening one there and closing it; the
// kernel never shrinks the table. Call it before a second thread exists,
// or once for many ranks: in a process of more than one thread, each growth
// of the table (at 64, 128, 256, ... descriptors) waits for an RCU grace
// period (expand_fdtable's synchronize_rcu, milliseconds). With the PMIx
// server's thread running, that made the agent's 64-rank start wait 10-15 ms
// (docs/design.md, "Ranks are started from several threads"). Errors are
// ignored: the table then grows as it did. Asking for no more than an
// earlier call did costs nothing.
void reserve_fd_table(int fds);
// What the agent's table holds from its start: about 200 ranks' worth,
// reserved while it has one thread (before the PMIx server's thread, or
// spawn helpers started early, exist).
constexpr int kAgentFdsReserved = 1024;
// The agent's own descriptors, besides its ranks': its connection, event
// loop, spawn slots, the ends of the ranks being started (closed once each
// is started) and libraries' (PMIx).
constexpr int kAgentOwnFds = 64;
// What the agent holds for each running rank: its stdout (a pty master or a
// pipe), its stderr pipe and its PMI socket (a stdin pipe for one rank too).
constexpr int kFdsPerRunningRank = 3;
// The descriptors a launch of `ranks` ranks needs room for: up to 5 each
// while they start (pty, stderr and stdin pipes, PMI socket), and the agent's own.
constexpr int fds_for_ranks(size_t ranks) { return static_cast<int>(ranks) * 5 + kAgentOwnFds; }

// Reserves, while the agent's table is nearly empty, the low descriptors
// that `threads` spawning threads (the agent's own and spawn_all's helpers)
// put a rank's stdio and PMI socket in just before its clone: the child then
// keeps a private copy of the descriptors below those only (CLOSE_RANGE_UNSHARE),
// not of every other rank's (docs/design.md, "A rank's descriptor table holds
// its own descriptors only"). A thread that finds none left clones as fork
// does (the child copies the whole table; exec closes what it must not
// keep). Nothing where close_range(2) is missing; asking again for no more
// sets than before costs nothing.
void reserve_spawn_slots(int threads);

// A pty pair for a rank's stdout: the master (agent side, close-on-exec) and
// the slave (close-on-exec too; the child dup2s it to fd 1), raw, 80x24.
// Throws IoError naming the step that failed.
struct PtyPair {
  int master = -1, slave = -1;
};
PtyPair open_output_pty();

}  // namespace dl::agent
