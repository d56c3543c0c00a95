// Fences over the whole job (PMIx_Fence, MPI_Init's and MPI_Barrier's
// exchange): this host's blob to the launcher (MpiHooks::fence), every
// host's back (fence_done), or fence_failed. A fence over part of the job is
// a connect's (server_connect.cc).
#include "mpi/pmix/server_module.h"

namespace dl::mpi::pmix {
namespace {

// True when the participants are the whole namespace (a wildcard, or every
// rank listed): only those fences have the same sequence number on every host.
bool is_whole_job(const ServerState& s, const pmix_proc_t procs[], size_t nprocs) {
  if (nprocs == 1 && procs[0].rank == PMIX_RANK_WILDCARD) return s.nspace == procs[0].nspace;
  if (nprocs != static_cast<size_t>(s.world_size)) return false;
  for (size_t i = 0; i < nprocs; ++i)
    if (s.nspace != procs[i].nspace || procs[i].rank == PMIX_RANK_WILDCARD) return false;
  return true;
}

}  // namespace

pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t, char* data,
                       size_t ndata, pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  std::string blob(data ? data : "", data ? ndata : 0);
  with_state(nullptr, [&](ServerState& s, int) {
    for (size_t i = 0; i < nprocs; ++i)
      if (s.retired.count(procs[i].nspace)) return;  // an earlier attempt's: its ranks are gone
    if (!is_whole_job(s, procs, nprocs)) {
      rc = group_fence(s, procs, nprocs, blob, cbfunc, cbdata);
      return;
    }
    if (!s.hooks.fence) return;
    const uint64_t id = owe(s, &ServerState::next_fence, &ServerState::fences, PendingModex{cbfunc, cbdata});
    s.hooks.post([fn = s.hooks.fence, id, blob = std::move(blob)]() mutable { fn(id, std::move(blob)); });
    rc = PMIX_SUCCESS;
  });
  return rc;
}

void PmixServer::fence_done(uint64_t id, const std::string& all_blobs) {
  PendingModex p = take(state_.get(), &ServerState::fences, id);
  if (p.fn) complete_modex(p, PMIX_SUCCESS, all_blobs);
}

void PmixServer::answer(const control::msg::FenceFailed& m) {
  PendingModex p = take(state_.get(), &ServerState::fences, m.id);
  if (p.fn) complete_modex(p, PMIX_ERROR, std::string());
}

}  // namespace dl::mpi::pmix
