// PMIx_Publish, PMIx_Unpublish and PMIx_Lookup (MPI_Publish_name,
// MPI_Lookup_name, OpenMPI's connect/accept): the names live in the job's
// name service, the launcher's (launcher/mpi/name_service.h); a lookup waits for
// mpi_lookup_reply. String and byte-object values; others fail "not
// supported".
#include <cstring>

#include "mpi/pmix/server_module.h"

namespace dl::mpi::pmix {
namespace {

namespace msg = control::msg;

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

// Sends `m` and then calls an op callback, both from the agent's thread:
// the rank's call returns after the message it made was sent.
void send_then_complete(ServerState& s, control::MpiUp m, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  post_send(s, std::move(m));
  if (cbfunc != nullptr) s.hooks.post([cbfunc, cbdata] { cbfunc(PMIX_SUCCESS, cbdata); });
}

std::vector<std::string> key_list(char** keys) {
  std::vector<std::string> out;
  for (char** k = keys; k != nullptr && *k != nullptr; ++k) out.emplace_back(*k);
  return out;
}

}  // namespace

// Keys "pmix.*" are directives (range, persistence, the user id libpmix
// adds), not data.
pmix_status_t on_publish(const pmix_proc_t* proc, const pmix_info_t info[], size_t ninfo, pmix_op_cbfunc_t cbfunc,
                         void* cbdata) {
  msg::MpiPublish m;
  for (size_t i = 0; i < ninfo; ++i) {
    if (std::strncmp(info[i].key, "pmix.", 5) == 0) continue;
    const pmix_value_t& v = info[i].value;
    msg::PublishedName n{info[i].key, "", proc->nspace, static_cast<int>(proc->rank)};
    if (v.type == PMIX_STRING) n.value = v.data.string ? v.data.string : "";
    else if (v.type == PMIX_BYTE_OBJECT) n.value = to_hex(v.data.bo.bytes, v.data.bo.size), n.bytes = true;
    else return PMIX_ERR_NOT_SUPPORTED;
    m.names.push_back(std::move(n));
  }
  m.first_read = directive(info, ninfo, PMIX_PERSISTENCE, -1) == PMIX_PERSIST_FIRST_READ;
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  with_state(proc, [&](ServerState& s, int) {
    if (!s.hooks.send) return;
    send_then_complete(s, std::move(m), cbfunc, cbdata);
    rc = PMIX_SUCCESS;
  });
  return rc;
}

pmix_status_t on_unpublish(const pmix_proc_t* proc, char** keys, const pmix_info_t[], size_t,
                           pmix_op_cbfunc_t cbfunc, void* cbdata) {
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  with_state(proc, [&](ServerState& s, int) {
    if (!s.hooks.send) return;
    send_then_complete(s, msg::MpiUnpublish{key_list(keys)}, cbfunc, cbdata);
    rc = PMIX_SUCCESS;
  });
  return rc;
}

// With PMIX_WAIT the answer comes once every key is published or
// PMIX_TIMEOUT passed.
pmix_status_t on_lookup(const pmix_proc_t* proc, char** keys, const pmix_info_t info[], size_t ninfo,
                        pmix_lookup_cbfunc_t cbfunc, void* cbdata) {
  const bool wait = directive(info, ninfo, PMIX_WAIT, 0) != 0 ||
                    (directive(info, ninfo, PMIX_WAIT, -1) == 0);  // PMIx's int form: 0 = all keys
  const int timeout_s = directive(info, ninfo, PMIX_TIMEOUT, 0);
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  with_state(proc, [&](ServerState& s, int rank) {
    if (!s.hooks.send) return;
    const uint64_t id = owe(s, &ServerState::next_lookup, &ServerState::lookups, PendingLookup{cbfunc, cbdata});
    post_send(s, msg::MpiLookup{id, rank, key_list(keys), wait, timeout_s > 0 ? timeout_s * 1000 : 0});
    rc = PMIX_SUCCESS;
  });
  return rc;
}

// The names found, else why not: "timed out ..." or not found.
void PmixServer::answer(const msg::MpiLookupReply& m) {
  PendingLookup p = take(state_.get(), &ServerState::lookups, m.id);
  if (!p.fn) return;
  if (m.error && !m.error->empty())
    return p.fn(m.error->rfind("timed out", 0) == 0 ? PMIX_ERR_TIMEOUT : PMIX_ERR_NOT_FOUND, nullptr, 0, p.cbdata);
  std::vector<pmix_pdata_t> data(m.names.size());
  for (size_t i = 0; i < m.names.size(); ++i) {
    const msg::PublishedName& n = m.names[i];
    PMIX_PDATA_CONSTRUCT(&data[i]);
    PMIX_LOAD_PROCID(&data[i].proc, n.nspace.c_str(), static_cast<pmix_rank_t>(n.rank));
    PMIX_LOAD_KEY(data[i].key, n.key.c_str());
    if (n.bytes.value_or(false)) {
      const std::string raw = from_hex(n.value);
      pmix_byte_object_t bo{const_cast<char*>(raw.data()), raw.size()};
      PMIx_Value_load(&data[i].value, &bo, PMIX_BYTE_OBJECT);  // copies
    } else {
      PMIx_Value_load(&data[i].value, n.value.c_str(), PMIX_STRING);
    }
  }
  // libpmix packs the reply before returning: the data may go afterwards.
  p.fn(PMIX_SUCCESS, data.data(), data.size(), p.cbdata);
  for (auto& d : data) PMIX_PDATA_DESTRUCT(&d);
}

}  // namespace dl::mpi::pmix
