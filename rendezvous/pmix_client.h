#pragma once
// The one adapter to libpmix: asks the PMIx server that started this process
// (mpirun's, srun --mpi=pmix's, or a dlaunch agent's) for the job's size and
// this process's place. pmix_client.cc with libpmix's headers; a build
// without them takes pmix_client_none.cc, whose query_pmix throws IoError
// saying so.

namespace dl::rdzv {

struct PmixJobInfo {
  int rank = -1, world_size = -1, local_rank = -1, local_world_size = -1, node_rank = -1;
};

// PMIx_Init, PMIx_Get of PMIX_JOB_SIZE, PMIX_LOCAL_RANK, PMIX_LOCAL_SIZE and
// PMIX_NODEID, PMIx_Finalize. Throws IoError naming the failing call (no
// PMIx server reachable, or the key is unknown to it); fields the server does
// not know besides the size stay -1.
PmixJobInfo query_pmix();

}  // namespace dl::rdzv
