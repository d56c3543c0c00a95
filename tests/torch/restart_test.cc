// --max-restarts with real PyTorch (Debian's python3-torch, gloo on CPU):
// a training run that checkpoints every step loses a rank half way on its
// first attempt; dlaunch restarts the job, which resumes from the checkpoint
// and must end with the very parameters of a run that was never interrupted
// (tests/torch/restart_train.py). Nothing of either attempt may be left.
//
// Two ranks: their gradients' sum is the same bit for bit whichever order
// gloo adds them in. With three, DDP's bucket layout (rebuilt after its
// first step, which the resumed run takes at step 6) changes which rank's
// chunk starts each ring sum, and floating-point addition is not
// associative: the last bits would differ from the uninterrupted run's.
#include <catch2/catch.hpp>

#include <map>
#include <regex>

#include "tests/integration/run_command.h"
#include "tests/torch/ddp_result.h"

using namespace dl::it;
using namespace dl::torch_test;

namespace {
constexpr double kJobTimeout = 240;
const std::string kTrain = std::string(DLAUNCH_SOURCE_DIR) + "/tests/torch/restart_train.py";

struct Final {
  int restart = -1, resumed_from = -1;
  std::string sha;
};

// The FINAL line of each rank.
std::map<int, Final> finals(const std::string& out) {
  std::map<int, Final> f;
  static const std::regex re(R"(FINAL rank=(\d+) restart=(\d+) resumed_from=(\d+) sha256=([0-9a-f]{64}))");
  for (const auto& l : lines(out)) {
    std::smatch m;
    if (std::regex_search(l, m, re)) f[std::stoi(m[1])] = {std::stoi(m[2]), std::stoi(m[3]), m[4]};
  }
  return f;
}

RunResult run_train(const std::vector<std::string>& dlaunch_args, const std::string& dir,
                    const std::vector<std::string>& extra) {
  const std::string m = new_marker();
  RunSpec s;
  s.argv = {bin("dlaunch")};
  s.argv.insert(s.argv.end(), dlaunch_args.begin(), dlaunch_args.end());
  s.argv.insert(s.argv.end(), {kPython, kTrain, dir});
  s.argv.insert(s.argv.end(), extra.begin(), extra.end());
  s.argv.push_back(m);
  s.unset_env = {"OMP_NUM_THREADS"};
  Child c = start(s);
  ChildGuard guard{c, m};
  RunResult r = wait(c, kJobTimeout);
  CHECK_FALSE(r.timed_out);
  CHECK(wait_marked_gone(m, 5).empty());  // no rank of any attempt, no agent, left
  return r;
}
}  // namespace

TEST_CASE("torch: a rank dies half way - --max-restarts resumes from the checkpoint to an uninterrupted run's result",
          "[torch][slow][restart]") {
  TempDir plain, failing;
  RunResult ref = run_train({"-n", "2"}, plain.path, {});
  INFO("uninterrupted:\n" << ref.out << ref.err);
  REQUIRE(ref.code == 0);
  auto want = finals(ref.out);
  REQUIRE(want.size() == 2);
  const std::string sha = want[0].sha;
  for (auto& [rank, f] : want) CHECK(f.sha == sha);

  RunResult r = run_train({"-n", "2", "--max-restarts", "2"}, failing.path, {"--fail-rank", "1", "--fail-step", "5"});
  INFO("restarted:\n" << r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("dlaunch: attempt 1 of 3 failed: rank 1 on localhost"));
  CHECK_THAT(r.err, Catch::Contains("exited with code 1; restarting"));
  CHECK_THAT(r.err, Catch::Contains("dlaunch: attempt 2 of 3 succeeded"));
  CHECK_THAT(r.out, Catch::Contains("rank 1 fails after step 5"));
  auto got = finals(r.out);
  REQUIRE(got.size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    // Every rank ran exactly twice: restart count 0, then 1, each attempt
    // with a clean keyspace in the store dlaunch serves on MASTER_PORT.
    auto l = lines(read_file(failing.path + "/runs." + std::to_string(rank)));
    REQUIRE(l.size() == 2);
    CHECK_THAT(l[0], Catch::StartsWith("RUN rank=" + std::to_string(rank) + " restart=0 "));
    CHECK_THAT(l[1], Catch::StartsWith("RUN rank=" + std::to_string(rank) + " restart=1 "));
    CHECK_THAT(l[0], Catch::EndsWith(" leftover=no"));
    CHECK_THAT(l[1], Catch::EndsWith(" leftover=no"));  // the first attempt's key is gone
    CHECK(got[rank].restart == 1);
    CHECK(got[rank].resumed_from == 6);  // the step after the last checkpoint
    CHECK(got[rank].sha == sha);         // bit for bit the uninterrupted run's parameters
  }
}
