#pragma once
// Test helpers: ranks as threads over one HashStore. The independent
// reference (dtype codec, inputs, expected values, RCHECK) is reference.h.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/communicator.h"
#include "tests/collectives/reference.h"
#include "rendezvous/hash_store.h"

namespace dl::coll::test {

inline Options test_options(bool shm) {
  Options o;
  o.timeout = std::chrono::milliseconds(20000);
  o.use_shm = shm;
  o.token = "test-token";
  return o;
}

// Runs body(comm) for ranks 0..n-1 on n threads, each with its own
// Communicator; returns each rank's error message ("" when it succeeded).
inline std::vector<std::string> run_ranks_collect(int n, const std::function<void(Communicator&)>& body,
                                                  Options opt, rdzv::HashStore* shared = nullptr) {
  rdzv::HashStore own;
  rdzv::HashStore& store = shared ? *shared : own;
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        Communicator comm(store, r, n, opt);
        body(comm);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        if (errors[r].empty()) errors[r] = "(empty error)";
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Same, failing the test with every rank's error.
inline void run_ranks(int n, const std::function<void(Communicator&)>& body, Options opt) {
  auto errors = run_ranks_collect(n, body, opt);
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << " of " << n << ": " << errors[r]);
    CHECK(errors[r].empty());
  }
}

}  // namespace dl::coll::test
