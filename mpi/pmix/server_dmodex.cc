// Direct modex: a rank's data that no fence delivered, asked across hosts.
// Only for MPI_Comm_spawn's namespaces: the job's own ranks' data comes with
// its MPI_Init fence (docs/mpi.md, "Direct modex"). A local rank's request
// goes to the launcher (mpi_dmodex, answered by mpi_dmodex_reply); another
// host's request for a rank here (mpi_dmodex_serve) is asked of libpmix and
// answered with mpi_dmodex_data.
#include "mpi/pmix/server_module.h"

namespace dl::mpi::pmix {
namespace {

namespace msg = control::msg;

// libpmix's answer to serve's PMIx_server_dmodex_request: `cbdata` holds the
// launcher's request id.
void dmodex_reply(pmix_status_t status, char* data, size_t size, void* cbdata) {
  auto* id = static_cast<uint64_t*>(cbdata);
  ServerState* s = current_state();
  if (s != nullptr) {
    std::lock_guard<std::mutex> lock(s->mu);
    post_send(*s, msg::MpiDmodexData{*id, status == PMIX_SUCCESS, data ? to_hex(data, size) : ""});
  }
  delete id;
}

}  // namespace

// A request for one of the job's own ranks is answered "not found" at once,
// as without this upcall.
pmix_status_t on_direct_modex(const pmix_proc_t* proc, const pmix_info_t[], size_t, pmix_modex_cbfunc_t cbfunc,
                              void* cbdata) {
  pmix_status_t rc = PMIX_ERR_NOT_FOUND;
  with_state(proc, [&](ServerState& s, int rank) {
    if (!s.hooks.send || s.nspace == proc->nspace) return;
    const uint64_t id = owe(s, &ServerState::next_dmodex, &ServerState::dmodex, PendingModex{cbfunc, cbdata});
    post_send(s, msg::MpiDmodex{id, rank});
    rc = PMIX_SUCCESS;
  });
  return rc;
}

void PmixServer::answer(const msg::MpiDmodexReply& m) {
  PendingModex p = take(state_.get(), &ServerState::dmodex, m.id);
  if (p.fn) complete_modex(p, m.ok ? PMIX_SUCCESS : PMIX_ERR_NOT_FOUND, from_hex(m.blob));
}

// The data of local dlaunch rank m.rank, once libpmix has it (it waits
// until the rank has committed its data); ok false for a rank not here.
void PmixServer::answer(const msg::MpiDmodexServe& m) {
  std::string nspace;
  int in_ns = -1;
  auto refuse = [&] {
    std::lock_guard<std::mutex> lock(state_->mu);
    post_send(*state_, msg::MpiDmodexData{m.id, false, ""});
  };
  bool local = false;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    local = running_ && registered_ && proc_of(*state_, m.rank, &nspace, &in_ns) && state_->ns_local[nspace] &&
            (nspace != map_.nspace || is_local(map_, in_ns));
  }
  if (!local) return refuse();
  pmix_proc_t proc = make_proc(nspace, in_ns);
  auto* id = new uint64_t(m.id);
  if (PMIx_server_dmodex_request(&proc, dmodex_reply, id) != PMIX_SUCCESS) {
    delete id;
    refuse();
  }
}

}  // namespace dl::mpi::pmix
