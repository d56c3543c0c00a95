#pragma once
// Helpers for the tests that run an installed dlaunch (a `cmake --install`
// prefix, or the .deb unpacked into a scratch root): which processes still
// run from it.
#include <sys/types.h>

#include <string>
#include <vector>

namespace dl::it {

// Pids of live processes started from a file under prefix: by their argv (a
// rank's or agent's argv[0] is its path) or by /proc/PID/exe.
std::vector<pid_t> from_prefix(const std::string& prefix);
// Polls until nothing from prefix runs, up to timeout_s; returns what is left.
std::vector<pid_t> wait_gone(const std::string& prefix, double timeout_s);
// "pid: cmdline" lines, for a failure message.
std::string describe(const std::vector<pid_t>& pids);
// How many ranks of `size` printed both dlaunch-hello lines ("rank R of N on
// H (identity from dlaunch)" and "rank R passed the barrier with all N
// ranks"), each exactly once, tagged "[R@" (--tag-output).
int hello_ranks_ok(const std::string& out, int size);

}  // namespace dl::it
