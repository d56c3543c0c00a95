#pragma once
// The launch plan: from the placement, the options and what each agent said
// in its hello, one typed launch message per host: every rank's argv and
// environment (identity, GPU binding, -x exports), its CPUs (--bind-to), and
// the MPI section when the agents serve PMIx. Pure: no I/O, no processes, no
// clock, so each decision is unit-tested (tests/launcher/launch_plan_test.cc).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "control/messages.h"
#include "hostfiles/placement.h"
#include "launcher/options/options.h"
#include "launcher/rank_env.h"

namespace dl::launcher {

// One node of the job as the planner sees it.
struct PlanNode {
  std::string host;                 // as the hostfile names it
  bool local = false;               // this machine (its agent was forked)
  bool external = false;            // per-node mode: another node's dlaunch runs it
  std::vector<int> ranks;           // global ranks, in order
  std::optional<control::msg::Hello> hello;  // required unless external
  std::string reach_addr;           // its address as the other hosts reach it
};

// Per-node mode (--rdzv): the job's identity was agreed at the node group's store.
struct SharedIdentity {
  std::string master_addr, store_addr;
  int master_port = 0;
  bool agent_store = false;  // MASTER_PORT is a c10d store node 0's dlaunch serves
};

struct PlanInput {
  const hostfiles::Placement* placement = nullptr;
  const RunOptions* opts = nullptr;
  std::vector<PlanNode> nodes;        // by node index
  std::string job_id, token;
  std::string control_host;           // this launcher's address as remote agents reach it
  int store_port = 0;                 // the job's store (not in per-node mode)
  std::optional<SharedIdentity> shared;
  std::string wdir;                   // --wdir, else the launcher's cwd
  EnvMap exports;                     // -x, resolved (resolve_exports)
  EnvMap launcher_env;                // dlaunch's own environment: SLURM_JOB_ID, a user's OMP_NUM_THREADS
  bool output_terminal = true;        // dlaunch's stdout is a terminal and no --output-filename takes the output
  int restart_count = 0;              // --max-restarts: the attempt being launched (0 = the first)
  int master_port = 0;                // a restart's fresh MASTER_PORT (node 0's `ready`); 0 = node 0's hello
  int torch_store_port = 0;           // torch's c10d store, served here (launcher/torch_store.h); 0 = rank 0 hosts it
};

struct LaunchPlan {
  enum class Refusal { kNone, kNoPmix, kBadRequest };
  Refusal refusal = Refusal::kNone;
  std::string why;            // the refusal, worded for the user
  std::string hosts;          // kNoPmix: the hosts without a PMIx server
  bool mpi = false;           // the agents serve PMIx and/or PMI to their ranks
  control::MpiServe serve = control::MpiServe::kPmix;  // with mpi: what the agents serve
  std::string warnings;       // lines for dlaunch's stderr before the launch, always ("" = none)
  std::string notice;         // lines for dlaunch's stderr before the launch, on a terminal or with -v ("" = none)
  // What every host's launch shares, sent once to every agent before the
  // launches (which leave it out): -x exports, the job's sizes, rendezvous,
  // id and token.
  control::msg::LaunchEnv shared;
  std::vector<std::optional<control::msg::Launch>> launches;  // by node; none for external nodes
  // With mpi: the job's map, sent once to every agent before the launches
  // (their MPI sections leave it out: at 1,024 hosts x 8 each copy was 8,192
  // ranks, 1,024 times over).
  std::optional<control::msg::MpiMap> mpi_map;
};

// The control connections' heartbeat interval, from --heartbeat-timeout:
// a quarter of it (four beats may go missing before a peer counts as lost),
// at least 100 ms, at most 10 s. Every beat costs the launcher a wake-up per
// agent, so a 1 s beat grew with the hosts (0.6% of a core at 128 hosts);
// a quarter of the default 10 s timeout is 2.5 s. A connection that sent
// anything else in the last interval skips its beat: any frame is liveness.
inline int heartbeat_interval_ms(double heartbeat_timeout_s) {
  const double quarter = heartbeat_timeout_s * 1000 / 4;
  return static_cast<int>(quarter < 100 ? 100 : quarter > 10000 ? 10000 : quarter);
}

// The MPI namespace (PMIx) and key-value space (PMI) of attempt
// `restart_count` of job `job_id`: the job id for the first attempt,
// "<job_id>.a<N>" for restart N. An MPI library does not initialise again
// in a namespace that existed before, so each attempt has its own.
std::string mpi_nspace(const std::string& job_id, int restart_count);

// Plans every node's launch, or says why the job cannot start (--mpi pmix
// with an agent built without libpmix; --bind-to with too few cores).
LaunchPlan plan_launch(const PlanInput& in);

// -x NAME=VALUE sets it; -x NAME passes the launcher's value (from `env`, its
// environment), if it has one; -x 'PREFIX*' passes every variable of `env`
// whose name starts with PREFIX (Hydra's and DeepSpeed's habit: 'NCCL_*'),
// but none of an outer launcher's wire-up (env::is_foreign_identity_var:
// '*' inside srun or mpirun), which only a -x of its name sends.
EnvMap resolve_exports(const std::vector<std::string>& exports, const EnvMap& env);

// Every variable the user set for the ranks: -x, --env-file and each app context's -x.
EnvMap chosen_env(const PlanInput& in);

// The identity variables the launcher inherited (from srun or mpirun) that
// the ranks get other values for, as one warning line, or "" (launch is the
// first host's message, shared the plan's shared variables). The names in
// chosen (the user's own -x and --env-file: chosen_env) are the user's
// choice, never a contradiction.
std::string inherited_identity_warning(const control::msg::Launch& launch, const EnvMap& inherited,
                                       const EnvMap& chosen = {}, const EnvMap& shared = {});

}  // namespace dl::launcher
