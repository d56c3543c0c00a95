// dlaunch-hello: the demo rank. Prints its identity (read the way any
// program may: env://), meets every other rank at a barrier in the job's
// store, and says so. Run it with: dlaunch -n 4 build/bin/dlaunch-hello
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "errors/error.h"
#include "rendezvous/bootstrap.h"
#include "wire/host.h"

int main() {
  using namespace std::chrono_literals;
  try {
    auto id = dl::rdzv::identity_from_env(dl::rdzv::process_environment());
    const std::string host = dl::wire::host_name();
    const char* gpu = std::getenv("CUDA_VISIBLE_DEVICES");
    std::printf("rank %d of %d on %s: local rank %d of %d, node %d, master %s:%d, gpu %s (identity from %s)\n",
                id.rank, id.world_size, host.c_str(), id.local_rank, id.local_world_size, id.node_rank,
                id.master_addr.c_str(), id.master_port, gpu ? gpu : "none", id.source.c_str());
    std::fflush(stdout);
    auto store = dl::rdzv::connect_store("env://", id.rank, id.world_size, 30s);
    // One request to the job's store, answered when every rank has arrived.
    store->describe_key("demo/arrived", "dlaunch-hello's barrier");
    store->barrier("demo/arrived", id.world_size);
    std::printf("rank %d passed the barrier with all %d ranks\n", id.rank, id.world_size);
    return 0;
  } catch (const dl::Error& e) {
    std::fprintf(stderr, "dlaunch-hello: %s\n", e.what());
    return 1;
  }
}
