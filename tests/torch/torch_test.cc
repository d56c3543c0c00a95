// Real PyTorch (Debian's python3-torch 1.13, gloo on CPU) under dlaunch on
// this machine: DDP over env:// and a oneCCL-style script that reads
// PMI_RANK/PMI_SIZE, and per-node mode under Slurm-like variables. The env:// script also runs under torchrun in the same
// test, so a wrong script cannot pass: both launchers must produce the same
// final parameters, bit for bit. Nothing may outlive either job.
#include <catch2/catch.hpp>

#include "tests/integration/run_command.h"
#include "tests/torch/ddp_result.h"
#include "wire/socket.h"

using namespace dl::it;
using namespace dl::torch_test;

namespace {
// Each job: torch's import is 1-3 s per process here and 4 share 2 cores.
constexpr double kJobTimeout = 180;

// Lines of `out` that contain `what`.
int count_lines(const std::string& out, const std::string& what) {
  int n = 0;
  for (const auto& l : lines(out)) n += l.find(what) != std::string::npos;
  return n;
}

RunResult run_job(const RunSpec& s, const std::string& marker) {
  Child c = start(s);
  ChildGuard guard{c, marker};
  RunResult r = wait(c, kJobTimeout);
  INFO(r.out << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 0);
  CHECK(wait_marked_gone(marker, 5).empty());
  return r;
}
}  // namespace

TEST_CASE("gloo DDP over env:// converges identically under dlaunch and torchrun, both as torchrun is spelled",
          "[torch][slow][torchrun]") {
  const std::string m = new_marker();
  RunSpec d;
  // torchrun's command line as it is, the .py without an interpreter in
  // front; $PYTHON names Debian's python3, which has torch (PATH's may not).
  d.argv = {bin("dlaunch"), "--standalone", "--nproc_per_node", "4", script(), m};
  d.set_env = {{"PYTHON", kPython}};
  d.unset_env = {"OMP_NUM_THREADS"};
  RunResult rd = run_job(d, m);
  INFO("dlaunch:\n" << rd.out << rd.err);
  const std::string sha_dlaunch = check_converged(parse_ddp(rd.out), 4, "env");
  // Each rank knows it was started the torchelastic way, with one OpenMP thread.
  CHECK(count_lines(rd.out, "torchelastic=1 omp=1") == 4);

  TempDir logs;  // torchrun's --log_dir, else it leaves /tmp/torchelastic_* behind
  const std::string m2 = new_marker();
  RunSpec t;
  // -r 2 -t 2: torch 1.13's default "-r 0" breaks on Python 3.11 (its Std
  // enum no longer iterates NONE); redirecting stderr to the log and teeing
  // it back leaves stdout and stderr as they were.
  t.argv = {kTorchrun, "--standalone", "--nproc_per_node", "4", "-r", "2", "-t", "2",
            "--log_dir", logs.path + "/torchrun", script(), m2};
  RunResult rt = run_job(t, m2);
  INFO("torchrun:\n" << rt.out << rt.err);
  const std::string sha_torchrun = check_converged(parse_ddp(rt.out), 4, "env");
  CHECK(count_lines(rt.out, "torchelastic=1 omp=1") == 4);  // what dlaunch imitates

  CHECK_FALSE(sha_dlaunch.empty());
  CHECK(sha_dlaunch == sha_torchrun);
}

TEST_CASE("a oneCCL-style script: rank from PMI_RANK/PMI_SIZE, tcp:// init from MASTER_ADDR/PORT", "[torch][slow]") {
  const std::string m = new_marker();
  RunSpec d;
  d.argv = {bin("dlaunch"), "-n", "4", kPython, script(), "--pmi", m};
  RunResult r = run_job(d, m);
  INFO(r.out << r.err);
  CHECK_FALSE(check_converged(parse_ddp(r.out), 4, "pmi").empty());
}

TEST_CASE("gloo DDP under --rdzv env with Slurm's variables: 2 nodes x 2 ranks, same result as dlaunch -n 4",
          "[torch][slow]") {
  const std::string m = new_marker();
  RunSpec one;
  one.argv = {bin("dlaunch"), "-n", "4", kPython, script(), m};
  const std::string sha_one = check_converged(parse_ddp(run_job(one, m).out), 4, "env");

  // What `srun -N2 --ntasks-per-node=1 dlaunch --rdzv env --nproc-per-node 2`
  // gives each of its two tasks, with both "nodes" on this machine.
  const std::string m2 = new_marker();
  const std::string port = std::to_string(dl::wire::free_tcp_port(true));
  auto node = [&](int k) {
    RunSpec s;
    s.argv = {bin("dlaunch"), "--rdzv", "env", "--rdzv-port", port, "--nproc-per-node", "2", kPython, script(), m2};
    s.set_env = {{"DLAUNCH_TOKEN", "torch-per-node-test-token"}, {"SLURM_JOB_ID", "31337"},
                 {"SLURM_PROCID", std::to_string(k)},            {"SLURM_NTASKS", "2"},
                 {"SLURM_LOCALID", "0"},                         {"SLURM_NODEID", std::to_string(k)},
                 {"SLURM_JOB_NODELIST", "localhost"}};
    s.unset_env = {"RANK", "WORLD_SIZE", "DLAUNCH_RANK", "DLAUNCH_WORLD_SIZE"};
    return s;
  };
  Child c1 = start(node(1));
  Child c0 = start(node(0));
  ChildGuard g0{c0, m2}, g1{c1, m2};
  RunResult r0 = wait(c0, kJobTimeout), r1 = wait(c1, kJobTimeout);
  INFO(r0.out << r0.err << "---\n" << r1.out << r1.err);
  REQUIRE(r0.code == 0);
  REQUIRE(r1.code == 0);
  CHECK(wait_marked_gone(m2, 5).empty());
  const std::string sha_nodes = check_converged(parse_ddp(r0.out + r1.out), 4, "env");
  CHECK_FALSE(sha_nodes.empty());
  CHECK(sha_nodes == sha_one);
}

TEST_CASE("a rank that raises under torch's @record: the verdict names the exception and where it was raised",
          "[torch][slow][torchrun]") {
  const std::string m = new_marker();
  const std::string py = std::string(DLAUNCH_SOURCE_DIR) + "/tests/torch/record_fail.py";
  // The line the exception is raised on, as the script has it.
  int raise_line = 0, n = 0;
  for (const auto& l : lines(read_file(py))) {
    ++n;
    if (l.find("RAISED-HERE") != std::string::npos && l.find("raise ") != std::string::npos) raise_line = n;
  }
  REQUIRE(raise_line > 0);
  RunSpec d;
  d.argv = {bin("dlaunch"), "--nproc_per_node", "2", py, m};
  d.set_env = {{"PYTHON", kPython}};
  Child c = start(d);
  ChildGuard guard{c, m};
  RunResult r = wait(c, kJobTimeout);
  INFO(r.out << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 1);
  CHECK(count_lines(r.out, "torchelastic=1") == 2);  // torch.distributed.is_torchelastic_launched()
  const std::string want = "exited with code 1: ValueError: learning rate must be positive, got -0.5 (at " + py + ":" +
                           std::to_string(raise_line) + ")";
  std::string verdict;
  for (const auto& l : lines(r.err))
    if (l.rfind("dlaunch: rank ", 0) == 0) verdict = l;
  CHECK(verdict.rfind("dlaunch: rank 1 on ", 0) == 0);
  CHECK(verdict.find(want) != std::string::npos);
  CHECK(wait_marked_gone(m, 5).empty());
}
