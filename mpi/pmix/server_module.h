#pragma once
// Internal to mpi/pmix: the state libpmix's upcalls share with PmixServer,
// the helpers every operation's file uses, and each operation's upcalls,
// which make_server_module hands to PMIx_server_init. Not for the agent.
//
// One file per operation (PRRTE's pmix_server_{dyn,fence,pub}.c): its
// upcall(s) here, and its PmixServer::answer for the launcher's reply.
#include <pmix.h>
#include <pmix_server.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "mpi/pmix/pmix_server.h"

namespace dl::mpi::pmix {

// A libpmix completion we owe: the callback and its cookie.
template <class Fn>
struct Pending {
  Fn fn = nullptr;
  void* cbdata = nullptr;
};
using PendingModex = Pending<pmix_modex_cbfunc_t>;    // fences, direct modex
using PendingSpawn = Pending<pmix_spawn_cbfunc_t>;    // PMIx_Spawn
using PendingLookup = Pending<pmix_lookup_cbfunc_t>;  // PMIx_Lookup
using PendingOp = Pending<pmix_op_cbfunc_t>;          // PMIx_Connect/Disconnect

struct ServerState {
  std::mutex mu;  // guards everything below after start
  MpiHooks hooks;
  std::string nspace;
  // Every namespace served here and the dlaunch rank id of its rank 0: the
  // job's (0) and MPI_Comm_spawn's children's.
  std::map<std::string, int> id_base;
  std::map<std::string, int> ns_size;     // ... and its size
  std::map<std::string, bool> ns_local;   // ... and whether its processes are on this host
  // The namespaces of the job's earlier attempts (retire_job): a fence
  // libpmix still brings for one is refused, never relayed. One per restart.
  std::set<std::string> retired;
  uint64_t next_connect = 0;
  std::map<uint64_t, PendingOp> connects;
  std::map<uint64_t, PendingModex> group_fences;  // fences over part of the job (ids of next_connect)
  int world_size = 0;
  uint64_t next_fence = 0;
  uint64_t next_dmodex = 0;
  uint64_t next_spawn = 0;
  uint64_t next_lookup = 0;
  std::map<uint64_t, PendingLookup> lookups;
  std::map<uint64_t, PendingSpawn> spawns;
  std::map<uint64_t, PendingModex> fences;
  std::map<uint64_t, PendingModex> dmodex;
  // Asked as each client finishes its handshake, before libpmix reads a
  // request from it; false refuses the client (libpmix closes it). Empty:
  // every client is let in (PmixServer::seal sets it).
  std::function<bool()> admit_client;
};

// The one live state (libpmix is a process singleton), or null.
ServerState* current_state();
void set_current_state(ServerState* state);

// The upcall table; direct_modex is left null without direct modex
// (libpmix then answers such requests "not found").
pmix_server_module_t make_server_module(bool with_direct_modex);

// The dlaunch rank id of `proc` (ServerState::id_base); -1 when its
// namespace is not served here or proc is a wildcard. REQUIRES: s.mu held.
int id_of(const ServerState& s, const pmix_proc_t* proc);

// Runs fn(state, id) under its lock when the proc is in a namespace served
// here (id: its dlaunch rank id); with a null proc, fn(state, -1). False
// when no server runs, it has no job yet (upcalls before register_job do
// nothing), or the proc is not served here.
template <typename Fn>
bool with_state(const pmix_proc_t* proc, Fn&& fn) {
  ServerState* s = current_state();
  if (s == nullptr) return false;
  std::lock_guard<std::mutex> lock(s->mu);
  if (!s->hooks.post) return false;
  const int id = proc != nullptr ? id_of(*s, proc) : -1;
  if (proc != nullptr && id < 0) return false;
  fn(*s, id);
  return true;
}

// Sends `m` to the launcher from the agent's thread (hooks.post, then
// hooks.send; nothing without them). REQUIRES: s.mu held.
void post_send(ServerState& s, control::MpiUp m);

// Records what libpmix is owed for a request in s.*pending under the next
// id of s.*next, and returns that id. REQUIRES: s.mu held.
template <class P>
uint64_t owe(ServerState& s, uint64_t ServerState::*next, std::map<uint64_t, P> ServerState::*pending, P p) {
  const uint64_t id = (s.*next)++;
  (s.*pending)[id] = p;
  return id;
}

// Removes and returns pending[id]; fn == nullptr when there is none.
template <class P>
P take(ServerState* s, std::map<uint64_t, P> ServerState::*which, uint64_t id) {
  if (s == nullptr) return {};
  std::lock_guard<std::mutex> lock(s->mu);
  auto& pending = s->*which;
  auto it = pending.find(id);
  if (it == pending.end()) return {};
  P p = it->second;
  pending.erase(it);
  return p;
}

// The namespace and rank of dlaunch rank `id`; false when no namespace
// served here has it. REQUIRES: s.mu held.
bool proc_of(const ServerState& s, int id, std::string* nspace, int* rank);

// "nspace:rank" / "nspace:*" for the launcher.
std::vector<std::string> proc_names(const pmix_proc_t procs[], size_t nprocs);

// Hands `bytes` to a libpmix modex callback; libpmix releases the copy.
void complete_modex(const PendingModex& p, pmix_status_t status, const std::string& bytes);

pmix_proc_t make_proc(const std::string& nspace, int rank);
// Whether global rank `rank` lives on this host of `map`.
bool is_local(const JobMap& map, int rank);
// libpmix's variables for `rank` of `nspace` (PMIx_server_setup_fork).
// Throws IoError naming the rank when libpmix fails.
EnvList setup_fork(const std::string& nspace, int rank);

// The upcalls, by operation.
// server_module.cc: the clients' life.
pmix_status_t on_connected(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*);
pmix_status_t on_finalized(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*);
pmix_status_t on_abort(const pmix_proc_t* proc, void*, int status, const char msg[], pmix_proc_t[], size_t,
                       pmix_op_cbfunc_t, void*);
// server_fence.cc
pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t, char* data,
                       size_t ndata, pmix_modex_cbfunc_t cbfunc, void* cbdata);
