// Mismatched calls, dead ranks and silent ranks fail every rank, naming the
// culprit, within the timeout: never a hang, never silent corruption.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "collectives/shm/pair.h"
#include "errors/error.h"
#include "tests/collectives/rank_threads.h"

using namespace dl::coll;
using namespace dl::coll::test;
using Catch::Matchers::Contains;
using SClock = std::chrono::steady_clock;

TEST_CASE("collectives: mismatched counts and dtypes fail on every rank", "[collectives]") {
  for (bool shm : {false, true}) {
    auto errors = run_ranks_collect(4, [](Communicator& c) {
      std::vector<float> buf(8, 1.0f);
      c.all_reduce(buf.data(), buf.data(), 8, DataType::kFloat32, ReduceOp::kSum);  // fine
      size_t n = c.rank() == 2 ? 5 : 4;
      c.all_reduce(buf.data(), buf.data(), n, DataType::kFloat32, ReduceOp::kSum);
    }, test_options(shm));
    for (int r = 0; r < 4; ++r) {
      INFO("rank " << r << ": " << errors[r]);
      CHECK_THAT(errors[r], Contains("mismatch") && Contains("count=5"));
    }
    errors = run_ranks_collect(3, [](Communicator& c) {
      std::vector<double> buf(4, 1.0);
      c.broadcast(buf.data(), 4, c.rank() == 0 ? DataType::kFloat64 : DataType::kInt64, 0);
    }, test_options(shm));
    for (int r = 0; r < 3; ++r) {
      INFO("rank " << r << ": " << errors[r]);
      CHECK_THAT(errors[r], Contains("mismatch") && Contains("float64") && Contains("int64"));
    }
  }
}

TEST_CASE("collectives: small all_reduce over TCP checks the header its messages carry", "[collectives]") {
  // Below the ring threshold the header travels with recursive doubling's
  // messages instead of a separate round. Odd world sizes fold ranks 0, 2, ...
  // into their neighbours first; the odd one out is a folded rank (0), a
  // participant (1) or the last rank, with another count, dtype or op.
  for (int n : {2, 3, 5}) {
    for (int odd : {0, 1, n - 1}) {
      INFO("world size " << n << ", rank " << odd << " differs");
      auto errors = run_ranks_collect(n, [odd](Communicator& c) {
        std::vector<int32_t> buf(16, 1);
        c.all_reduce(buf.data(), buf.data(), 16, DataType::kInt32, ReduceOp::kSum);  // fine
        if (buf[0] != c.size()) throw std::runtime_error("first all_reduce gave a wrong sum");
        const bool me = c.rank() == odd;
        c.all_reduce(buf.data(), buf.data(), me ? 7 : 8, DataType::kInt32, me ? ReduceOp::kMax : ReduceOp::kSum);
      }, test_options(false));
      for (int r = 0; r < n; ++r) {
        INFO("rank " << r << ": " << errors[r]);
        CHECK_THAT(errors[r], Contains("mismatch") && Contains("count=7"));
      }
    }
  }
}

TEST_CASE("collectives: send/recv with a different count fails the receiver", "[collectives]") {
  auto errors = run_ranks_collect(2, [](Communicator& c) {
    std::vector<int32_t> buf(10, 7);
    if (c.rank() == 0) c.send(buf.data(), 10, DataType::kInt32, 1);
    else c.recv(buf.data(), 9, DataType::kInt32, 0);
  }, test_options(false));
  CHECK_THAT(errors[1], Contains("send/recv mismatch") && Contains("count=10"));
}

TEST_CASE("collectives: a rank that dies makes every other rank fail naming it", "[collectives]") {
  for (bool shm : {false, true}) {
    Options o = test_options(shm);
    o.timeout = std::chrono::milliseconds(10000);
    auto start = SClock::now();
    auto errors = run_ranks_collect(5, [](Communicator& c) {
      std::vector<float> buf(100000, 1.0f);
      c.all_reduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
      if (c.rank() == 3) return;  // "dies": its communicator closes every connection
      for (int i = 0; i < 3; ++i)
        c.all_reduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
    }, o);
    auto took = SClock::now() - start;
    CHECK(took < std::chrono::milliseconds(5000));  // well before the 10 s timeout
    CHECK(errors[3].empty());
    for (int r : {0, 1, 2, 4}) {
      INFO("shm " << shm << " rank " << r << ": " << errors[r]);
      CHECK_THAT(errors[r], Contains("rank 3 on host") && Contains("closed its connection"));
    }
  }
}

