// The one adapter for the CUDA driver API (libcuda.so.1, through dlopen).
#include "doctor/cuda_probe.h"

#include <dlfcn.h>

#include <iostream>
#include <string>

#include "wire/record.h"
#include "wire/shared_library.h"

namespace dl::doctor {

namespace {
// The few driver API entry points used, by their documented C signatures
// (CUresult is an int enum; 0 is CUDA_SUCCESS).
using InitFn = int (*)(unsigned);
using CountFn = int (*)(int*);
using VersionFn = int (*)(int*);
using ErrorTextFn = int (*)(int, const char**);

template <typename Fn>
Fn symbol(void* lib, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(lib, name));
}
}  // namespace

GpuProbe probe_cuda_driver() {
  GpuProbe out;
  out.error_name = "", out.driver_version = 0;
  const auto loaded = wire::open_shared_library({"libcuda.so.1"}, RTLD_NOW | RTLD_LOCAL);
  void* lib = loaded.handle;
  if (!lib) {
    out.error = "libcuda.so.1 cannot be loaded (" + loaded.why() + ")";
    return out;
  }
  auto init = symbol<InitFn>(lib, "cuInit");
  auto count = symbol<CountFn>(lib, "cuDeviceGetCount");
  auto version = symbol<VersionFn>(lib, "cuDriverGetVersion");
  auto name = symbol<ErrorTextFn>(lib, "cuGetErrorName");
  auto text = symbol<ErrorTextFn>(lib, "cuGetErrorString");
  if (!init || !count) {
    out.error = "libcuda.so.1 has no cuInit or cuDeviceGetCount (not an NVIDIA driver library?)";
    return out;
  }
  int v = 0;
  if (version && version(&v) == 0) out.driver_version = v;
  auto fail = [&](const char* call, int rc) {
    const char* n = nullptr;
    const char* t = nullptr;
    if (name) name(rc, &n);
    if (text) text(rc, &t);
    out.error_name = n ? n : "";
    out.error = std::string(call) + " failed: " + (n ? n : "error " + std::to_string(rc)) + (t ? std::string(" (") + t + ")" : "");
    return out;
  };
  if (int rc = init(0); rc != 0) return fail("cuInit", rc);
  int n = 0;
  if (int rc = count(&n); rc != 0) return fail("cuDeviceGetCount", rc);
  out.count = n;
  if (n == 0) out.error = "cuDeviceGetCount found no device";
  return out;
}

int run_cuda_probe() {
  std::cout << wire::encode_record(probe_cuda_driver()) << "\n";
  return 0;
}

}  // namespace dl::doctor
