#include "rendezvous/pmix_client.h"

#include <string>

#include "errors/error.h"

#if DLAUNCH_HAVE_PMIX
#include <pmix.h>
#endif

namespace dl::rdzv {

#if DLAUNCH_HAVE_PMIX
namespace {
// One PMIx_Get as an int; -1 when the server does not have the key.
int get_int(const pmix_proc_t& proc, const char* key) {
  pmix_value_t* val = nullptr;
  if (PMIx_Get(&proc, key, nullptr, 0, &val) != PMIX_SUCCESS || !val) return -1;
  int out = -1;
  switch (val->type) {
    case PMIX_UINT32: out = static_cast<int>(val->data.uint32); break;
    case PMIX_UINT16: out = val->data.uint16; break;
    case PMIX_INT: out = val->data.integer; break;
    case PMIX_PROC_RANK: out = static_cast<int>(val->data.rank); break;
    default: break;
  }
  PMIX_VALUE_RELEASE(val);
  return out;
}
}  // namespace

PmixJobInfo query_pmix() {
  pmix_proc_t me;
  pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS)
    throw IoError(std::string("PMIx_Init failed (") + PMIx_Error_string(rc) +
                  "): PMIX_RANK/PMIX_NAMESPACE are set but no PMIx server answers");
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  PmixJobInfo info;
  info.rank = static_cast<int>(me.rank);
  info.world_size = get_int(job, PMIX_JOB_SIZE);
  info.local_rank = get_int(me, PMIX_LOCAL_RANK);
  info.local_world_size = get_int(job, PMIX_LOCAL_SIZE);
  info.node_rank = get_int(me, PMIX_NODEID);
  PMIx_Finalize(nullptr, 0);
  if (info.world_size < 0) throw IoError("PMIx_Get(PMIX_JOB_SIZE) failed: the PMIx server does not know the job size");
  return info;
}
#else
PmixJobInfo query_pmix() {
  throw IoError("PMIX_RANK/PMIX_NAMESPACE are set but this dlaunch was built without libpmix");
}
#endif

}  // namespace dl::rdzv
