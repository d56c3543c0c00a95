// PMIx_Connect / PMIx_Disconnect, and fences over part of the job (OpenMPI's
// MPI_Comm_disconnect), whose processes span hosts: the launcher completes
// them across hosts (mpi_connect, answered by mpi_connect_done). libpmix
// completes those whose processes are all on this host by itself.
#include "mpi/pmix/server_module.h"

namespace dl::mpi::pmix {
namespace {

// Asks the launcher for `op` over `procs`; `pending` is what completes it
// here. REQUIRES: s.mu held, s.hooks.send.
template <class P>
void ask_connect(ServerState& s, std::map<uint64_t, P> ServerState::*pending, P p, const char* op,
                 const pmix_proc_t procs[], size_t nprocs, const std::string& blob) {
  const uint64_t id = owe(s, &ServerState::next_connect, pending, p);
  control::msg::MpiConnect m{id, op, proc_names(procs, nprocs), std::nullopt};
  if (!blob.empty()) m.blob = to_hex(blob.data(), blob.size());
  post_send(s, std::move(m));
}

pmix_status_t connect_across(const pmix_proc_t procs[], size_t nprocs, pmix_op_cbfunc_t cbfunc, void* cbdata,
                             const char* op) {
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  with_state(nullptr, [&](ServerState& s, int) {
    if (!s.hooks.send) return;
    ask_connect(s, &ServerState::connects, PendingOp{cbfunc, cbdata}, op, procs, nprocs, "");
    rc = PMIX_SUCCESS;
  });
  return rc;
}

}  // namespace

pmix_status_t group_fence(ServerState& s, const pmix_proc_t procs[], size_t nprocs, const std::string& blob,
                          pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  if (!s.hooks.send) return PMIX_ERR_NOT_SUPPORTED;
  ask_connect(s, &ServerState::group_fences, PendingModex{cbfunc, cbdata}, "fence", procs, nprocs, blob);
  return PMIX_SUCCESS;
}

pmix_status_t on_connect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t,
                         pmix_op_cbfunc_t cbfunc, void* cbdata) {
  return connect_across(procs, nprocs, cbfunc, cbdata, "connect");
}

pmix_status_t on_disconnect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t,
                            pmix_op_cbfunc_t cbfunc, void* cbdata) {
  return connect_across(procs, nprocs, cbfunc, cbdata, "disconnect");
}

// A fence's result is every host's blob; `error` fails the ranks' call.
void PmixServer::answer(const control::msg::MpiConnectDone& m) {
  const bool ok = !m.error;
  PendingOp p = take(state_.get(), &ServerState::connects, m.id);
  if (p.fn) return p.fn(ok ? PMIX_SUCCESS : PMIX_ERROR, p.cbdata);
  PendingModex f = take(state_.get(), &ServerState::group_fences, m.id);
  if (f.fn) complete_modex(f, ok ? PMIX_SUCCESS : PMIX_ERROR, ok ? from_hex(m.blob.value_or("")) : std::string());
}

}  // namespace dl::mpi::pmix
