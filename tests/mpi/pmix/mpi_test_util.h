#pragma once
// Helpers the MPI launch tests share: run a command, count in its output,
// and find processes a run left behind by a marker in their argv.
#include <string>

namespace dl::mpitest {

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr, merged
};

// Runs a shell command (stderr merged) under a 120 s timeout, with the
// variables OpenMPI needs to run as root.
Result run(const std::string& cmd);
int count(const std::string& text, const std::string& needle);
// A marker no other test uses, passed as an extra argument.
std::string marker();
// True if a process whose argv holds `mark` is still there after 3 s.
bool leftover(const std::string& mark);
// `dlaunch` (its path) over `hosts` simulated hosts of `slots` each
// (--launcher sim, DLAUNCH_SIM=1) with a launch tree of `fanout` and -v, as
// a command line to which the MPI mode and the program are appended.
std::string sim_tree_command(const std::string& dlaunch, int hosts, int slots, int fanout);

// A restarted MPI job (tests/mpi/pmix/mpi_restart.c): runs `dlaunch_args`
// (dlaunch and its options, -n and --max-restarts among them) with
// `program n lost how MARKER`, under a TMPDIR of its own, and checks with
// Catch that attempt 1 of 2 failed naming rank `lost`, attempt 2 succeeded,
// every rank of both attempts saw a world of n (never a singleton) and
// the right allreduce, and nothing was left (processes, TMPDIR entries).
// Returns the output.
std::string check_restart(const std::string& dlaunch_args, const std::string& program, int n, int lost,
                          const std::string& how);

}  // namespace dl::mpitest