// server_connect.cc; group_fence: a fence over part of the job with
// processes on other hosts, completed like a connect. REQUIRES: s.mu held.
pmix_status_t group_fence(ServerState& s, const pmix_proc_t procs[], size_t nprocs, const std::string& blob,
                          pmix_modex_cbfunc_t cbfunc, void* cbdata);
pmix_status_t on_connect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t,
                         pmix_op_cbfunc_t cbfunc, void* cbdata);
pmix_status_t on_disconnect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t,
                            pmix_op_cbfunc_t cbfunc, void* cbdata);
// server_spawn.cc
pmix_status_t on_spawn(const pmix_proc_t* proc, const pmix_info_t[], size_t, const pmix_app_t apps[], size_t napps,
                       pmix_spawn_cbfunc_t cbfunc, void* cbdata);
// server_publish.cc
pmix_status_t on_publish(const pmix_proc_t* proc, const pmix_info_t info[], size_t ninfo, pmix_op_cbfunc_t cbfunc,
                         void* cbdata);
pmix_status_t on_unpublish(const pmix_proc_t* proc, char** keys, const pmix_info_t[], size_t,
                           pmix_op_cbfunc_t cbfunc, void* cbdata);
pmix_status_t on_lookup(const pmix_proc_t* proc, char** keys, const pmix_info_t info[], size_t ninfo,
                        pmix_lookup_cbfunc_t cbfunc, void* cbdata);
// server_dmodex.cc
pmix_status_t on_direct_modex(const pmix_proc_t* proc, const pmix_info_t[], size_t, pmix_modex_cbfunc_t cbfunc,
                              void* cbdata);

}  // namespace dl::mpi::pmix
