// libpmix's upcall table and what every operation shares; the clients'
// connect, finalize and abort. The upcalls run on libpmix's progress
// thread: each records what it owes libpmix under the state's mutex and
// hands the event to the agent through MpiHooks::post, never calling the
// agent directly. The other operations are in server_<op>.cc.
#include "mpi/pmix/server_module.h"

#include <atomic>
#include <cstring>

namespace dl::mpi::pmix {
namespace {

std::atomic<ServerState*> g_state{nullptr};

void trace(const pmix_proc_t* proc, const char* event) {
  with_state(proc, [&](ServerState& s, int rank) {
    if (auto fn = s.hooks.trace) s.hooks.post([fn, rank, event] { fn(rank, event); });
  });
}

void release_string(void* p) { delete static_cast<std::string*>(p); }

}  // namespace

ServerState* current_state() { return g_state.load(); }
void set_current_state(ServerState* state) { g_state.store(state); }

int id_of(const ServerState& s, const pmix_proc_t* proc) {
  auto it = s.id_base.find(proc->nspace);
  if (it == s.id_base.end() || proc->rank == PMIX_RANK_WILDCARD) return -1;
  return it->second + static_cast<int>(proc->rank);
}

void post_send(ServerState& s, control::MpiUp m) {
  if (!s.hooks.post || !s.hooks.send) return;
  s.hooks.post([send = s.hooks.send, m = std::move(m)]() mutable { send(std::move(m)); });
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
  trace(proc, "connected");
  return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t on_finalized(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*) {
  trace(proc, "finalized");
  return PMIX_OPERATION_SUCCEEDED;
}

// The client blocks in PMIx_Abort until we answer; answering at once lets it
// exit with its status while the agent tears the job down (mpi_abort).
pmix_status_t on_abort(const pmix_proc_t* proc, void*, int status, const char msg[], pmix_proc_t[], size_t,
                       pmix_op_cbfunc_t, void*) {
  std::string text = msg ? msg : "";
  with_state(proc, [&](ServerState& s, int rank) { post_send(s, control::msg::MpiAbort{rank, status, text}); });
  return PMIX_OPERATION_SUCCEEDED;
}

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

std::vector<std::string> proc_names(const pmix_proc_t procs[], size_t nprocs) {
  std::vector<std::string> names;
  for (size_t i = 0; i < nprocs; ++i)
    names.push_back(std::string(procs[i].nspace) + ":" +
                    (procs[i].rank == PMIX_RANK_WILDCARD ? std::string("*") : std::to_string(procs[i].rank)));
  return names;
}

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
