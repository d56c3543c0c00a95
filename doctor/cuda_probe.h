#pragma once
// What the CUDA driver sees on this host, through libcuda.so.1 loaded at run
// time (dlopen): dlaunch links no CUDA library, so it starts on hosts without
// one, and a missing or mismatched driver is a finding, not a crash. The peer
// runs it in a child (`dlaunch doctor --cuda-probe`), so a driver that hangs
// or crashes costs that child only.
//
//   {"count": N, "error": "" | why none, "error_name": "CUDA_ERROR_..." | "",
//    "driver_version": 12040 | 0}   (a GpuProbe, doctor/records.h)
#include "doctor/records.h"

namespace dl::doctor {

GpuProbe probe_cuda_driver();

// `dlaunch doctor --cuda-probe`: prints probe_cuda_driver() as one line; exit 0.
int run_cuda_probe();

}  // namespace dl::doctor
