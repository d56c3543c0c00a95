#include "rendezvous/pmix_client.h"

#include <string>

#include <dlfcn.h>
#include <pmix.h>

#include "errors/error.h"
#include "wire/shared_library.h"

namespace dl::rdzv {

namespace {
// libpmix is opened on first use, not linked: a program that never meets a
// PMIx server (dlaunch itself, a torchrun-style rank) does not load it, nor
// the hwloc/munge/event libraries it pulls in. The pmix headers still give
// the types; these are the only functions we call.
struct Pmix {
  decltype(&PMIx_Init) init = nullptr;
  decltype(&PMIx_Get) get = nullptr;
  decltype(&PMIx_Finalize) finalize = nullptr;
  decltype(&PMIx_Error_string) error_string = nullptr;
  decltype(&PMIx_Value_destruct) value_destruct = nullptr;
};

template <class F>
void resolve(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(::dlsym(lib, name));
  if (!fn)
    throw IoError(std::string("PMIX_RANK/PMIX_NAMESPACE are set but the loaded libpmix.so.2 has no ") + name +
                  "; install a libpmix of PMIx 4 or later (Debian: apt install libpmix2)");
}

// Opens libpmix.so.2 from the loader's paths, else from the dir the build
// found it in. Throws IoError saying what is missing and what to install.
Pmix load_pmix() {
  Pmix api;
  const auto loaded =
      wire::open_shared_library({"libpmix.so.2", DLAUNCH_PMIX_LIBDIR "/libpmix.so.2"}, RTLD_NOW | RTLD_GLOBAL);
  void* lib = loaded.handle;
  if (!lib)
    throw IoError("PMIX_RANK/PMIX_NAMESPACE are set but libpmix cannot be loaded (" + loaded.errors.front() +
                  "); install libpmix (Debian: apt install libpmix2), or run without the PMIx variables");
  resolve(lib, "PMIx_Init", api.init);
  resolve(lib, "PMIx_Get", api.get);
  resolve(lib, "PMIx_Finalize", api.finalize);
  resolve(lib, "PMIx_Error_string", api.error_string);
  resolve(lib, "PMIx_Value_destruct", api.value_destruct);
  return api;  // the library stays open: PMIx keeps threads of its own
}

// Loaded once; a failed load throws and is tried again on the next call.
const Pmix& pmix() {
  static const Pmix api = load_pmix();
  return api;
}

// One PMIx_Get as an int; -1 when the server does not have the key.
int get_int(const Pmix& px, const pmix_proc_t& proc, const char* key) {
  pmix_value_t* val = nullptr;
  if (px.get(&proc, key, nullptr, 0, &val) != PMIX_SUCCESS || !val) return -1;
  int out = -1;
  switch (val->type) {
    case PMIX_UINT32: out = static_cast<int>(val->data.uint32); break;
    case PMIX_UINT16: out = val->data.uint16; break;
    case PMIX_INT: out = val->data.integer; break;
    case PMIX_PROC_RANK: out = static_cast<int>(val->data.rank); break;
    default: break;
  }
  px.value_destruct(val);  // PMIX_VALUE_RELEASE, through the loaded library
  pmix_free(val);
  return out;
}
}  // namespace

PmixJobInfo query_pmix() {
  const Pmix& px = pmix();
  pmix_proc_t me;
  pmix_status_t rc = px.init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS)
    throw IoError(std::string("PMIx_Init failed (") + px.error_string(rc) +
                  "): PMIX_RANK/PMIX_NAMESPACE are set but no PMIx server answers");
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  PmixJobInfo info;
  info.rank = static_cast<int>(me.rank);
  info.world_size = get_int(px, job, PMIX_JOB_SIZE);
  info.local_rank = get_int(px, me, PMIX_LOCAL_RANK);
  info.local_world_size = get_int(px, job, PMIX_LOCAL_SIZE);
  info.node_rank = get_int(px, me, PMIX_NODEID);
  px.finalize(nullptr, 0);
  if (info.world_size < 0) throw IoError("PMIx_Get(PMIX_JOB_SIZE) failed: the PMIx server does not know the job size");
  return info;
}

}  // namespace dl::rdzv
