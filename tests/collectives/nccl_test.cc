// The NCCL backend on real GPUs; SKIPs (with a warning saying why) where the
// backend is not built or no CUDA device is visible.
#include <thread>

#include "collectives/nccl/communicator.h"
#include "tests/collectives/rank_threads.h"

#if DLAUNCH_HAVE_NCCL
#include <cuda_runtime.h>
#endif

using namespace dl::coll;

TEST_CASE("collectives: NCCL all_reduce, broadcast and all_gather on device buffers", "[collectives][nccl]") {
  if (!nccl::available()) {
    WARN("SKIPPED: " << (DLAUNCH_HAVE_NCCL ? "no CUDA device is visible on this host"
                                           : "dlaunch was built without NCCL (DLAUNCH_HAVE_NCCL=0)"));
    return;
  }
#if DLAUNCH_HAVE_NCCL
  // One rank per GPU (NCCL refuses two ranks on one device), at most 4.
  const int n = std::min(nccl::device_count(), 4);
  dl::rdzv::HashStore store;
  std::vector<std::string> errors(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) {
    ts.emplace_back([&, r] {
      try {
        nccl::NcclCommunicator c(store, r, n, r);
        cudaStream_t s;
        cudaStreamCreate(&s);
        const size_t count = 1 << 20;
        std::vector<float> host(count, float(r + 1)), got(count * n);
        float *d_in, *d_out;
        cudaMalloc(&d_in, count * sizeof(float));
        cudaMalloc(&d_out, count * n * sizeof(float));
        cudaMemcpy(d_in, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
        c.all_reduce(d_in, d_out, count, DataType::kFloat32, ReduceOp::kSum, s);
        c.synchronize(s);
        cudaMemcpy(got.data(), d_out, count * sizeof(float), cudaMemcpyDeviceToHost);
        RCHECK(got[0] == float(n * (n + 1) / 2));
        RCHECK(got[count - 1] == float(n * (n + 1) / 2));
        c.all_gather(d_in, d_out, count, DataType::kFloat32, s);
        c.synchronize(s);
        cudaMemcpy(got.data(), d_out, count * n * sizeof(float), cudaMemcpyDeviceToHost);
        for (int j = 0; j < n; ++j) RCHECK(got[j * count + 5] == float(j + 1));
        c.broadcast(d_in, count, DataType::kFloat32, 0, s);
        c.synchronize(s);
        cudaMemcpy(host.data(), d_in, count * sizeof(float), cudaMemcpyDeviceToHost);
        RCHECK(host[17] == 1.0f);
        cudaFree(d_in);
        cudaFree(d_out);
        cudaStreamDestroy(s);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK(errors[r].empty());
  }
#endif
}

TEST_CASE("collectives: NCCL backend reports clearly when unusable", "[collectives][nccl]") {
  if (nccl::available()) return;  // covered by the real test above
  dl::rdzv::HashStore store;
  CHECK_THROWS_WITH(nccl::NcclCommunicator(store, 0, 1), Catch::Matchers::Contains("nccl:"));
}
