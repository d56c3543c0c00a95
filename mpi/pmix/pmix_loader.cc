// The forwarders of pmix_loader.h: one per libpmix and hwloc function
// mpi/pmix calls, with the library's own prototype, resolved on first call.
#include "mpi/pmix/pmix_loader.h"

#include <dlfcn.h>
#include <hwloc.h>
#include <pmix_server.h>

#include <atomic>
#include <mutex>
#include <string>

#include "errors/error.h"
#include "wire/shared_library.h"

namespace dl::mpi::pmix {

#if DLAUNCH_LAZY_PMIX
namespace {
struct Library {
  const char* soname;
  const char* libdir;   // where the build found it
  const char* package;  // what to install (Debian)
  void* handle;
  std::string error;
};
Library g_pmix{DLAUNCH_PMIX_SONAME, DLAUNCH_PMIX_LIBDIR, "libpmix2", nullptr, ""};
Library g_hwloc{DLAUNCH_HWLOC_SONAME, DLAUNCH_HWLOC_LIBDIR, "libhwloc15", nullptr, ""};
std::once_flag g_once;

void load_all() {
  std::call_once(g_once, [] {
    for (Library* lib : {&g_hwloc, &g_pmix}) {
      // RTLD_GLOBAL: libpmix's own plugins (and hwloc's) resolve against them.
      // RTLD_LAZY, as ld.so binds a linked library: RTLD_NOW resolved every
      // function of libpmix up front, about 1 ms of CPU per job of /bin/true.
      // By SONAME (ld.so's cache and paths), then where the build found it:
      // dlaunch-agent has no RUNPATH, whose directories ld.so searched for
      // libc at every agent start (docs/benchmarks.md).
      const auto l = wire::open_shared_library(
          {lib->soname, *lib->libdir ? std::string(lib->libdir) + "/" + lib->soname : ""}, RTLD_LAZY | RTLD_GLOBAL);
      lib->handle = l.handle;
      if (lib->handle == nullptr)  // the SONAME's failure is the one to tell
        lib->error = std::string("cannot load ") + lib->soname + ", which the PMIx server needs: " + l.errors.front() +
                     "; install " + lib->package + " or run with --mpi pmi/none";
    }
  });
}

void* handle(Library& lib) {
  load_all();
  if (lib.handle == nullptr) throw IoError(lib.error);
  return lib.handle;
}
}  // namespace

void preload() {
  handle(g_hwloc);
  handle(g_pmix);
}

bool libpmix_loaded() { return wire::shared_library_loaded(DLAUNCH_PMIX_SONAME); }

// The address of `name` in `lib`; throws IoError when the library or the
// function is missing. Cached by the caller.
void* symbol(Library& lib, const char* name) {
  void* f = ::dlsym(handle(lib), name);
  if (f == nullptr)
    throw IoError(std::string("the ") + lib.soname + " loaded has no " + name +
                  ": it is older than the one dlaunch-agent was built with");
  return f;
}
void* pmix_symbol(const char* name) { return symbol(g_pmix, name); }
void* hwloc_symbol(const char* name) { return symbol(g_hwloc, name); }
#else
void preload() {}
bool libpmix_loaded() { return true; }
#endif

}  // namespace dl::mpi::pmix

#if DLAUNCH_LAZY_PMIX
// One forwarder: the library's prototype (return type, name, parameters) and
// the arguments to pass on. The address found is kept, so later calls cost
// one atomic load and an indirect call.
#define DL_FORWARD(lookup, ret, name, params, args)                                              \
  extern "C" ret name params {                                                                   \
    static std::atomic<void*> dl_slot_{nullptr};                                                 \
    void* dl_fn_ = dl_slot_.load(std::memory_order_acquire);                                     \
    if (dl_fn_ == nullptr) dl_slot_.store(dl_fn_ = dl::mpi::pmix::lookup(#name), std::memory_order_release); \
    return reinterpret_cast<decltype(&::name)>(dl_fn_) args;                                     \
  }
#define DL_PMIX(ret, name, params, args) DL_FORWARD(pmix_symbol, ret, name, params, args)
#define DL_HWLOC(ret, name, params, args) DL_FORWARD(hwloc_symbol, ret, name, params, args)

DL_PMIX(const char*, PMIx_Error_string, (pmix_status_t s), (s))
DL_PMIX(const char*, PMIx_Get_version, (void), ())
DL_PMIX(void, PMIx_Value_destruct, (pmix_value_t* v), (v))
DL_PMIX(pmix_status_t, PMIx_Value_load, (pmix_value_t* v, const void* d, pmix_data_type_t t), (v, d, t))
DL_PMIX(pmix_status_t, PMIx_generate_ppn, (const char* in, char** out), (in, out))
DL_PMIX(pmix_status_t, PMIx_generate_regex, (const char* in, char** out), (in, out))
DL_PMIX(void, PMIx_server_deregister_nspace, (const pmix_nspace_t ns, pmix_op_cbfunc_t cb, void* d), (ns, cb, d))
DL_PMIX(pmix_status_t, PMIx_server_dmodex_request, (const pmix_proc_t* p, pmix_dmodex_response_fn_t cb, void* d),
        (p, cb, d))
DL_PMIX(pmix_status_t, PMIx_server_finalize, (void), ())
DL_PMIX(pmix_status_t, PMIx_server_init, (pmix_server_module_t* m, pmix_info_t info[], size_t n), (m, info, n))
DL_PMIX(pmix_status_t, PMIx_server_register_client,
        (const pmix_proc_t* p, uid_t u, gid_t g, void* o, pmix_op_cbfunc_t cb, void* d), (p, u, g, o, cb, d))
DL_PMIX(pmix_status_t, PMIx_server_register_nspace,
        (const pmix_nspace_t ns, int nlocal, pmix_info_t info[], size_t n, pmix_op_cbfunc_t cb, void* d),
        (ns, nlocal, info, n, cb, d))
DL_PMIX(pmix_status_t, PMIx_server_setup_fork, (const pmix_proc_t* p, char*** env), (p, env))

DL_HWLOC(void, hwloc_free_xmlbuffer, (hwloc_topology_t t, char* b), (t, b))
DL_HWLOC(void, hwloc_topology_destroy, (hwloc_topology_t t), (t))
DL_HWLOC(int, hwloc_topology_export_xmlbuffer, (hwloc_topology_t t, char** b, int* n, unsigned long f), (t, b, n, f))
DL_HWLOC(int, hwloc_topology_init, (hwloc_topology_t* t), (t))
DL_HWLOC(int, hwloc_topology_load, (hwloc_topology_t t), (t))
DL_HWLOC(int, hwloc_topology_set_flags, (hwloc_topology_t t, unsigned long f), (t, f))
DL_HWLOC(int, hwloc_topology_set_io_types_filter, (hwloc_topology_t t, enum hwloc_type_filter_e f), (t, f))
#endif  // DLAUNCH_LAZY_PMIX
