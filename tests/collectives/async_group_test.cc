// Async handles, ordering between async and sync calls, and sub-groups.
#include "errors/error.h"
#include "tests/collectives/rank_threads.h"

using namespace dl::coll;
using namespace dl::coll::test;

TEST_CASE("collectives: async operations overlap the caller and complete in order", "[collectives]") {
  run_ranks(4, [](Communicator& c) {
    const size_t n = 200000;
    std::vector<int32_t> a(n, c.rank() + 1), b(n, 10 * (c.rank() + 1));
    std::vector<int64_t> g(4, -1);
    int64_t mine = c.rank() * 100;
    auto w1 = c.all_reduce_async(a.data(), a.data(), n, DataType::kInt32, ReduceOp::kSum);
    auto w2 = c.all_reduce_async(b.data(), b.data(), n, DataType::kInt32, ReduceOp::kMax);
    auto w3 = c.all_gather_async(&mine, g.data(), 1, DataType::kInt64);
    // The caller keeps working meanwhile.
    volatile double x = 0;
    for (int i = 0; i < 100000; ++i) x = x + i;
    int32_t s = 1;
    c.all_reduce(&s, &s, 1, DataType::kInt32, ReduceOp::kSum);  // sync: runs after the three above
    RCHECK(w1->is_completed());
    RCHECK(w2->is_completed());
    w1->wait(std::chrono::milliseconds(5000));
    w2->wait();
    w3->wait();
    RCHECK(s == 4);
    RCHECK(a[0] == 10);
    RCHECK(a[n - 1] == 10);
    RCHECK(b[n / 2] == 40);
    RCHECK((g == std::vector<int64_t>{0, 100, 200, 300}));
    auto w4 = c.barrier_async();
    w4->wait(std::chrono::milliseconds(5000));
    RCHECK(w4->is_completed());
  }, test_options(true));
}

TEST_CASE("collectives: Work::wait with a short timeout throws and can be retried", "[collectives]") {
  run_ranks(2, [](Communicator& c) {
    int32_t v = 1;
    if (c.rank() == 0) {
      auto w = c.all_reduce_async(&v, &v, 1, DataType::kInt32, ReduceOp::kSum);
      bool threw = false;
      try { w->wait(std::chrono::milliseconds(50)); } catch (const dl::TimeoutError&) { threw = true; }
      RCHECK(threw);
      RCHECK(!w->is_completed());
      w->wait(std::chrono::milliseconds(10000));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      c.all_reduce(&v, &v, 1, DataType::kInt32, ReduceOp::kSum);
    }
    RCHECK(v == 2);
  }, test_options(false));
}

TEST_CASE("collectives: sub-groups reduce over their members only", "[collectives]") {
  for (bool shm : {false, true}) {
    run_ranks(5, [](Communicator& c) {
      auto g = c.new_group({4, 1, 3});
      bool member = c.rank() == 4 || c.rank() == 1 || c.rank() == 3;
      RCHECK((g != nullptr) == member);
      if (g) {
        RCHECK(g->size() == 3);
        RCHECK(g->rank() == (c.rank() == 4 ? 0 : c.rank() == 1 ? 1 : 2));
        int64_t v = c.rank();
        g->all_reduce(&v, &v, 1, DataType::kInt64, ReduceOp::kSum);
        RCHECK(v == 8);
        int64_t root_val = c.rank() == 1 ? 42 : 0;
        g->broadcast(&root_val, 1, DataType::kInt64, 1);  // group rank 1 = world rank 1
        RCHECK(root_val == 42);
      }
      // Two disjoint groups at once, then the parent still works.
      auto even = c.new_group({0, 2, 4});
      auto odd = c.new_group({1, 3});
      auto& mine = c.rank() % 2 == 0 ? even : odd;
      RCHECK(mine != nullptr);
      int32_t x = 1;
      mine->all_reduce(&x, &x, 1, DataType::kInt32, ReduceOp::kSum);
      RCHECK(x == (c.rank() % 2 == 0 ? 3 : 2));
      int32_t y = 1;
      c.all_reduce(&y, &y, 1, DataType::kInt32, ReduceOp::kSum);
      RCHECK(y == 5);
    }, test_options(shm));
  }
}
