#pragma once
// What tests/torch/ddp_train.py prints, parsed, and the checks every torch
// test makes on it: one line per rank, every rank in step, the loss fell.
#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <string>

namespace dl::torch_test {

// The script, and Debian's python that has torch 1.13 (not a pyenv python3).
inline const std::string kPython = "/usr/bin/python3";
inline const std::string kTorchrun = "/usr/bin/torchrun";
inline std::string script() { return std::string(DLAUNCH_SOURCE_DIR) + "/tests/torch/ddp_train.py"; }

struct DdpLine {
  int world = 0;
  std::string host, source, sha;
  double first_loss = 0, last_loss = 0;
};

// rank -> its "DDP rank=..." line; a rank printing twice keeps its last line
// and counts in `lines`.
struct DdpRun {
  std::map<int, DdpLine> ranks;
  int lines = 0;
};

inline DdpRun parse_ddp(const std::string& out) {
  static const std::regex re(
      R"(DDP rank=(\d+) world=(\d+) host=(\S+) source=(\w+) first_loss=(\S+) last_loss=(\S+) sha256=([0-9a-f]{64}))");
  DdpRun run;
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it) {
    const auto& m = *it;
    run.ranks[std::stoi(m[1])] = DdpLine{std::stoi(m[2]), m[3], m[4], m[7], std::stod(m[5]), std::stod(m[6])};
    ++run.lines;
  }
  return run;
}

// Checks that ranks 0..world-1 each reported once, from `source`, with the
// same final parameters and a loss that fell; returns that common hash ("" if
// the ranks disagree).
inline std::string check_converged(const DdpRun& run, int world, const std::string& source) {
  CHECK(run.lines == world);
  REQUIRE(static_cast<int>(run.ranks.size()) == world);
  const std::string sha = run.ranks.begin()->second.sha;
  bool same = true;
  for (const auto& [rank, l] : run.ranks) {
    INFO("rank " << rank);
    CHECK(rank < world);
    CHECK(l.world == world);
    CHECK(l.source == source);
    CHECK(l.sha == sha);
    same = same && l.sha == sha;
    CHECK(l.last_loss < 0.5 * l.first_loss);  // 30 SGD steps on a smooth problem: it trains
  }
  return same ? sha : "";
}

}  // namespace dl::torch_test
