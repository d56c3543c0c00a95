#pragma once
// --launcher slurm: the agents of every host but this one start as one srun
// step (docs/slurm.md), as mpirun and Hydra start their daemons, so they run
// in the job's cgroups and accounting, die with scancel, and are allowed onto
// nodes that pam_slurm_adopt guards. This host's agent (when it is one of the
// job's nodes: sbatch's script runs on the first) is forked as with libssh: it
// is inside the job already.
//
// The step is
//   srun --nodes=K --ntasks=K --ntasks-per-node=1 --nodelist=H1,..,HK --overlap
//        --kill-on-bad-exit=1 --cpu-bind=none --mpi=none --input=all
//        dlaunch-agent --connect ADDR:PORT --node-names N0,..,NM [options]
// srun broadcasts its stdin to every task (--input=all): the token is its
// first line, never on a command line, and its EOF (dlaunch gone) ends every
// agent. Each agent finds its node by its own name in --node-names, which
// names every node of the job at its index (SLURMD_NODENAME), since srun
// numbers tasks in Slurm's node order, not ours.
#include <boost/asio/io_context.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "remote/agent_starter.h"

namespace dl::remote {

// The srun command line that starts `agent_argv` (the agent's path and
// arguments, --node-names included) once on each of `hosts`. `exec` is
// --launcher-exec's words ({} = "srun"). `hosts_may_go` (StarterOptions):
// the step goes on when one agent ends or its node fails.
std::vector<std::string> srun_argv(const std::vector<std::string>& exec, const std::vector<std::string>& hosts,
                                   const std::vector<std::string>& agent_argv, bool hosts_may_go = false);

// srun's complaints about nodes ("srun: error: n3: task 2: Exited with exit
// code 127", "srun: error: n[2-4]: tasks 1-3: ...", "srun: error: Task launch
// for StepId=.. failed on node n3: ..."): host -> the lines that name it
// (ranges unfolded), "; "-joined, for the hosts among `hosts` only.
std::map<std::string, std::string> srun_errors_by_host(const std::vector<std::string>& lines,
                                                       const std::vector<std::string>& hosts);

// When `line` (srun's stderr) says srun is waiting before it can create the
// step ("srun: Job 7 step creation temporarily disabled, retrying (Requested
// nodes are busy)", "... still disabled, retrying (...)", "Resources
// allocated for job 7 and being configured, please wait"): why, in srun's
// words ("Requested nodes are busy", "being configured"); else "".
std::string srun_wait_reason(const std::string& line);

// The agent timeout's explanation while srun has not started the agents'
// step: quotes `srun_line` (srun's own, "" if it said nothing: Slurm 22.05
// waits silently) and says what to check and do. `job_id` is
// SLURM_JOB_ID ("" = unknown).
std::string srun_waiting_message(const std::string& srun_line, const std::string& job_id);

// The starter; remote hosts by srun, the local one by fork/exec.
std::unique_ptr<AgentStarter> make_slurm_starter(boost::asio::io_context& io, StarterOptions o,
                                                 AgentStarter::Events ev);

}  // namespace dl::remote
