#pragma once
// The hosts a batch scheduler gave the job dlaunch runs in (docs/hostfiles.md,
// "Inside an allocation"): Slurm, PBS/Torque and LSF, read from the
// environment and the files it names. Pure: the environment and the file
// reader are parameters, so every format is unit-tested without a scheduler.
//
//   Slurm  SLURM_JOB_NODELIST (bracket ranges) with the slots from
//          SLURM_TASKS_PER_NODE when the job asked for tasks (SLURM_NTASKS
//          set), else SLURM_JOB_CPUS_PER_NODE; both in the "2(x3),1" notation
//   PBS    PBS_NODEFILE: one line per slot, a host repeated once per CPU
//   LSF    LSB_DJOB_HOSTFILE (as PBS's), else LSB_MCPU_HOSTS "hostA 2 hostB 4"
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostfiles/hostfile.h"

namespace dl::hostfiles {

// A variable of the environment; "" when it is unset (or empty: the same to us).
using EnvLookup = std::function<std::string(const std::string& name)>;
// The text of a file; throws dl::IoError naming the path when it cannot be read.
using FileReader = std::function<std::string(const std::string& path)>;

struct Allocation {
  std::string scheduler;          // "Slurm", "PBS", "LSF"
  std::string job_id;             // SLURM_JOB_ID, PBS_JOBID, LSB_JOBID; "" when unset
  std::string source;             // where the hosts came from, for -v and --dry-run:
                                  // "SLURM_JOB_NODELIST=n[1-4], SLURM_JOB_CPUS_PER_NODE=2(x4)"
  std::vector<HostEntry> hosts;   // in the scheduler's order, slots given, origin = the variable or file
};

// The allocation dlaunch runs inside, or nullopt outside any (none of
// SLURM_JOB_NODELIST/SLURM_NODELIST, PBS_NODEFILE, LSB_DJOB_HOSTFILE,
// LSB_MCPU_HOSTS set). Slurm is looked at first, then PBS, then LSF.
// Throws dl::ParseError naming the variable or file:line and what was expected
// when the scheduler's text is malformed (a bad range, counts that do not
// match the nodes, an empty node file), dl::IoError when a file it names
// cannot be read.
std::optional<Allocation> detect_allocation(const EnvLookup& env, const FileReader& read);

// The same on this process's environment and the real filesystem.
std::optional<Allocation> detect_allocation();

// Slurm's count notation, "2(x3),1" -> {2, 2, 2, 1}. `what` names the
// variable in errors. Throws dl::ParseError on anything else.
std::vector<int> expand_slurm_counts(std::string_view text, std::string_view what);

// Checks that every host of a hostfile or -H list (`given`, from `origin`,
// e.g. "hostfile 'hosts'" or "-H") is a host of `alloc`; a short name matches
// a qualified one ("n1" and "n1.cluster"). Throws dl::UsageError naming the
// first host outside it and listing the allocation's hosts.
void check_within_allocation(const std::vector<HostEntry>& given, const std::string& origin, const Allocation& alloc);

}  // namespace dl::hostfiles
