// dlcoll-mh-check: a rank program for the multi-host collective tests
// (mh_test.cc), started by dlaunch on the namespace cluster. It joins the
// job's communicator through env:// and then, by mode:
//
//   dlcoll-mh-check check MARK
//     prints "CHECK rank=R peer=P transport=T host=H addr=A" for every peer,
//     runs every collective (checks.h: every dtype and op, sizes 0, 1, 13,
//     1031 and 70001 elements, then 1 Mi floats), an async pair and a
//     sub-group spanning hosts, and prints "CHECK rank=R OK checks=K" or
//     "CHECK rank=R FAILED: why" (exit 1).
//   dlcoll-mh-check loop MARK DIR
//     all_reduces 4 MiB back to back; after the first one it creates
//     DIR/running.R so the test knows every rank is inside the loop. SIGTERM
//     is ignored so that the collective's own failure, not dlaunch's
//     teardown, ends the rank: it prints "LOOP rank=R failed after K
//     iterations: why" and exits 3. Gives up (exit 4) after 120 s.
//
// MARK only tags argv so the test can find these processes.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "tests/collectives/checks.h"
#include "tests/collectives/reference.h"

using namespace dl::coll;
using namespace dl::coll::test;

namespace {

Options options(std::chrono::milliseconds timeout) {
  Options o;
  o.timeout = timeout;
  return o;
}

int check(Communicator& c) {
  const int me = c.rank(), n = c.size();
  for (int r = 0; r < n; ++r)
    if (r != me)
      std::printf("CHECK rank=%d peer=%d transport=%s host=%s addr=%s\n", me, r, c.transport_to(r),
                  c.peer(r).host.c_str(), c.peer(r).addr.c_str());
  std::fflush(stdout);
  int checks = 0;
  for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{1031}, size_t{70001}})
    for (DataType t : kTypes) {
      for (ReduceOp op : kOps) check_reductions(c, t, op, count), ++checks;
      check_movement(c, t, count), ++checks;
    }
  // Large enough for the ring, the pipelined chain and many socket buffers.
  check_reductions(c, DataType::kFloat32, ReduceOp::kSum, size_t{1} << 20), ++checks;
  check_movement(c, DataType::kFloat32, size_t{1} << 20), ++checks;
  {
    CTX("async all_reduce + broadcast");
    std::vector<float> a(300000), b(300000);
    for (size_t i = 0; i < a.size(); ++i) put(a.data(), i, DataType::kFloat32, input(me, i, DataType::kFloat32, ReduceOp::kSum));
    for (size_t i = 0; i < b.size(); ++i) b[i] = me == 0 ? float(i % 1000) : -1.0f;
    auto w1 = c.all_reduce_async(a.data(), a.data(), a.size(), DataType::kFloat32, ReduceOp::kSum);
    auto w2 = c.broadcast_async(b.data(), b.size(), DataType::kFloat32, 0);
    w2->wait(std::chrono::seconds(60));
    w1->wait(std::chrono::seconds(60));
    RCHECK(w1->is_completed() && w2->is_completed());
    for (size_t i = 0; i < a.size(); ++i) RCHECK(a[i] == float(expected(n, i, DataType::kFloat32, ReduceOp::kSum)));
    for (size_t i = 0; i < b.size(); ++i) RCHECK(b[i] == float(i % 1000));
    ++checks;
  }
  if (n >= 3) {
    // Every other rank (under dlaunch's slot filling: ranks on different hosts).
    std::vector<int> members;
    for (int r = 0; r < n; r += 2) members.push_back(r);
    auto g = c.new_group(members);
    RCHECK((g != nullptr) == (me % 2 == 0));
    if (g) {
      CTX("sub-group of the even ranks");
      check_reductions(*g, DataType::kInt64, ReduceOp::kSum, 1031);
      check_movement(*g, DataType::kBFloat16, 70001);
      checks += 2;
    }
    c.barrier();
  }
  std::printf("CHECK rank=%d OK checks=%d\n", me, checks);
  return 0;
}

int loop(Communicator& c, const std::string& dir) {
  ::signal(SIGTERM, SIG_IGN);
  std::vector<float> buf(size_t{1} << 20, 1.0f);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  long k = 0;
  try {
    while (std::chrono::steady_clock::now() < give_up) {
      c.all_reduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kMax);
      if (k++ == 0) {
        std::string f = dir + "/running." + std::to_string(c.rank());
        int fd = ::open(f.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (fd >= 0) ::close(fd);
      }
    }
  } catch (const std::exception& e) {
    std::printf("LOOP rank=%d failed after %ld iterations: %s\n", c.rank(), k, e.what());
    return 3;
  }
  std::printf("LOOP rank=%d saw no failure in 120 s\n", c.rank());
  return 4;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if ((mode != "check" || argc != 3) && (mode != "loop" || argc != 4)) {
    std::fprintf(stderr, "usage: dlcoll-mh-check check MARK | loop MARK DIR\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* env_rank = std::getenv("RANK");
  int rank = env_rank ? std::atoi(env_rank) : -1;
  try {
    auto c = Communicator::from_url("env://", options(std::chrono::seconds(mode == "loop" ? 30 : 60)));
    rank = c->rank();
    return mode == "check" ? check(*c) : loop(*c, argv[3]);
  } catch (const std::exception& e) {
    std::printf("%s rank=%d FAILED: %s\n", mode == "check" ? "CHECK" : "LOOP", rank, e.what());
    return 1;
  }
}
