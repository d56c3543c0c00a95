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

TEST_CASE("gloo DDP over env:// converges identically under dlaunch -n 4 and torchrun --nproc_per_node 4",
          "[torch][slow]") {
  const std::string m = new_marker();
  RunSpec d;
  d.argv = {bin("dlaunch"), "-n", "4", kPython, script(), m};
  RunResult rd = run_job(d, m);
  INFO("dlaunch:\n" << rd.out << rd.err);
  const std::string sha_dlaunch = check_converged(parse_ddp(rd.out), 4, "env");

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
