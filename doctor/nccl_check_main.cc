// dlaunch-nccl-check: the doctor's NCCL all_reduce (stage 6), one rank per
// GPU, started by `dlaunch doctor` as a dlaunch job. A program of its own:
// its --probe asks the CUDA runtime it links (dlaunch links none and starts on
// hosts without CUDA); a rank's NCCL and device buffers are the backend's
// (collectives/nccl/communicator.h), loaded as for `dlaunch bench`. Built only
// with the NCCL backend (DLAUNCH_HAVE_NCCL), installed next to dlaunch.
//
//   dlaunch-nccl-check --probe             {"runtime_version","count","error"}: what the
//                                          CUDA runtime it was built with sees here
//   dlaunch-nccl-check [--bytes N] [--iters K]
//                                          a rank (env:// from dlaunch): all_reduce of
//                                          N bytes of float32 on its GPU (LOCAL_RANK);
//                                          rank 0 prints {"ranks","bytes","time_us",
//                                          "algbw","busbw","wrong"} (GB/s); exit 1 if wrong
#include <cuda_runtime.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "collectives/nccl/communicator.h"
#include "doctor/records.h"
#include "errors/error.h"
#include "errors/exit_codes.h"
#include "rendezvous/bootstrap.h"
#include "wire/record.h"

namespace {
using namespace dl;

int probe() {
  int version = 0, n = 0;
  cudaRuntimeGetVersion(&version);
  const cudaError_t rc = cudaGetDeviceCount(&n);
  doctor::GpuProbe out;
  out.runtime_version = version;
  out.count = rc == cudaSuccess ? n : 0;
  if (rc != cudaSuccess) out.error = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")";
  std::cout << wire::encode_record(out) << "\n";
  return 0;
}

// Rank r's input element i; the sum over n ranks is exact in float32.
float input(int rank, size_t i) { return static_cast<float>(rank + 1 + static_cast<int>(i % 7)); }
float expected(int n, size_t i) { return static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7)); }

int rank_main(size_t bytes, int iters) {
  const auto timeout = std::chrono::milliseconds(120000);
  const rdzv::Identity id = rdzv::identity_from_env(rdzv::process_environment());
  auto store = rdzv::connect_store("env://", id.rank, id.world_size, timeout);
  coll::nccl::NcclCommunicator comm(*store, id.rank, id.world_size, -1, "dlaunch-doctor-nccl", timeout);
  const int r = comm.rank(), n = comm.size();
  const size_t count = bytes / sizeof(float);
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = input(r, i);
  coll::nccl::DeviceBuffer in(count * sizeof(float)), out(count * sizeof(float)), wrong_dev(sizeof(long long));
  coll::nccl::copy_to_device(in.data(), host.data(), count * sizeof(float));
  auto once = [&] {
    comm.all_reduce(in.data(), out.data(), count, coll::DataType::kFloat32, coll::ReduceOp::kSum);
    comm.synchronize();
  };
  once();
  once();  // warm-up: NCCL connects its channels on the first calls
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < iters; ++k) once();
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  coll::nccl::copy_to_host(host.data(), out.data(), count * sizeof(float));
  long long wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += host[i] == expected(n, i) ? 0 : 1;
  coll::nccl::copy_to_device(wrong_dev.data(), &wrong, sizeof wrong);
  comm.all_reduce(wrong_dev.data(), wrong_dev.data(), 1, coll::DataType::kInt64, coll::ReduceOp::kSum);
  comm.synchronize();
  coll::nccl::copy_to_host(&wrong, wrong_dev.data(), sizeof wrong);
  if (r == 0) {
    const double algbw = static_cast<double>(count * sizeof(float)) / us / 1e3;  // B/us = MB/s; /1e3: GB/s
    const double busbw = algbw * 2.0 * (n - 1) / n;                             // nccl-tests' all_reduce factor
    const doctor::NcclCheckResult result{n, count * sizeof(float), us, algbw, busbw, wrong};
    std::cout << wire::encode_record(result) << "\n" << std::flush;
  }
  return wrong == 0 ? exit_codes::kOk : exit_codes::kFailure;
}
}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 4 << 20;
  int iters = 5;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--probe") return probe();
      if ((a == "--bytes" || a == "--iters") && i + 1 < argc) {
        const long v = std::strtol(argv[++i], nullptr, 10);
        if (v <= 0) throw UsageError(a + " wants a positive number");
        if (a == "--bytes") bytes = static_cast<size_t>(v);
        else iters = static_cast<int>(v);
        continue;
      }
      throw UsageError("dlaunch-nccl-check: unknown argument '" + a + "' (it is started by `dlaunch doctor`)");
    }
    return rank_main(bytes, iters);
  } catch (const Error& e) {
    std::cerr << "dlaunch-nccl-check: error: " << e.what() << "\n";
    return exit_code_for(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "dlaunch-nccl-check: error: " << e.what() << "\n";
    return exit_codes::kFailure;
  }
}
