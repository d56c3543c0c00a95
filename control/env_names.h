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
inline constexpr const char* kMpiLocalRankId = "MPI_LOCALRANKID";
inline constexpr const char* kMpiLocalNRanks = "MPI_LOCALNRANKS";

// Horovod's.
inline constexpr const char* kHorovodRank = "HOROVOD_RANK";
inline constexpr const char* kHorovodSize = "HOROVOD_SIZE";
inline constexpr const char* kHorovodLocalRank = "HOROVOD_LOCAL_RANK";
inline constexpr const char* kHorovodLocalSize = "HOROVOD_LOCAL_SIZE";
inline constexpr const char* kHorovodCrossRank = "HOROVOD_CROSS_RANK";
inline constexpr const char* kHorovodCrossSize = "HOROVOD_CROSS_SIZE";

// Slurm's per-task identity (read by the env:// bootstrap, never set).
inline constexpr const char* kSlurmProcId = "SLURM_PROCID";
inline constexpr const char* kSlurmNTasks = "SLURM_NTASKS";
inline constexpr const char* kSlurmLocalId = "SLURM_LOCALID";
inline constexpr const char* kSlurmNodeId = "SLURM_NODEID";

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
inline constexpr const char* kDlSocketIfname = "DLAUNCH_SOCKET_IFNAME";
inline constexpr const char* kDlStoreSpinUs = "DLAUNCH_STORE_SPIN_US";

// GPU visibility (set by the launch plan's GPU binding).
inline constexpr const char* kCudaVisibleDevices = "CUDA_VISIBLE_DEVICES";

// True for inherited variables that belong to an outer launcher's identity
// (PMIx, PMI wire-up, OpenMPI's runtime, Hydra): the agent removes them from
// every rank's environment before adding dlaunch's own, so a rank started by
// a dlaunch that itself runs under srun or mpirun never talks to the outer
// launcher; the launcher warns about the ones it inherited.
inline bool is_foreign_identity_var(std::string_view name) {
  constexpr std::string_view prefixes[] = {"PMIX_", "PMI_", "OMPI_COMM_WORLD_", "OMPI_MCA_ess", "OMPI_MCA_orte_",
                                           "OMPI_MCA_pmix", "OMPI_UNIVERSE_SIZE", "OMPI_FIRST_RANKS", "HYDRA_",
                                           "MPI_LOCAL"};
  for (auto p : prefixes)
    if (name.substr(0, p.size()) == p) return true;
  return false;
}

}  // namespace dl::env
