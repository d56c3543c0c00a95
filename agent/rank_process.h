#pragma once
// Starting one rank: fork/exec with its own process group, stdout/stderr on
// pipes, and PR_SET_PDEATHSIG so it dies with its agent.
#include <sys/types.h>

#include <string>
#include <vector>

namespace dl::agent {

// What looking up a program the way a shell does found.
struct Resolved {
  std::string path;     // the file to exec, when code == 0
  int code = 0;         // 0, 127 (not found) or 126 (not executable)
  std::string message;  // why, when code != 0
};

// Resolves argv0 as execvp would: a name with '/' is taken as a path, else
// each directory of `path_var` is searched. Pure apart from stat/access.
Resolved resolve_program(const std::string& argv0, const std::string& path_var);

struct SpawnSpec {
  std::string exe;                 // resolved path
  std::vector<std::string> argv;   // argv[0] as the user wrote it
  std::vector<std::string> env;    // "K=V", the complete environment
  std::string wdir;                // "" = inherit
  bool want_stdin = false;         // a pipe for stdin, else /dev/null
  std::vector<int> cpus;           // --bind-to: the CPUs it may run on; empty = inherit
};

struct Spawned {
  pid_t pid = -1;                  // also the process group id
  int out_fd = -1, err_fd = -1;    // read ends, non-blocking, close-on-exec
  int in_fd = -1;                  // write end when want_stdin, else -1
};

// Forks and execs. The child is a process-group leader, gets SIGKILL when
// the agent dies, has default signal dispositions and an empty signal mask.
// If exec fails after fork (rare: the file changed under us), the child
// writes why to its stderr and exits 127/126. Throws IoError if fork fails.
Spawned spawn_rank(const SpawnSpec& spec);

}  // namespace dl::agent
