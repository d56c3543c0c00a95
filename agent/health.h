#pragma once
// The health gate on this host (docs/failures.md, "The health gate"): what
// the agent checks before its hello (cheap, always), and the admin's
// --health-check command, run when the launcher asks, before the host takes
// ranks.
#include <chrono>
#include <string>

#include <vector>

#include "control/messages.h"
#include "machine/run_child.h"

namespace dl::agent {

// The room dlaunch's and the ranks' temporary files need in $TMPDIR (else
// /tmp): less is a host that fails the gate.
inline constexpr unsigned long long kMinTempFreeBytes = 64ull << 20;

// "" when `dir` is a writable directory with at least `min_free` bytes
// free; else what is wrong, for the user ("TMPDIR /scratch: 12 MiB free ...").
std::string check_temp_dir(const std::string& dir, unsigned long long min_free = kMinTempFreeBytes);

// "" when every program of `probes` is found here as the launch will look
// it up (a probe's empty path: `own_path`, the agent's PATH); else the first
// that is not, in the launch's own words ("the ranks' program
// /scratch/./train: No such file or directory").
// "" unless `file` (as resolved, from `wdir`) is a script whose #! line
// names an interpreter that is not there, or `/usr/bin/env PROG` with no
// PROG on `path_var`; then "FILE: its interpreter (#!/usr/bin/env
// python3): python3: command not found in PATH". An exec of such a script
// fails with a bare "No such file or directory" that names the script.
std::string check_interpreter(const std::string& file, const std::string& path_var, const std::string& wdir);

// Each program is looked up, then its interpreter (check_interpreter).
std::string check_programs(const std::vector<control::msg::ProgramProbe>& probes, const std::string& own_path);

// The answer to a finished --health-check: "" passed (exit 0), else the
// check's own words: the last lines it printed (stderr first), or how it
// ended when it printed nothing ("exited with code 3", "did not finish
// within 60 s").
std::string health_verdict(const machine::ChildResult& r, std::chrono::milliseconds timeout);

}  // namespace dl::agent
