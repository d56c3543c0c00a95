// libpmix's upcalls. They run on libpmix's progress thread: each one records
// what it owes libpmix under the state's mutex and hands the event to the
// agent through Callbacks::post, never calling the agent directly.
#include "mpi/pmix/server_module.h"

#include <atomic>
#include <cstring>

namespace dl::mpi::pmix {
namespace {

std::atomic<ServerState*> g_state{nullptr};

// The dlaunch rank id of `proc` (ServerState::id_base); -1 when its
// namespace is not served here. REQUIRES: s.mu held.
int id_of(const ServerState& s, const pmix_proc_t* proc) {
  auto it = s.id_base.find(proc->nspace);
  if (it == s.id_base.end() || proc->rank == PMIX_RANK_WILDCARD) return -1;
  return it->second + static_cast<int>(proc->rank);
}

// Runs fn(state, id) under its lock when the proc is in a namespace served
// here (id: its dlaunch rank id); with a null proc, fn(state, -1).
template <typename Fn>
bool with_state(const pmix_proc_t* proc, Fn&& fn) {
  ServerState* s = g_state.load();
  if (s == nullptr) return false;
  std::lock_guard<std::mutex> lock(s->mu);
  const int id = proc != nullptr ? id_of(*s, proc) : -1;
  if (proc != nullptr && id < 0) return false;
  fn(*s, id);
  return true;
}

void post_rank_event(const pmix_proc_t* proc, std::function<void(int)> Callbacks::*which) {
  with_state(proc, [&](ServerState& s, int rank) {
    if (auto fn = s.cb.*which) s.cb.post([fn, rank] { fn(rank); });
  });
}

// libpmix 4.2 closes a client whose client_connected upcall fails, before
// it reads any request of it; it ignores a failing client_connected2, so the
// module sets only this one.
pmix_status_t on_connected(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*) {
  std::function<bool()> admit;
  if (ServerState* s = g_state.load()) {
    std::lock_guard<std::mutex> lock(s->mu);
    admit = s->admit_client;
  }
  if (admit && !admit()) return PMIX_ERR_UNREACH;
  post_rank_event(proc, &Callbacks::connected);
  return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t on_finalized(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*) {
  post_rank_event(proc, &Callbacks::finalized);
  return PMIX_OPERATION_SUCCEEDED;
}

// The client blocks in PMIx_Abort until we answer; answering at once lets it
// exit with its status while the agent tears the job down.
pmix_status_t on_abort(const pmix_proc_t* proc, void*, int status, const char msg[],
                       pmix_proc_t[], size_t, pmix_op_cbfunc_t, void*) {
  std::string text = msg ? msg : "";
  with_state(proc, [&](ServerState& s, int rank) {
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

// "nspace:rank" / "nspace:*" for the launcher.
std::vector<std::string> proc_names(const pmix_proc_t procs[], size_t nprocs) {
  std::vector<std::string> names;
  for (size_t i = 0; i < nprocs; ++i)
    names.push_back(std::string(procs[i].nspace) + ":" +
                    (procs[i].rank == PMIX_RANK_WILDCARD ? std::string("*") : std::to_string(procs[i].rank)));
  return names;
}

// A fence over part of the job, or over several namespaces, with processes
// on other hosts: the launcher completes it like a connect.
pmix_status_t group_fence(ServerState& s, const pmix_proc_t procs[], size_t nprocs, std::string blob,
                          pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  if (!s.cb.connect) return PMIX_ERR_NOT_SUPPORTED;
  const uint64_t id = s.next_connect++;
  s.group_fences[id] = PendingModex{cbfunc, cbdata};
  auto fn = s.cb.connect;
  s.cb.post([fn, id, names = proc_names(procs, nprocs), blob = to_hex(blob.data(), blob.size())]() mutable {
    fn(id, "fence", std::move(names), std::move(blob));
  });
  return PMIX_SUCCESS;
}

pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t,
                       char* data, size_t ndata, pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  std::string blob(data ? data : "", data ? ndata : 0);
  with_state(nullptr, [&](ServerState& s, int) {
    if (!is_whole_job(s, procs, nprocs)) {
      rc = group_fence(s, procs, nprocs, std::move(blob), cbfunc, cbdata);
      return;
    }
    if (!s.cb.fence) return;
    uint64_t id = s.next_fence++;
    s.fences[id] = PendingModex{cbfunc, cbdata};
    auto fn = s.cb.fence;
    s.cb.post([fn, id, blob = std::move(blob)]() mutable { fn(id, std::move(blob)); });
    rc = PMIX_SUCCESS;
  });
  return rc;
}

// Only for MPI_Comm_spawn's namespaces: the job's own ranks' data comes with
// its MPI_Init fence (docs/mpi.md, "Direct modex"), so a request for one of
// them is answered "not found" at once, as without this upcall.
pmix_status_t on_direct_modex(const pmix_proc_t* proc, const pmix_info_t[], size_t,
                              pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  pmix_status_t rc = PMIX_ERR_NOT_FOUND;
  with_state(proc, [&](ServerState& s, int rank) {
    if (!s.cb.direct_modex || s.nspace == proc->nspace) return;
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
    for (char** e = apps[a].env; e != nullptr && *e != nullptr; ++e) {
      const char* eq = std::strchr(*e, '=');
      if (eq != nullptr) app.env.emplace_back(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
    }
    if (apps[a].cwd != nullptr) app.wdir = apps[a].cwd;
    for (size_t k = 0; k < apps[a].ninfo; ++k)
      if (PMIX_CHECK_KEY(&apps[a].info[k], PMIX_WDIR) && apps[a].info[k].value.type == PMIX_STRING)
        app.wdir = apps[a].info[k].value.data.string;
    wanted.push_back(std::move(app));
  }
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  with_state(proc, [&](ServerState& s, int rank) {
    if (!s.cb.spawn) return;
    const uint64_t id = s.next_spawn++;
    s.spawns[id] = PendingSpawn{cbfunc, cbdata};
    auto fn = s.cb.spawn;
    s.cb.post([fn, id, rank, wanted = std::move(wanted)]() mutable { fn(id, rank, std::move(wanted)); });
    rc = PMIX_SUCCESS;
  });
  return rc;
}

// The value of a PMIx_Lookup/Publish directive as an int (PMIx_Wait is a
// bool in OpenMPI 4.1 and an int in newer PMIx); `dflt` when absent.
int directive(const pmix_info_t info[], size_t ninfo, const char* key, int dflt) {
  for (size_t i = 0; i < ninfo; ++i) {
    if (!PMIX_CHECK_KEY(&info[i], key)) continue;
    const pmix_value_t& v = info[i].value;
    switch (v.type) {
      case PMIX_BOOL: return v.data.flag ? 1 : 0;
      case PMIX_INT: return v.data.integer;
      case PMIX_UINT32: return static_cast<int>(v.data.uint32);
      case PMIX_UINT8: return v.data.uint8;
      case PMIX_PERSIST: return v.data.persist;
      default: return 1;
    }
  }
  return dflt;
}

// Calls an op callback from the agent's thread, after the message it
// answers was sent.
void complete_op_later(ServerState& s, pmix_op_cbfunc_t cbfunc, void* cbdata, pmix_status_t status) {
  if (cbfunc != nullptr) s.cb.post([cbfunc, cbdata, status] { cbfunc(status, cbdata); });
}

// PMIx_Publish: string values only; keys "pmix.*" are directives (range,
// persistence, the user id libpmix adds), not data.
pmix_status_t on_publish(const pmix_proc_t* proc, const pmix_info_t info[], size_t ninfo, pmix_op_cbfunc_t cbfunc,
                         void* cbdata) {
  std::vector<Name> names;
  for (size_t i = 0; i < ninfo; ++i) {
    if (std::strncmp(info[i].key, "pmix.", 5) == 0) continue;
    const pmix_value_t& v = info[i].value;
    Name n{info[i].key, "", proc->nspace, static_cast<int>(proc->rank)};
    if (v.type == PMIX_STRING) n.value = v.data.string ? v.data.string : "";
    else if (v.type == PMIX_BYTE_OBJECT) n.value = to_hex(v.data.bo.bytes, v.data.bo.size), n.bytes = true;
    else return PMIX_ERR_NOT_SUPPORTED;
    names.push_back(std::move(n));
  }
  const bool first_read = directive(info, ninfo, PMIX_PERSISTENCE, -1) == PMIX_PERSIST_FIRST_READ;
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  with_state(proc, [&](ServerState& s, int) {
    if (!s.cb.publish) return;
    auto fn = s.cb.publish;
    s.cb.post([fn, names = std::move(names), first_read]() mutable { fn(std::move(names), first_read); });
    complete_op_later(s, cbfunc, cbdata, PMIX_SUCCESS);
    rc = PMIX_SUCCESS;
  });
  return rc;
}

std::vector<std::string> key_list(char** keys) {
  std::vector<std::string> out;
  for (char** k = keys; k != nullptr && *k != nullptr; ++k) out.emplace_back(*k);
  return out;
}

pmix_status_t on_unpublish(const pmix_proc_t* proc, char** keys, const pmix_info_t[], size_t, pmix_op_cbfunc_t cbfunc,
                           void* cbdata) {
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  with_state(proc, [&](ServerState& s, int) {
    if (!s.cb.unpublish) return;
    auto fn = s.cb.unpublish;
    s.cb.post([fn, k = key_list(keys)]() mutable { fn(std::move(k)); });
    complete_op_later(s, cbfunc, cbdata, PMIX_SUCCESS);
    rc = PMIX_SUCCESS;
  });
  return rc;
}

// PMIx_Lookup: asks the agent (the launcher's name service); with PMIX_WAIT
// the answer comes once every key is published or PMIX_TIMEOUT passed.
pmix_status_t on_lookup(const pmix_proc_t* proc, char** keys, const pmix_info_t info[], size_t ninfo,
                        pmix_lookup_cbfunc_t cbfunc, void* cbdata) {
  const bool wait = directive(info, ninfo, PMIX_WAIT, 0) != 0 ||
                    (directive(info, ninfo, PMIX_WAIT, -1) == 0);  // PMIx's int form: 0 = all keys
  const int timeout_s = directive(info, ninfo, PMIX_TIMEOUT, 0);
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  with_state(proc, [&](ServerState& s, int rank) {
    if (!s.cb.lookup) return;
    const uint64_t id = s.next_lookup++;
    s.lookups[id] = PendingLookup{cbfunc, cbdata};
    auto fn = s.cb.lookup;
    s.cb.post([fn, id, rank, k = key_list(keys), wait, timeout_s]() mutable {
      fn(id, rank, std::move(k), wait, timeout_s > 0 ? timeout_s * 1000 : 0);
    });
    rc = PMIX_SUCCESS;
  });
  return rc;
}

// PMIx_Connect/Disconnect whose processes are not all on this host (libpmix
// completes the others itself): the launcher completes it across hosts.
pmix_status_t connect_across(const pmix_proc_t procs[], size_t nprocs, pmix_op_cbfunc_t cbfunc, void* cbdata,
                             bool disconnect) {
  std::vector<std::string> names = proc_names(procs, nprocs);
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  with_state(nullptr, [&](ServerState& s, int) {
    if (!s.cb.connect) return;
    const uint64_t id = s.next_connect++;
    s.connects[id] = PendingOp{cbfunc, cbdata};
    auto fn = s.cb.connect;
    s.cb.post([fn, id, names = std::move(names), disconnect]() mutable {
      fn(id, disconnect ? "disconnect" : "connect", std::move(names), "");
    });
    rc = PMIX_SUCCESS;
  });
  return rc;
}

pmix_status_t on_connect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t,
                         pmix_op_cbfunc_t cbfunc, void* cbdata) {
  return connect_across(procs, nprocs, cbfunc, cbdata, false);
}

pmix_status_t on_disconnect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t,
                            pmix_op_cbfunc_t cbfunc, void* cbdata) {
  return connect_across(procs, nprocs, cbfunc, cbdata, true);
}

void release_string(void* p) { delete static_cast<std::string*>(p); }

}  // namespace

ServerState* current_state() { return g_state.load(); }

bool proc_of(const ServerState& s, int id, std::string* nspace, int* rank) {
  for (const auto& [ns, base] : s.id_base) {
    auto size = s.ns_size.find(ns);
    if (size != s.ns_size.end() && id >= base && id < base + size->second) {
      *nspace = ns, *rank = id - base;
      return true;
    }
  }
  return false;
}
void set_current_state(ServerState* state) { g_state.store(state); }

pmix_server_module_t make_server_module(bool with_direct_modex) {
  pmix_server_module_t m;
  std::memset(&m, 0, sizeof(m));
  m.client_connected = on_connected;
  m.client_finalized = on_finalized;
  m.abort = on_abort;
  m.fence_nb = on_fence;
  m.spawn = on_spawn;
  m.publish = on_publish;
  m.unpublish = on_unpublish;
  m.lookup = on_lookup;
  m.connect = on_connect;
  m.disconnect = on_disconnect;
  m.direct_modex = with_direct_modex ? on_direct_modex : nullptr;
  return m;
}

std::string to_hex(const char* bytes, size_t size) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    out += digits[b >> 4], out += digits[b & 15];
  }
  return out;
}

std::string from_hex(const std::string& hex) {
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1]));
  return out;
}

void complete_modex(const PendingModex& p, pmix_status_t status, const std::string& bytes) {
  auto* copy = new std::string(bytes);
  p.fn(status, copy->data(), copy->size(), p.cbdata, release_string, copy);
}

}  // namespace dl::mpi::pmix
