#pragma once
// The rank environment's variable names: the contract between the launcher
// (which sets them, launcher/rank_env.cc), the rendezvous bootstrap and the
// collectives (which read them). One home, so a name cannot drift between
// the writer and its readers. Header-only: every layer may include it.
#include <string_view>

namespace dl::env {

// torchrun's contract (torch.distributed's env://).
inline constexpr const char* kRank = "RANK";
inline constexpr const char* kWorldSize = "WORLD_SIZE";
inline constexpr const char* kLocalRank = "LOCAL_RANK";
inline constexpr const char* kLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kGroupRank = "GROUP_RANK";
inline constexpr const char* kGroupWorldSize = "GROUP_WORLD_SIZE";
inline constexpr const char* kRoleRank = "ROLE_RANK";
inline constexpr const char* kRoleWorldSize = "ROLE_WORLD_SIZE";
inline constexpr const char* kRoleName = "ROLE_NAME";
inline constexpr const char* kNodeRank = "NODE_RANK";
inline constexpr const char* kMasterAddr = "MASTER_ADDR";
inline constexpr const char* kMasterPort = "MASTER_PORT";

// OpenMPI's.
inline constexpr const char* kOmpiRank = "OMPI_COMM_WORLD_RANK";
inline constexpr const char* kOmpiSize = "OMPI_COMM_WORLD_SIZE";
inline constexpr const char* kOmpiLocalRank = "OMPI_COMM_WORLD_LOCAL_RANK";
inline constexpr const char* kOmpiLocalSize = "OMPI_COMM_WORLD_LOCAL_SIZE";
inline constexpr const char* kOmpiNodeRank = "OMPI_COMM_WORLD_NODE_RANK";

// Intel MPI / MPICH Hydra's (oneCCL reads these).
inline constexpr const char* kPmiRank = "PMI_RANK";
inline constexpr const char* kPmiSize = "PMI_SIZE";
inline constexpr const char* kPmiFd = "PMI_FD";  // the inherited socket of the agent's PMI server
// The descriptor number a rank inherits its one extra descriptor as (its PMI
// socket, PMI_FD's value): the agent's spawn puts it there, mpi/ names it.
inline constexpr int kRankInheritedFd = 3;
inline constexpr const char* kMpiLocalRankId = "MPI_LOCALRANKID";
inline constexpr const char* kMpiLocalNRanks = "MPI_LOCALNRANKS";
// MPMD: the rank's app context (0-based), as Hydra's and PMIx's names.
inline constexpr const char* kMpiAppnum = "MPI_APPNUM";
inline constexpr const char* kPmixAppnum = "PMIX_APPNUM";

// Horovod's.
inline constexpr const char* kHorovodRank = "HOROVOD_RANK";
inline constexpr const char* kHorovodSize = "HOROVOD_SIZE";
inline constexpr const char* kHorovodLocalRank = "HOROVOD_LOCAL_RANK";
inline constexpr const char* kHorovodLocalSize = "HOROVOD_LOCAL_SIZE";
inline constexpr const char* kHorovodCrossRank = "HOROVOD_CROSS_RANK";
inline constexpr const char* kHorovodCrossSize = "HOROVOD_CROSS_SIZE";

// Slurm's per-task identity: read by the env:// bootstrap and --rdzv env; when
// dlaunch runs inside Slurm (kSlurmJobId set) each rank gets them rewritten
// to agree with its RANK, since Lightning and ignite read SLURM_PROCID.
inline constexpr const char* kSlurmJobId = "SLURM_JOB_ID";
inline constexpr const char* kSlurmProcId = "SLURM_PROCID";
inline constexpr const char* kSlurmNTasks = "SLURM_NTASKS";
inline constexpr const char* kSlurmLocalId = "SLURM_LOCALID";
inline constexpr const char* kSlurmNodeId = "SLURM_NODEID";
inline constexpr const char* kSlurmNProcs = "SLURM_NPROCS";                      // old name of SLURM_NTASKS
inline constexpr const char* kSlurmStepNumTasks = "SLURM_STEP_NUM_TASKS";
inline constexpr const char* kSlurmNTasksPerNode = "SLURM_NTASKS_PER_NODE";      // Lightning insists on it
inline constexpr const char* kSlurmStepTasksPerNode = "SLURM_STEP_TASKS_PER_NODE";
inline constexpr const char* kSlurmTasksPerNode = "SLURM_TASKS_PER_NODE";

// Per-task Slurm variables that have no counterpart in dlaunch's world (the
// pid of srun's task, the task ids srun ran on this node): the agent removes
// them from every rank's environment.
inline bool is_slurm_task_only_var(std::string_view name) {
  return name == "SLURM_TASK_PID" || name == "SLURM_GTIDS";
}

// torchelastic's variables (torchrun sets them for every worker). The run id
// makes torch.distributed.is_torchelastic_launched() true; the error file is
// where torch's @record writes a rank's uncaught exception (JSON), which the
// agent reads after the rank fails. TORCHELASTIC_USE_AGENT_STORE=True tells
// torch's env:// that the store on MASTER_PORT is served (dlaunch's c10d
// store, launcher/torch_store.h), so no rank starts one.
inline constexpr const char* kTorchelasticRunId = "TORCHELASTIC_RUN_ID";
inline constexpr const char* kTorchelasticRestartCount = "TORCHELASTIC_RESTART_COUNT";
inline constexpr const char* kTorchelasticMaxRestarts = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr const char* kTorchelasticErrorFile = "TORCHELASTIC_ERROR_FILE";
inline constexpr const char* kTorchelasticUseAgentStore = "TORCHELASTIC_USE_AGENT_STORE";

// Set to 1 by the launch plan when several ranks share a host and the user chose nothing (as torchrun does).
inline constexpr const char* kOmpNumThreads = "OMP_NUM_THREADS";
// "dumb" for ranks whose pty output goes to no terminal (launch_plan.cc).
inline constexpr const char* kTerm = "TERM";

// dlaunch's own runtime.
inline constexpr const char* kDlRank = "DLAUNCH_RANK";
inline constexpr const char* kDlWorldSize = "DLAUNCH_WORLD_SIZE";
inline constexpr const char* kDlLocalRank = "DLAUNCH_LOCAL_RANK";
inline constexpr const char* kDlLocalWorldSize = "DLAUNCH_LOCAL_WORLD_SIZE";
inline constexpr const char* kDlNodeRank = "DLAUNCH_NODE_RANK";
inline constexpr const char* kDlNNodes = "DLAUNCH_NNODES";
inline constexpr const char* kDlJobId = "DLAUNCH_JOB_ID";
inline constexpr const char* kDlHostId = "DLAUNCH_HOST_ID";
inline constexpr const char* kDlToken = "DLAUNCH_TOKEN";           // never on a command line
inline constexpr const char* kDlStoreAddr = "DLAUNCH_STORE_ADDR";  // host:port of the job's store
// The AF_UNIX path of the rank's host's store door (rendezvous/host/store_door.h):
// env:// connects there rather than to DLAUNCH_STORE_ADDR when it is set.
inline constexpr const char* kDlStoreDoor = "DLAUNCH_STORE_DOOR";
// host:port of torch's c10d store when dlaunch serves it (MASTER_ADDR:MASTER_PORT
// as the ranks get them, with TORCHELASTIC_USE_AGENT_STORE): dlaunch's Python
// hook lets torch use the agent store only for a rendezvous at this address.
inline constexpr const char* kDlTorchStore = "DLAUNCH_TORCH_STORE";
inline constexpr const char* kDlRestartCount = "DLAUNCH_RESTART_COUNT";  // the attempt, 0 first (--max-restarts)
inline constexpr const char* kDlSocketIfname = "DLAUNCH_SOCKET_IFNAME";
inline constexpr const char* kDlStoreSpinUs = "DLAUNCH_STORE_SPIN_US";
inline constexpr const char* kDlAgentStallMs = "DLAUNCH_AGENT_STALL_MS";  // the agent's loop watch (agent/loop_watch.h)
inline constexpr const char* kDlLocalAgent = "DLAUNCH_LOCAL_AGENT";        // "exec": the local agent runs dlaunch-agent (remote/early_agent.h)

// GPU visibility (set by the launch plan's GPU binding).
inline constexpr const char* kCudaVisibleDevices = "CUDA_VISIBLE_DEVICES";

// Which inherited variables are an outer launcher's identity (PMIx, PMI
// wire-up, OpenMPI's runtime, Hydra): the agent removes them from every
// rank's environment before adding dlaunch's own, so a rank started by a
// dlaunch that itself runs under srun or mpirun never talks to the outer
// launcher; the launcher warns about the ones it inherited, and -x 'PREFIX*'
// passes none of them. One table decides, row by row, the first row that
// matches a name winning:
//   kName    that name alone;
//   kFamily  every name in a namespace that one launcher owns whole: PMIx's
//            PMIX_ (its server's URIs, namespace, rank, temporary
//            directories, ...: a newer PMIx adds names, and one left behind
//            points a rank at the outer server), ORTE's MCA parameters for
//            its own daemons, Hydra's HYDRA_.
// A name's first few letters alone never make it an identity: PMI_ is no
// launcher's own prefix (a script's PMI_ENV_PORT is its own), so PMI's
// names are listed one by one (the rank, the size, the socket as PMI_FD or
// as PMI_PORT with PMI_ID), as are OpenMPI's and Hydra's per-rank names.
// PMIx's own MCA parameters (PMIX_MCA_*) are a site's or a container
// image's configuration, not a job's identity (NVIDIA's PyTorch images set
// PMIX_MCA_gds=hash for every process): they stay, as OMPI_MCA_* tuning does.
struct IdentityRow {
  enum Match { kName, kFamily };
  std::string_view text;
  Match match;
  bool identity;  // false: a row that keeps what a later row would remove
};
inline constexpr IdentityRow kIdentityTable[] = {
    {"PMIX_MCA_", IdentityRow::kFamily, false},
    {"PMIX_", IdentityRow::kFamily, true},
    {kPmiRank, IdentityRow::kName, true},
    {kPmiSize, IdentityRow::kName, true},
    {kPmiFd, IdentityRow::kName, true},
    {"PMI_PORT", IdentityRow::kName, true},
    {"PMI_ID", IdentityRow::kName, true},
    {kOmpiRank, IdentityRow::kName, true},
    {kOmpiSize, IdentityRow::kName, true},
    {kOmpiLocalRank, IdentityRow::kName, true},
    {kOmpiLocalSize, IdentityRow::kName, true},
    {kOmpiNodeRank, IdentityRow::kName, true},
    {"OMPI_UNIVERSE_SIZE", IdentityRow::kName, true},
    {"OMPI_FIRST_RANKS", IdentityRow::kName, true},
    {"OMPI_MCA_ess", IdentityRow::kFamily, true},    // OMPI_MCA_ess, OMPI_MCA_ess_base_jobid, ...
    {"OMPI_MCA_orte_", IdentityRow::kFamily, true},  // ORTE's daemon URIs, job and node counts
    {"OMPI_MCA_pmix", IdentityRow::kFamily, true},   // which PMIx client, and its server's address
    {"HYDRA_", IdentityRow::kFamily, true},
    {kMpiLocalRankId, IdentityRow::kName, true},
    {kMpiLocalNRanks, IdentityRow::kName, true},
};

inline bool is_foreign_identity_var(std::string_view name) {
  for (const auto& row : kIdentityTable)
    if (row.match == IdentityRow::kName ? name == row.text : name.substr(0, row.text.size()) == row.text)
      return row.identity;
  return false;
}

}  // namespace dl::env
