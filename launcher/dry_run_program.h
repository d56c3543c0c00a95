#pragma once
// --dry-run's check of the program: each program is resolved on this machine
// as its agent would resolve it at launch (agent/rank_process.h,
// resolve_program: the ranks' PATH, their working directory), so a dry run
// fails where the launch would fail, with the same message and exit code.
// Only ranks placed on this machine are checked: a remote host is not
// contacted.
#include <string>
#include <vector>

#include "control/messages.h"
#include "hostfiles/placement.h"
#include "launcher/options/options.h"

namespace dl::launcher {

struct ProgramCheck {
  int code = 0;          // 0, else the launch's exit code (127 not found, 126 not executable)
  std::string message;   // code != 0: "cannot start rank 0 on localhost: ./x: No such file or directory"
  std::string resolved;  // code == 0: one line per program, "ranks 0-1 run /usr/bin/python3 train.py\n"
};

// Resolves the program of each rank placed on a host that is this machine.
// `resolved` is empty when no rank runs here.
ProgramCheck check_programs(const hostfiles::Placement& p, const RunOptions& o);

// What the health gate asks a host to find before it takes `ranks` (every
// app context's program when `ranks` is empty: a spare may take any seat):
// each distinct program with the PATH the job sets for it (-x PATH, "" for
// the agent's own) and the directory it will run from.
std::vector<control::msg::ProgramProbe> program_probes(const RunOptions& o, const std::vector<int>& ranks);

// -v for a .py program (or --module) that runs under `python`: the
// interpreter as resolved here on the ranks' PATH, "dlaunch: train.py runs
// under python3: /usr/bin/python3 on this machine (the ranks' PATH; $PYTHON
// names another)", with a note when it is a pyenv shim (which picks a
// version by the rank's directory, a common reason for ModuleNotFoundError).
// `typed` is the command as the user gave it. Ends in '\n'.
std::string interpreter_note(const RunOptions& o, const std::string& python, const std::vector<std::string>& typed);

// A Python rank's failure (`error`, its exception as the agent reported it)
// that an interpreter explains: for a ModuleNotFoundError of a rank that
// dlaunch runs under o.interpreter, which interpreter that is here and what
// to do ("; the rank ran python3: /usr/bin/python3 on this machine ...").
// The same for a rank whose program the user named as a Python interpreter
// (`dlaunch -n 4 python spmd.py`): "; the rank ran under python: ... (the
// ranks' PATH); install the module for that interpreter, or run the one that
// has it by its full path". "" for any other error.
std::string interpreter_hint(const RunOptions& o, const std::string& error);

// A rank that could not start because its Python interpreter is not on the
// ranks' PATH (`message` "python: command not found in PATH", Debian without
// python-is-python3) while python3 is: "; python3 is /usr/bin/python3 on
// this machine: run python3 instead of python". "" for any other message,
// or when python3 is not found either.
std::string missing_python_hint(const RunOptions& o, const std::string& message);

}  // namespace dl::launcher
