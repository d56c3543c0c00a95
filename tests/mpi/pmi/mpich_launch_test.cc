// Real MPICH programs (Debian's MPICH 4.0, PMI-1 over PMI_FD) launched by
// dlaunch itself: MPI's own view of size and rank, the node-local
// communicator, a 4 MiB ring, MPI_Abort's code and verdict, --mpi choosing
// what is served, and no process left behind. The same programs under
// mpiexec.hydra show that they are right. Each program checks itself and
// prints one "ok" line per rank.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <string>

#include "tests/mpi/pmix/mpi_test_util.h"

using namespace dl::mpitest;

namespace {

const std::string kBin = DLAUNCH_BIN_DIR;
const std::string kDlaunch = kBin + "/dlaunch";

// `launcher` runs `n` ranks of `program`; every rank k says "<prefix> k of n ... ok".
void check_program(const std::string& launcher, int n, const std::string& program, const std::string& prefix) {
  const std::string mark = marker();
  Result r = run(launcher + " -n " + std::to_string(n) + " " + kBin + "/" + program + " " + std::to_string(n) + " " + mark);
  INFO(launcher << " -n " << n << " " << program << "\n" << r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, " ok") == n);
  CHECK(count(r.out, "BAD") == 0);
  for (int k = 0; k < n; ++k) CHECK(count(r.out, prefix + " " + std::to_string(k) + " of " + std::to_string(n) + " ") == 1);
  CHECK_FALSE(leftover(mark));
}

}  // namespace

TEST_CASE("dlaunch -n N mpich_hello: size, rank, allreduce, node-local communicator", "[mpich][slow]") {
  // mpi_hello checks MPI_Comm_split_type(SHARED)'s size against
  // LOCAL_WORLD_SIZE, which dlaunch sets: all N ranks on this host.
  for (int n : {1, 2, 4}) check_program(kDlaunch, n, "mpich_hello", "hello rank");
  Result r = run(kDlaunch + " -n 4 " + kBin + "/mpich_hello 4");
  CHECK(count(r.out, " local 4 ok") == 4);
}

TEST_CASE("dlaunch -n 4 mpich_big_ring: a 4 MiB message around the ring", "[mpich][slow]") {
  check_program(kDlaunch, 4, "mpich_big_ring", "ring rank");
}

// On one host a PMI fence is complete once that host's ranks are in it: the
// agent answers it without the launcher (which logs every fence it relays
// under -v; on 4 hosts it does: mpich_multihost_test.cc).
TEST_CASE("dlaunch -v -n 4 mpich_hello on one host: the PMI fences never reach the launcher", "[mpich][slow]") {
  const std::string mark = marker();
  Result r = run(kDlaunch + " -v -n 4 " + kBin + "/mpich_hello 4 " + mark);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, " ok") == 4);
  REQUIRE(count(r.out, "dlaunch: ") > 0);  // -v spoke
  CHECK(count(r.out, "PMI fence") == 0);
  CHECK_FALSE(leftover(mark));
}

TEST_CASE("dlaunch --mpi pmi serves MPICH without PMIx", "[mpich][slow]") {
  check_program(kDlaunch + " --mpi pmi", 4, "mpich_hello", "hello rank");
}

TEST_CASE("the same MPICH programs are right under mpiexec.hydra", "[mpich][slow]") {
  REQUIRE(access("/usr/bin/mpiexec.hydra", X_OK) == 0);  // Debian's mpich package, beside mpicc.mpich
  // Hydra does not set LOCAL_WORLD_SIZE: mpi_hello then checks size and rank only.
  check_program("/usr/bin/mpiexec.hydra", 4, "mpich_hello", "hello rank");
  check_program("/usr/bin/mpiexec.hydra", 4, "mpich_big_ring", "ring rank");
}

TEST_CASE("dlaunch: MPI_Abort in an MPICH program is the job's verdict", "[mpich][slow]") {
  for (int n : {1, 4}) {
    const std::string mark = marker();
    Result r = run(kDlaunch + " -n " + std::to_string(n) + " " + kBin + "/mpich_abort 13 " + mark);
    INFO(r.out);
    CHECK(r.code == 13);
    CHECK(count(r.out, "dlaunch: rank " + std::to_string(n - 1) + " on ") == 1);
    // A job of one rank: MPICH exits with the code itself, without telling
    // its process manager (the verdict is then the rank's exit code 13).
    if (n > 1) CHECK(count(r.out, "called MPI_Abort with code 13") == 1);
    CHECK_FALSE(leftover(mark));
  }
}

