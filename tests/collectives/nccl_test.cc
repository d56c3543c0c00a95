// The NCCL backend on real GPUs; SKIPs (with a warning saying why) where the
// backend is not built or no CUDA device is visible.
#include <thread>

#include "collectives/nccl/communicator.h"
#include "tests/collectives/rank_threads.h"

using namespace dl::coll;

TEST_CASE("collectives: NCCL all_reduce, broadcast and all_gather on device buffers", "[collectives][nccl]") {
  if (!nccl::available()) {
    WARN("SKIPPED: " << nccl::unavailable_reason());
    return;
  }
  // One rank per GPU (NCCL refuses two ranks on one device), at most 4.
  const int n = std::min(nccl::device_count(), 4);
  dl::rdzv::HashStore store;
  std::vector<std::string> errors(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) {
    ts.emplace_back([&, r] {
      try {
        nccl::NcclCommunicator c(store, r, n, r);
        const size_t count = 1 << 20;
        std::vector<float> host(count, float(r + 1)), got(count * n);
        nccl::DeviceBuffer d_in(count * sizeof(float)), d_out(count * n * sizeof(float));
        nccl::copy_to_device(d_in.data(), host.data(), count * sizeof(float));
        c.all_reduce(d_in.data(), d_out.data(), count, DataType::kFloat32, ReduceOp::kSum);
        c.synchronize();
        nccl::copy_to_host(got.data(), d_out.data(), count * sizeof(float));
        RCHECK(got[0] == float(n * (n + 1) / 2));
        RCHECK(got[count - 1] == float(n * (n + 1) / 2));
        c.all_gather(d_in.data(), d_out.data(), count, DataType::kFloat32);
        c.synchronize();
        nccl::copy_to_host(got.data(), d_out.data(), count * n * sizeof(float));
        for (int j = 0; j < n; ++j) RCHECK(got[j * count + 5] == float(j + 1));
        c.broadcast(d_in.data(), count, DataType::kFloat32, 0);
        c.synchronize();
        nccl::copy_to_host(host.data(), d_in.data(), count * sizeof(float));
        RCHECK(host[17] == 1.0f);
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
}

TEST_CASE("collectives: NCCL's default device is the rank's own GPU as dlaunch bound it", "[collectives][nccl]") {
  ::unsetenv("DLAUNCH_GPUS");
  ::unsetenv("LOCAL_RANK");
  CHECK(nccl::default_device(5, 4) == 1);  // no launcher: the rank
  ::setenv("LOCAL_RANK", "3", 1);
  CHECK(nccl::default_device(9, 8) == 3);  // torchrun's idiom
  // --gpus-per-rank 2, local rank 1 of 4 GPUs: its GPUs are 2,3 (not 1).
  ::setenv("LOCAL_RANK", "1", 1);
  ::setenv("DLAUNCH_GPUS", "2,3", 1);
  CHECK(nccl::default_device(1, 4) == 2);
  // --oversubscribe-gpus: local rank 5 on 4 GPUs owns device 1.
  ::setenv("LOCAL_RANK", "5", 1);
  ::setenv("DLAUNCH_GPUS", "1", 1);
  CHECK(nccl::default_device(5, 4) == 1);
  ::setenv("DLAUNCH_GPUS", "", 1);  // a host without GPUs bound
  CHECK(nccl::default_device(5, 4) == 1);
  ::unsetenv("DLAUNCH_GPUS");
  ::unsetenv("LOCAL_RANK");
}

TEST_CASE("collectives: NCCL's invalid usage says when the host's ranks share GPUs", "[collectives][nccl]") {
  ::setenv("LOCAL_WORLD_SIZE", "2", 1);
  ::setenv("DLAUNCH_GPUS", "0", 1);
  const std::string h = nccl::shared_gpu_hint(1);
  CHECK(h.find("this host's 2 ranks share 1 GPU (this one has GPU 0)") != std::string::npos);
  CHECK(h.find("run at most 1 rank per host for NCCL") != std::string::npos);
  ::setenv("LOCAL_WORLD_SIZE", "8", 1);
  ::unsetenv("DLAUNCH_GPUS");
  CHECK(nccl::shared_gpu_hint(4).find("this host's 8 ranks share 4 GPUs, and") != std::string::npos);
  CHECK(nccl::shared_gpu_hint(4).find("run at most 4 ranks per host") != std::string::npos);
  // One rank per GPU, or no GPU seen: nothing to add.
  CHECK(nccl::shared_gpu_hint(8) == "");
  CHECK(nccl::shared_gpu_hint(0) == "");
  ::unsetenv("LOCAL_WORLD_SIZE");
  CHECK(nccl::shared_gpu_hint(1) == "");
}

TEST_CASE("collectives: NCCL backend reports clearly when unusable", "[collectives][nccl]") {
  if (nccl::available()) return;  // covered by the real test above
  dl::rdzv::HashStore store;
  CHECK_THROWS_WITH(nccl::NcclCommunicator(store, 0, 1), Catch::Matchers::Contains("nccl:"));
  CHECK_THAT(nccl::unavailable_reason(), Catch::Matchers::StartsWith("nccl:"));
}

