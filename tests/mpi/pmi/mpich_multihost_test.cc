// Real MPICH programs on 4 namespace hosts x 2 ranks (tests/cluster), the
// launcher inside h0: every PMI barrier spans hosts, so the agents' PMI
// fences and the launcher's fence relay carry MPICH's business cards; the
// node-local communicator must have the 2 ranks of each host; MPI_Abort on
// h3 is the job's verdict. The same programs under mpiexec.hydra on the same
// hosts show that they are right. Nothing may be left on any host.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;

namespace {

// MPICH 4.0 in Debian is built on UCX, whose defaults work between the
// namespaces (TCP on eth0, shared memory within a host): nothing is set, as a
// user would set nothing. (UCX_TLS=tcp,self, without sm, makes MPI_Finalize
// hang under Hydra and dlaunch alike: docs/mpi.md, "MPICH across hosts".)
int count(const std::string& text, const std::string& needle) {
  int c = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++c;
  return c;
}

void check_ranks(const std::string& out, const std::string& prefix) {
  CHECK(count(out, "BAD") == 0);
  CHECK(count(out, " ok") == 8);
  for (int k = 0; k < 8; ++k) CHECK(count(out, prefix + " " + std::to_string(k) + " of 8 ") == 1);
}

}  // namespace

TEST_CASE("dlaunch: MPICH hello and 4 MiB ring on 4 hosts x 2 ranks", "[mpich_mh][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  auto hello = run_dlaunch(c, "-v -n 8 " + bin("mpich_hello") + " 8 " + mark, std::chrono::seconds(90));
  {
    INFO(hello.output);
    CHECK(hello.status == 0);
    check_ranks(hello.output, "hello rank");
    CHECK(count(hello.output, " local 2 ok") == 8);  // MPI_Comm_split_type(SHARED): the host's 2 ranks
    // The PMI barriers went through the launcher (ids with the top bit set).
    CHECK(count(hello.output, "dlaunch: PMI fence 0 complete") == 1);
  }
  auto ring = run_dlaunch(c, "-n 8 " + bin("mpich_big_ring") + " 8 " + mark, std::chrono::seconds(90));
  {
    INFO(ring.output);
    CHECK(ring.status == 0);
    check_ranks(ring.output, "ring rank");
  }
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("dlaunch: MPI_Abort of an MPICH rank on h3 ends the job on every host", "[mpich_mh][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  auto r = run_dlaunch(c, "-n 8 --kill-grace 2 " + bin("mpich_abort") + " 13 " + mark,
                       std::chrono::seconds(90));
  INFO(r.output);
  CHECK(r.status == 13);
  CHECK(count(r.output, "rank 7 on " + c.address(3) + " called MPI_Abort with code 13") == 1);
  CHECK(wait_clean(c, mark) == "");
}

TEST_CASE("mpiexec.hydra: the same MPICH programs on the same 4 hosts x 2 ranks", "[mpich_mh][cluster][slow]") {
  Cluster c(4);
  const std::string mark = unique_marker();
  std::string hosts;
  for (int h = 0; h < 4; ++h) hosts += (h ? "," : "") + c.address(h) + ":2";
  // Hydra's -launcher-exec is one program, without arguments: a script that
  // gives ssh the cluster's config, beside that config (gone with the cluster).
  const std::string cfg = c.ssh_config();
  const std::string ssh = cfg.substr(0, cfg.rfind('/')) + "/hydra_ssh";
  std::ofstream(ssh) << "#!/bin/sh\nexec ssh -F " << cfg << " \"$@\"\n";
  REQUIRE(chmod(ssh.c_str(), 0755) == 0);
  const std::string hydra = "mpiexec.hydra -launcher ssh -launcher-exec " + ssh + " -hosts " + hosts + " -n 8 ";
  auto hello = c.run_in("h0", hydra + bin("mpich_hello") + " 8 " + mark + " </dev/null", std::chrono::seconds(90));
  {
    INFO(hello.output);
    CHECK(hello.status == 0);
    check_ranks(hello.output, "hello rank");
  }
  auto ring = c.run_in("h0", hydra + bin("mpich_big_ring") + " 8 " + mark + " </dev/null", std::chrono::seconds(90));
  {
    INFO(ring.output);
    CHECK(ring.status == 0);
    check_ranks(ring.output, "ring rank");
  }
  CHECK(wait_clean(c, mark) == "");
}