TEST_CASE("dlaunch --mpi pmix: an MPICH program fails with a message, not as singletons", "[mpich][slow]") {
  const std::string mark = marker();
  Result r = run(kDlaunch + " -n 2 --mpi pmix " + kBin + "/mpich_hello 2 " + mark);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(count(r.out, "Broken pipe") == 0);
  CHECK(count(r.out, "speaks PMI (an MPICH, Intel MPI or MVAPICH program), but this job serves only PMIx") == 1);
  CHECK(count(r.out, "--mpi pmi or --mpi auto") == 1);
  CHECK(count(r.out, " of 1 ") == 0);  // no rank came up alone
  CHECK_FALSE(leftover(mark));
}

TEST_CASE("dlaunch: ranks get PMI_FD, PMI_RANK and PMI_SIZE, not inherited ones", "[mpich]") {
  Result r = run("env PMI_FD=99 PMI_RANK=77 " + kDlaunch + " -n 2 --tag-output /usr/bin/env");
  // What to look at first when this fails (CI's log shows only the start):
  // each rank's line count and its PMI_ lines, then the whole output.
  std::string summary;
  for (const std::string tag : {"[0@", "[1@"}) {
    int lines = 0;
    std::string pmi;
    for (size_t at = 0; (at = r.out.find(tag, at)) != std::string::npos; ++at) {
      ++lines;
      const size_t end = r.out.find('\n', at);
      const std::string line = r.out.substr(at, end == std::string::npos ? std::string::npos : end - at);
      if (line.find("] PMI_") != std::string::npos) pmi += " " + line;
    }
    summary += tag + "...]: " + std::to_string(lines) + " lines;" + pmi + "\n";
  }
  INFO("exit " << r.code << "\n" << summary << r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, "PMI_RANK=0") == 1);
  CHECK(count(r.out, "PMI_RANK=1") == 1);
  CHECK(count(r.out, "PMI_SIZE=2") == 2);
  CHECK(count(r.out, "PMI_FD=") == 2);
  CHECK(count(r.out, "PMI_FD=99") == 0);
  CHECK(count(r.out, "PMI_RANK=77") == 0);
  Result none = run(kDlaunch + " -n 1 --mpi none /usr/bin/env");
  CHECK(count(none.out, "PMI_FD=") == 0);
}

// A restarted MPI job (docs/failures.md, "MPI jobs"): each attempt is a
// fresh PMI key-value space (the attempt's namespace) on every agent. A rank
// lost in attempt 0 and MPICH's ranks come back as one world of N in
// attempt 1, never as singletons.
TEST_CASE("dlaunch -n 4 --max-restarts 1 with MPICH: a rank that exits 1 or is killed in attempt 0, one world of 4 in "
          "attempt 1",
          "[mpich][slow][restart]") {
  const std::string how = GENERATE("exit", "kill");
  check_restart(kDlaunch + " -n 4 --max-restarts 1", kBin + "/mpich_restart", 4, 1, how);
  if (how == std::string("exit")) check_restart(kDlaunch + " -n 2 --max-restarts 1 --mpi pmi", kBin + "/mpich_restart", 2, 1, how);
}

// The launch tree (--fanout) on 8 simulated hosts (--launcher sim): with
// fanout 2 it is 3 levels deep, and every PMI fence of MPI_Init, the
// allreduce and the finalize passes up through two relaying agents and back.
TEST_CASE("dlaunch --fanout 2 on 8 simulated hosts: mpich_hello through a depth-3 launch tree", "[mpich][slow]") {
  const std::string mark = marker();
  Result r = run(sim_tree_command(kDlaunch, 8, 2, 2) + " --mpi pmi " + kBin + "/mpich_hello 16 " + mark);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, "launch tree: 8 hosts, fanout 2, depth 3") == 1);
  CHECK(count(r.out, " local 2 ok") == 16);
  CHECK(count(r.out, "PMI fence") > 0);  // across hosts, the fences are the launcher's
  CHECK_FALSE(leftover(mark));
}
