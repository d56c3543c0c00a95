// torch across two namespace hosts (tests/cluster): the gloo DDP script, and
// torch's c10d store naming a rank that never arrived. dlaunch runs
// in h0 and starts 2 ranks on each host over ssh. The final parameters must
// equal those of torchrun --nproc_per_node 4 on this machine (same world
// size, same ring order), and nothing may be left on either host.
#include <catch2/catch.hpp>

#include "tests/integration/run_command.h"
#include "tests/multihost/multihost_util.h"
#include "tests/torch/ddp_result.h"

using dl::cluster::Cluster;
using namespace dl::torch_test;
using namespace std::chrono_literals;

TEST_CASE("gloo DDP on 2 hosts x 2 ranks converges as under torchrun on one host", "[torch][multihost][cluster][slow]") {
  Cluster c(2);
  const std::string m = dl::multihost::unique_marker();
  // Gloo binds to the address its hostname resolves to; in the cluster that
  // is the host's eth0 address. GLOO_SOCKET_IFNAME=eth0 says so explicitly,
  // as a real cluster with several interfaces needs (docs/rendezvous.md).
  auto r = dl::multihost::run_dlaunch(c, "-n 4 -x GLOO_SOCKET_IFNAME=eth0 " + kPython + " " + script() + " " + m, 240s);
  INFO(r.output);
  CHECK(r.status == 0);
  DdpRun run = parse_ddp(r.output);
  const std::string sha_cluster = check_converged(run, 4, "env");
  for (const auto& [rank, l] : run.ranks) {
    INFO("rank " << rank);
    CHECK(l.host == c.host(rank / 2));  // hostfile order, 2 slots each
  }
  CHECK(dl::multihost::wait_clean(c, m) == "");

  dl::it::TempDir logs;
  const std::string m2 = dl::it::new_marker();
  dl::it::RunSpec t;
  t.argv = {kTorchrun, "--standalone", "--nproc_per_node", "4", "-r", "2", "-t", "2",
            "--log_dir", logs.path + "/torchrun", script(), m2};
  dl::it::Child child = dl::it::start(t);
  dl::it::ChildGuard guard{child, m2};
  dl::it::RunResult rt = dl::it::wait(child, 180);
  INFO("torchrun:\n" << rt.out << rt.err);
  CHECK(rt.code == 0);
  CHECK(sha_cluster == check_converged(parse_ddp(rt.out), 4, "env"));
  CHECK(dl::it::wait_marked_gone(m2, 5).empty());
}

TEST_CASE("torch c10d store across 2 hosts: --timeout names the rank that never arrived and its host",
          "[torch][multihost][cluster][slow]") {
  Cluster c(2);
  const std::string m = dl::multihost::unique_marker();
  const std::string probe = std::string(DLAUNCH_SOURCE_DIR) + "/tests/torch/c10d_probe.py";
  // Rank 3, the second host's second rank, sleeps instead of init_process_group.
  auto r = dl::multihost::run_dlaunch(c, "-n 4 --timeout 40 --stack-timeout 0 -x GLOO_SOCKET_IFNAME=eth0 " + kPython +
                                             " " + probe + " absent " + m, 180s);
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Catch::Contains("torch's rendezvous did not complete: 3 of 4 ranks' clients connected"));
  // Hosts as the hostfile names them (the cluster's is by address).
  CHECK_THAT(r.output, Catch::Contains(c.address(1) + ": 1 of its 2 ranks connected"));
  CHECK_THAT(r.output, Catch::Contains("never reached the rendezvous (no address published for gloo): rank 3 on " +
                                       c.address(1)));
  CHECK(r.output.find(c.address(0) + ": ") == std::string::npos);  // the first host's clients were all counted as its
  CHECK(dl::multihost::wait_clean(c, m) == "");
}

TEST_CASE("a script that sets its own MASTER_PORT=29500 on 2 hosts: rank 0 hosts torch's store there",
          "[torch][multihost][cluster][slow]") {
  Cluster c(2);
  const std::string m = dl::multihost::unique_marker();
  const std::string probe = std::string(DLAUNCH_SOURCE_DIR) + "/tests/torch/c10d_probe.py";
  // The script keeps MASTER_ADDR (h0's address: the launcher's host, which runs rank 0) and picks
  // 29500, as scripts written for mpirun do; each cluster host is its own network namespace.
  auto r = dl::multihost::run_dlaunch(c, "-n 4 --timeout 120 -x GLOO_SOCKET_IFNAME=eth0 -x PROBE_PORT=29500 " + kPython +
                                             " " + probe + " own " + m, 240s);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("c10d own rank=0 sum=4 listens=1 addr=" + c.address(0) + " port=29500"));
  for (int rank = 1; rank < 4; ++rank)
    CHECK_THAT(r.output, Catch::Contains("c10d own rank=" + std::to_string(rank) + " sum=4 listens=0"));
  CHECK(dl::multihost::wait_clean(c, m) == "");
}
