// libpmix's upcalls. They run on libpmix's progress thread: each one records
// what it owes libpmix under the state's mutex and hands the event to the
// agent through Callbacks::post, never calling the agent directly.
#include "agent/pmix/server_module.h"

#include <atomic>
#include <cstring>

namespace dl::agent::pmix {
namespace {

std::atomic<ServerState*> g_state{nullptr};

// Runs fn(state) under its lock when the proc is in our namespace.
template <typename Fn>
bool with_state(const pmix_proc_t* proc, Fn&& fn) {
  ServerState* s = g_state.load();
  if (s == nullptr) return false;
  std::lock_guard<std::mutex> lock(s->mu);
  if (proc != nullptr && s->nspace != proc->nspace) return false;
  fn(*s);
  return true;
}

void post_rank_event(const pmix_proc_t* proc, std::function<void(int)> Callbacks::*which) {
  int rank = static_cast<int>(proc->rank);
  with_state(proc, [&](ServerState& s) {
    if (auto fn = s.cb.*which) s.cb.post([fn, rank] { fn(rank); });
  });
}

pmix_status_t on_connected(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*) {
  post_rank_event(proc, &Callbacks::connected);
  return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t on_connected2(const pmix_proc_t* proc, void* obj, pmix_info_t*, size_t,
                            pmix_op_cbfunc_t cbfunc, void* cbdata) {
  return on_connected(proc, obj, cbfunc, cbdata);
}

pmix_status_t on_finalized(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*) {
  post_rank_event(proc, &Callbacks::finalized);
  return PMIX_OPERATION_SUCCEEDED;
}

// The client blocks in PMIx_Abort until we answer; answering at once lets it
// exit with its status while the agent tears the job down.
pmix_status_t on_abort(const pmix_proc_t* proc, void*, int status, const char msg[],
                       pmix_proc_t[], size_t, pmix_op_cbfunc_t, void*) {
  int rank = static_cast<int>(proc->rank);
  std::string text = msg ? msg : "";
  with_state(proc, [&](ServerState& s) {
    if (auto fn = s.cb.abort) s.cb.post([fn, rank, status, text] { fn(rank, status, text); });
  });
  return PMIX_OPERATION_SUCCEEDED;
}

// True when the participants are the whole namespace (a wildcard, or every
// rank listed): only those fences have the same sequence number on every host.
bool is_whole_job(const ServerState& s, const pmix_proc_t procs[], size_t nprocs) {
  if (nprocs == 1 && procs[0].rank == PMIX_RANK_WILDCARD) return s.nspace == procs[0].nspace;
  if (nprocs != static_cast<size_t>(s.world_size)) return false;
  for (size_t i = 0; i < nprocs; ++i)
    if (s.nspace != procs[i].nspace || procs[i].rank == PMIX_RANK_WILDCARD) return false;
  return true;
}

pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t,
                       char* data, size_t ndata, pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  std::string blob(data ? data : "", data ? ndata : 0);
  with_state(nullptr, [&](ServerState& s) {
    if (!s.cb.fence || !is_whole_job(s, procs, nprocs)) return;
    uint64_t id = s.next_fence++;
    s.fences[id] = PendingModex{cbfunc, cbdata};
    auto fn = s.cb.fence;
    s.cb.post([fn, id, blob = std::move(blob)]() mutable { fn(id, std::move(blob)); });
    rc = PMIX_SUCCESS;
  });
  return rc;
}

pmix_status_t on_direct_modex(const pmix_proc_t* proc, const pmix_info_t[], size_t,
                              pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  pmix_status_t rc = PMIX_ERR_NOT_FOUND;
  int rank = static_cast<int>(proc->rank);
  with_state(proc, [&](ServerState& s) {
    if (!s.cb.direct_modex || rank < 0 || rank >= s.world_size) return;
    uint64_t id = s.next_dmodex++;
    s.dmodex[id] = PendingModex{cbfunc, cbdata};
    auto fn = s.cb.direct_modex;
    s.cb.post([fn, id, rank] { fn(id, rank); });
    rc = PMIX_SUCCESS;
  });
  return rc;
}

// MPI_Comm_spawn: hand the request to the agent, which asks the launcher;
// PmixServer::spawn_done answers. Without a spawn callback, refuse at once.
pmix_status_t on_spawn(const pmix_proc_t* proc, const pmix_info_t[], size_t, const pmix_app_t apps[], size_t napps,
                       pmix_spawn_cbfunc_t cbfunc, void* cbdata) {
  std::vector<SpawnApp> wanted;
  for (size_t a = 0; a < napps; ++a) {
    SpawnApp app;
    if (apps[a].cmd != nullptr) app.argv.emplace_back(apps[a].cmd);
    // argv[0] repeats the command, as in exec's argv.
    for (size_t k = 1; apps[a].argv != nullptr && apps[a].argv[0] != nullptr && apps[a].argv[k] != nullptr; ++k)
      app.argv.emplace_back(apps[a].argv[k]);
    app.np = apps[a].maxprocs;
    wanted.push_back(std::move(app));
  }
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  const int rank = static_cast<int>(proc->rank);
  with_state(proc, [&](ServerState& s) {
    if (!s.cb.spawn) return;
    const uint64_t id = s.next_spawn++;
    s.spawns[id] = PendingSpawn{cbfunc, cbdata};
    auto fn = s.cb.spawn;
    s.cb.post([fn, id, rank, wanted = std::move(wanted)]() mutable { fn(id, rank, std::move(wanted)); });
    rc = PMIX_SUCCESS;
  });
  return rc;
}

void release_string(void* p) { delete static_cast<std::string*>(p); }

}  // namespace

ServerState* current_state() { return g_state.load(); }
void set_current_state(ServerState* state) { g_state.store(state); }

pmix_server_module_t make_server_module(bool with_direct_modex) {
  pmix_server_module_t m;
  std::memset(&m, 0, sizeof(m));
  m.client_connected = on_connected;
  m.client_connected2 = on_connected2;
  m.client_finalized = on_finalized;
  m.abort = on_abort;
  m.fence_nb = on_fence;
  m.spawn = on_spawn;
  m.direct_modex = with_direct_modex ? on_direct_modex : nullptr;
  return m;
}

void complete_modex(const PendingModex& p, pmix_status_t status, const std::string& bytes) {
  auto* copy = new std::string(bytes);
  p.fn(status, copy->data(), copy->size(), p.cbdata, release_string, copy);
}

}  // namespace dl::agent::pmix
