#pragma once
// What mpi/ says to the agent: one struct for the MPI side (mpi_side.h),
// the PMIx server (pmix/pmix_server.h) and the PMI server alike. Everything
// for the launcher leaves as a control::MpiUp; fence contributions as binary
// frames (control/protocol.h); MPI_Comm_spawn's children are handed to the
// agent to start.
//
// Threading: every hook runs on the agent's thread. The PMIx server's
// upcalls arrive on libpmix's thread and reach the hooks through `post`.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "control/messages.h"

namespace dl::mpi {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// What a rank gets from one of the agent's contributors just before it
// starts (agent/rank_contributor.h), the MPI side's among them (MpiSide::
// task_env): variables to add to its environment over everything before
// (PMIX_*, PMI_FD, ...), and the socket it inherits at
// env::kRankInheritedFd (its PMI_FD), or -1.
struct TaskEnv {
  EnvList vars;
  int inherit_fd = -1;
};

struct MpiHooks {
  // A message for the launcher: MPI_Abort, MPI_Comm_spawn, publish/lookup,
  // connects across hosts, direct modex, a refused rank's wire-up.
  std::function<void(control::MpiUp)> send;
  // This host's contribution to whole-job fence `id` (opaque bytes); the
  // launcher's answer comes back as fence_done(id, every host's blobs).
  std::function<void(uint64_t id, std::string blob)> fence;
  // MPI_Comm_spawn's children placed on this host (the launcher's
  // spawn_launch): start each as a rank of the job with envs[k] added, or
  // with a non-empty `error` refuse each with it. The spawn completes after
  // this returns.
  std::function<void(const control::msg::SpawnLaunch& m, const std::vector<EnvList>& envs, const std::string& error)>
      start_children;
  // Runs a task on the agent's thread; called from libpmix's thread, must
  // not block. MpiSide sets it to its io_context's asio::post.
  std::function<void(std::function<void()>)> post;
  // OPTIONAL. A local rank "connected" to or "finalized" with the PMIx
  // server (dl_pmix_run -v prints them).
  std::function<void(int rank, const char* event)> trace;
};

// The end of a spawn_launch on this host, once its children's variables are
// known (`envs`, in m.children's order) or cannot be (`error`): with
// m.elsewhere, spawn_known to the launcher (an error is also warned about on
// stderr: this host's ranks cannot reach the children); otherwise the
// children are started (start_children).
void finish_spawn_launch(const MpiHooks& hooks, const control::msg::SpawnLaunch& m, const std::vector<EnvList>& envs,
                         const std::string& error);

}  // namespace dl::mpi
