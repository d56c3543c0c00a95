#pragma once
// A short command of dlaunch's own (the doctor's jobs, the agent's
// --health-check), run to its end with its output captured: no shell unless
// argv names one, stdin /dev/null, its own process group, killed as a group
// at its time bound, dying with its parent.
#include <chrono>
#include <string>
#include <vector>

namespace dl::machine {

struct ChildResult {
  int status = -1;  // exit status; 128+N for a signal; 124 when it ran past its timeout
  std::string out, err;  // at most kMaxCaptured bytes each; the rest is read and dropped
};

inline constexpr size_t kMaxCaptured = 64 * 1024;

// Runs argv (argv[0] a path) with stdout and stderr captured; SIGKILLs its
// process group after `timeout`. It dies with the caller (PR_SET_PDEATHSIG).
// `what` names it in errors ("the all_reduce job"). Safe to call from any
// thread of a process that has several: nothing is allocated after fork().
ChildResult run_child(const std::vector<std::string>& argv, std::chrono::milliseconds timeout, const std::string& what,
                      const std::vector<std::string>& extra_env = {});

}  // namespace dl::machine
