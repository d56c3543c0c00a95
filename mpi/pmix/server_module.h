#pragma once
// Internal to mpi/pmix: the state libpmix's upcalls share with PmixServer,
// and the upcall table handed to PMIx_server_init. Not for the agent.
#include <pmix.h>
#include <pmix_server.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "mpi/pmix/pmix_server.h"

namespace dl::mpi::pmix {

// A libpmix completion we owe: the callback and its cookie.
struct PendingModex {
  pmix_modex_cbfunc_t fn = nullptr;
  void* cbdata = nullptr;
};

// A PMIx_Spawn we owe an answer.
struct PendingSpawn {
  pmix_spawn_cbfunc_t fn = nullptr;
  void* cbdata = nullptr;
};

// A PMIx_Lookup we owe an answer.
struct PendingLookup {
  pmix_lookup_cbfunc_t fn = nullptr;
  void* cbdata = nullptr;
};

// A PMIx_Connect/Disconnect we owe an answer.
struct PendingOp {
  pmix_op_cbfunc_t fn = nullptr;
  void* cbdata = nullptr;
};

struct ServerState {
  std::mutex mu;  // guards everything below after start
  Callbacks cb;
  std::string nspace;
  // Every namespace served here and the dlaunch rank id of its rank 0: the
  // job's (0) and MPI_Comm_spawn's children's.
  std::map<std::string, int> id_base;
  std::map<std::string, int> ns_size;     // ... and its size
  std::map<std::string, bool> ns_local;   // ... and whether its processes are on this host
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

// The upcall table; direct_modex is left null when the agent gave no
// direct_modex callback (libpmix then answers such requests "not found").
pmix_server_module_t make_server_module(bool with_direct_modex);

// The namespace and rank of dlaunch rank `id`; false when no namespace
// served here has it. REQUIRES: s.mu held.
bool proc_of(const ServerState& s, int id, std::string* nspace, int* rank);

// Hands `bytes` to a libpmix modex callback; libpmix releases the copy.
void complete_modex(const PendingModex& p, pmix_status_t status, const std::string& bytes);

}  // namespace dl::mpi::pmix
