#pragma once
// `dlaunch --preflight ...`: the doctor's per-host checks (stages 1-3,
// `dlaunch doctor --quick`) on the job's hosts, with the job's ssh options,
// start method, --fanout, --prefix, -x variables and program, before any
// rank starts. A problem prints the doctor's report (one line per problem)
// on stderr and the job does not start (exit 1), unless the job has spares
// (--spares, --max-hosts): then each host that failed fails the job's health
// gate and a spare takes its seat before the launch. Else one line says what
// passed and the job runs as it would without --preflight. docs/doctor.md,
// "A pre-flight that a job can use".
#include <map>
#include <string>
#include <vector>

#include "hostfiles/hostfile.h"

namespace dl::launcher { struct RunOptions; }

namespace dl::doctor {

// The doctor's options for the job `o`: its hosts, ssh options, start
// method and launch tree, --prefix, the -x variables it compares (not
// VAR=value, not patterns) and, when the program is an absolute path run
// as itself, that program; --quick. Throws UsageError for --launcher slurm
// (the checks reach hosts over ssh).
struct DoctorOptions;
DoctorOptions preflight_options(const launcher::RunOptions& o);

// The hosts of `entries` that failed `r` (host name -> the check and the
// first problem line naming it: "env: node0003: PATH has ..."), for the
// job's health gate.
class Report;
std::map<std::string, std::string> preflight_failures(const Report& r, const std::vector<hostfiles::HostEntry>& entries);

// `dlaunch [run]` with --preflight (launcher::RunOptions::preflight) taken
// care of: the checks, then launcher::run_command(args) when they pass.
int run_with_preflight(const std::vector<std::string>& args);

}  // namespace dl::doctor