TEST_CASE("collectives: a rank that never calls makes the others time out naming it", "[collectives]") {
  for (bool shm : {false, true}) {
    INFO("shm " << shm);
    Options o = test_options(shm);
    o.timeout = std::chrono::milliseconds(700);
    auto start = SClock::now();
    int32_t late = 0;  // rank 1's result, when its call completes
    auto errors = run_ranks_collect(3, [&late](Communicator& c) {
      int32_t v = 1;
      if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      c.all_reduce(&v, &v, 1, DataType::kInt32, ReduceOp::kSum);
      if (c.rank() == 1) late = v;
    }, o);
    CHECK(SClock::now() - start < std::chrono::milliseconds(4000));
    for (int r : {0, 2}) {
      INFO("rank " << r << ": " << errors[r]);
      CHECK_THAT(errors[r], Contains("timed out") || Contains("rank 1"));
      CHECK_THAT(errors[r], Contains("rank 1"));
    }
    INFO("rank 1: " << errors[1] << ", result " << late);
    // Its peers aborted meanwhile: it fails, or, over TCP, where a small
    // all_reduce sends its header with its data, it may still find all its
    // peers' messages in its socket buffers and finish, but never with a
    // wrong sum.
    if (shm) CHECK_FALSE(errors[1].empty());
    else CHECK((!errors[1].empty() || late == 3));
  }
}

TEST_CASE("collectives: an aborted communicator refuses later calls", "[collectives]") {
  auto errors = run_ranks_collect(2, [](Communicator& c) {
    int32_t v = 1;
    c.abort("test abort");
    try {
      c.all_reduce(&v, &v, 1, DataType::kInt32, ReduceOp::kSum);
    } catch (const dl::RemoteError& e) {
      throw;
    }
  }, test_options(false));
  CHECK_THAT(errors[0], Contains("aborted") && Contains("test abort"));
  CHECK_THAT(errors[1], Contains("aborted") && Contains("test abort"));
}

// Two ends of one shared-memory pair in this process, as two ranks on one
// host have them: one segment mapped twice, a socketpair as their doorbells.
namespace {
struct ShmPairEnds {
  std::unique_ptr<dl::coll::shm::ShmPair> a, b;
  ShmPairEnds() {
    const int fd = ::memfd_create("dlcoll-test", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(dl::coll::shm::ShmPair::segment_bytes())) == 0);
    void* m[2];
    for (auto& p : m) {
      p = ::mmap(nullptr, dl::coll::shm::ShmPair::segment_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      REQUIRE(p != MAP_FAILED);
    }
    ::close(fd);
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    a = std::make_unique<dl::coll::shm::ShmPair>(m[0], true, dl::wire::Socket(sv[0]), PeerInfo{1, "h", "b:1"});
    b = std::make_unique<dl::coll::shm::ShmPair>(m[1], false, dl::wire::Socket(sv[1]), PeerInfo{0, "h", "a:1"});
  }
};
}  // namespace

TEST_CASE("collectives: a shared-memory peer that wrote and left is read before it counts as gone", "[collectives]") {
  ShmPairEnds p;
  const char sent[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(p.b->try_send(sent, sizeof sent) == sizeof sent);
  p.b.reset();  // its process ended: its socket's EOF is there before the bytes are read
  // What it wrote is still to be read: not gone yet, however the wait asks.
  CHECK_NOTHROW(p.a->check_alive());
  CHECK_NOTHROW(p.a->drain());
  char got[8] = {};
  REQUIRE(p.a->try_recv(got, sizeof got) == sizeof got);
  CHECK(std::memcmp(got, sent, sizeof got) == 0);
  // Read out: now it is gone, and named.
  CHECK_THROWS_WITH(p.a->check_alive(), Contains("rank 1") && Contains("closed its connection"));
  CHECK_THROWS_AS(p.a->drain(), dl::RemoteError);
}

TEST_CASE("collectives: a shared-memory peer that aborted counts as gone at once", "[collectives]") {
  ShmPairEnds p;
  const char sent[4] = {1, 2, 3, 4};
  REQUIRE(p.b->try_send(sent, sizeof sent) == sizeof sent);
  p.b->shutdown();  // Communicator::abort: its data no longer means anything
  CHECK_THROWS_WITH(p.a->check_alive(), Contains("rank 1") && Contains("aborted its communicator"));
}
