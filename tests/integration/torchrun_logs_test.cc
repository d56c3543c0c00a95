// torchrun's output options on the real dlaunch (issue 14): --local-ranks-filter,
// --log-dir with -r/--redirects and -t/--tee, as launcher/output/output_sink.h routes
// them. Every rank prints one line to stdout and one to stderr.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
const char* kBoth = "echo out-$RANK; echo err-$RANK >&2";

RunResult launch(std::vector<std::string> opts, int ranks = 3) {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", std::to_string(ranks)};
  s.argv.insert(s.argv.end(), opts.begin(), opts.end());
  for (const char* a : {"/bin/sh", "-c", kBoth}) s.argv.push_back(a);
  return run(s, 30);
}

std::vector<std::string> sorted_lines(const std::string& text) {
  auto ls = lines(text);
  std::sort(ls.begin(), ls.end());
  return ls;
}

bool exists(const std::string& p) { return std::filesystem::exists(p); }
// The one run directory --log-dir DIR made (DIR/dlaunch_<time>_<pid>), or "".
std::string run_dir(const std::string& dir) {
  std::vector<std::string> runs;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) runs.push_back(e.path().string());
  INFO("runs in " << dir << ": " << runs.size());
  REQUIRE(runs.size() == 1);
  CHECK(std::filesystem::path(runs[0]).filename().string().rfind("dlaunch_", 0) == 0);
  return runs[0];
}
// A rank's file of the first attempt of the one run in --log-dir `dir`.
std::string file(const std::string& dir, int rank, const char* stream) {
  return run_dir(dir) + "/attempt_0/rank." + std::to_string(rank) + "/" + stream;
}
using Lines = std::vector<std::string>;
// stderr's lines without the one that names the run's directory, which -r
// prints once (stderr is a pipe here, as in a batch job), checked first.
Lines console_err(const std::string& err, const std::string& dir) {
  Lines out;
  int named = 0;
  for (const auto& l : lines(err)) {
    if (l == "dlaunch: --log-dir: this run's files are in " + run_dir(dir) + "/attempt_0") ++named;
    else out.push_back(l);
  }
  CHECK(named == 1);
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

TEST_CASE("torchrun logs: --local-ranks-filter 0 shows only rank 0 on the console", "[integration][torchrun]") {
  RunResult r = launch({"--local-ranks-filter", "0"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(sorted_lines(r.out) == Lines{"out-0"});
  CHECK(sorted_lines(r.err) == Lines{"err-0"});
}

TEST_CASE("torchrun logs: --local_ranks_filter=0,2 with torchrun's underscores, tagged", "[integration][torchrun]") {
  RunResult r = launch({"--local_ranks_filter=0,2", "--tag-output"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(sorted_lines(r.out) == Lines{"[0@localhost] out-0", "[2@localhost] out-2"});
  CHECK(sorted_lines(r.err) == Lines{"[0@localhost] err-0", "[2@localhost] err-2"});
}

TEST_CASE("torchrun logs: --log-dir with -r 3 writes both streams to files, shows nothing but where they are",
          "[integration][torchrun]") {
  TempDir tmp;
  const std::string dir = tmp.path + "/logs";
  RunResult r = launch({"--log-dir", dir, "-r", "3"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.empty());
  // No terminal, no -v (a batch job): the run's directory is still named, once.
  CHECK(console_err(r.err, dir).empty());
  for (int k = 0; k < 3; ++k) {
    CHECK(read_file(file(dir, k, "stdout")) == "out-" + std::to_string(k) + "\n");
    CHECK(read_file(file(dir, k, "stderr")) == "err-" + std::to_string(k) + "\n");
  }
}

TEST_CASE("torchrun logs: --log_dir with --tee 3 shows every line and writes it too", "[integration][torchrun]") {
  TempDir tmp;
  const std::string dir = tmp.path + "/logs";
  RunResult r = launch({"--log_dir", dir, "--tee", "3", "--tag-output"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(sorted_lines(r.out) == Lines{"[0@localhost] out-0", "[1@localhost] out-1", "[2@localhost] out-2"});
  CHECK(sorted_lines(r.err) == Lines{"[0@localhost] err-0", "[1@localhost] err-1", "[2@localhost] err-2"});
  for (int k = 0; k < 3; ++k) {  // files hold the rank's own bytes, untagged
    CHECK(read_file(file(dir, k, "stdout")) == "out-" + std::to_string(k) + "\n");
    CHECK(read_file(file(dir, k, "stderr")) == "err-" + std::to_string(k) + "\n");
  }
}

TEST_CASE("torchrun logs: -r 1 redirects stdout only, stderr stays on the console", "[integration][torchrun]") {
  TempDir tmp;
  const std::string dir = tmp.path + "/logs";
  RunResult r = launch({"--log-dir", dir, "-r", "1"}, 2);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.empty());
  CHECK(console_err(r.err, dir) == Lines{"err-0", "err-1"});
  for (int k = 0; k < 2; ++k) {
    CHECK(read_file(file(dir, k, "stdout")) == "out-" + std::to_string(k) + "\n");
    CHECK_FALSE(exists(file(dir, k, "stderr")));
  }
}

TEST_CASE("torchrun logs: a per-local-rank map -r 0:1,1:2 redirects each rank's own streams",
          "[integration][torchrun]") {
  TempDir tmp;
  const std::string dir = tmp.path + "/logs";
  RunResult r = launch({"--log-dir", dir, "--redirects=0:1,1:2"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(sorted_lines(r.out) == Lines{"out-1", "out-2"});
  CHECK(console_err(r.err, dir) == Lines{"err-0", "err-2"});
  CHECK(read_file(file(dir, 0, "stdout")) == "out-0\n");
  CHECK_FALSE(exists(file(dir, 0, "stderr")));
  CHECK(read_file(file(dir, 1, "stderr")) == "err-1\n");
  CHECK_FALSE(exists(file(dir, 1, "stdout")));
  CHECK_FALSE(exists(run_dir(dir) + "/attempt_0/rank.2"));  // local rank 2 is not in the map: console only
}

TEST_CASE("torchrun logs: --local-ranks-filter 1 with -t 3 shows rank 1 and writes every rank's files",
          "[integration][torchrun]") {
  TempDir tmp;
  const std::string dir = tmp.path + "/logs";
  RunResult r = launch({"--local-ranks-filter", "1", "-t", "3", "--log-dir", dir});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(sorted_lines(r.out) == Lines{"out-1"});
  CHECK(sorted_lines(r.err) == Lines{"err-1"});
  for (int k = 0; k < 3; ++k) {
    CHECK(read_file(file(dir, k, "stdout")) == "out-" + std::to_string(k) + "\n");
    CHECK(read_file(file(dir, k, "stderr")) == "err-" + std::to_string(k) + "\n");
  }
}

TEST_CASE("torchrun logs: usage errors exit 2 before anything starts, naming the option", "[integration][torchrun]") {
  TempDir tmp;
  const std::string flag = tmp.path + "/started";
  struct Case {
    std::vector<std::string> opts;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"-r", "3"}, "--log-dir"},
      {{"--tee", "0:2"}, "--log-dir"},
      {{"--log-dir", tmp.path + "/l", "-r", "4"}, "-r/--redirects"},
      {{"--log-dir", tmp.path + "/l", "-t", "0:1;1:2"}, "-t/--tee"},
      {{"--local-ranks-filter", "first"}, "--local-ranks-filter"},
      {{"--log-dir", tmp.path + "/l", "--output-filename", tmp.path + "/o"}, "--output-filename or torchrun's --log-dir"},
  };
  for (const auto& c : cases) {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "2"};
    s.argv.insert(s.argv.end(), c.opts.begin(), c.opts.end());
    for (const std::string& a : std::vector<std::string>{"/bin/sh", "-c", "touch " + flag}) s.argv.push_back(a);
    RunResult r = run(s, 10);
    INFO(c.opts[0] << " " << c.opts[1] << ": " << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find(c.says) != std::string::npos);
    CHECK_FALSE(exists(flag));
  }
  CHECK_FALSE(exists(tmp.path + "/l"));
  // -r 0 and -t 0 (torchrun's defaults, often written out) need no --log-dir.
  RunResult ok = launch({"-r", "0", "-t", "0"}, 1);
  INFO(ok.err);
  CHECK(ok.code == 0);
  CHECK(ok.out == "out-0\n");
}

TEST_CASE("torchrun logs: every run and every attempt of --log-dir gets a directory of its own",
          "[integration][torchrun]") {
  TempDir tmp;
  const std::string dir = tmp.path + "/logs";
  // Two runs, the second restarting once: rank 0 fails in its first attempt.
  const char* script = "echo try-$TORCHELASTIC_RESTART_COUNT; [ $TORCHELASTIC_RESTART_COUNT -gt 0 ] || exit 3";
  for (const char* restarts : {"0", "1"}) {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "1", "--log-dir", dir, "-r", "3", "--max-restarts", restarts, "-v",
              "/bin/sh", "-c", script};
    RunResult r = run(s, 30);
    INFO(r.out << r.err);
    CHECK(r.code == (restarts[0] == '0' ? 3 : 0));
    CHECK(r.err.find("dlaunch: --log-dir: this run's files are in " + dir + "/dlaunch_") != std::string::npos);
  }
  std::vector<std::string> runs;  // the restarted run last
  for (const auto& e : std::filesystem::directory_iterator(dir)) runs.push_back(e.path().string());
  REQUIRE(runs.size() == 2);
  if (exists(runs[0] + "/attempt_1")) std::swap(runs[0], runs[1]);
  CHECK(read_file(runs[0] + "/attempt_0/rank.0/stdout") == "try-0\n");
  CHECK_FALSE(exists(runs[0] + "/attempt_1"));
  CHECK(read_file(runs[1] + "/attempt_0/rank.0/stdout") == "try-0\n");
  CHECK(read_file(runs[1] + "/attempt_1/rank.0/stdout") == "try-1\n");
}
