// Real OpenMPI programs and mpi4py under dl_pmix_run (our PMIx server) and,
// to show the programs themselves are right, under Debian's mpirun. Each
// program checks MPI's view of size/rank and its results itself and prints
// one "ok" line per rank; here we count those lines and the exit codes, and
// check that no process of the run is left behind.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/mpi/pmix/mpi_test_util.h"

using namespace dl::mpitest;

namespace {

const std::string kBin = DLAUNCH_BIN_DIR;
const std::string kSrc = DLAUNCH_SOURCE_DIR;

std::string mpirun() {
  std::string m = access("/usr/bin/mpirun.openmpi", X_OK) == 0 ? "/usr/bin/mpirun.openmpi" : "mpirun";
  return m + " --allow-run-as-root --oversubscribe";
}

void check_program(const std::string& launcher, int n, const std::string& program,
                   const std::string& ok_prefix) {
  std::string mark = marker();
  Result r = run(launcher + " " + std::to_string(n) + " " + program + " " + std::to_string(n) + " " + mark);
  INFO(launcher << " " << n << " " << program << "\n" << r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, ok_prefix) == n);
  CHECK(count(r.out, " ok") == n);
  CHECK(count(r.out, "BAD") == 0);
  CHECK_FALSE(leftover(mark));
}

const std::string kPmixRun = kBin + "/dl_pmix_run";
const std::string kMpirunN = mpirun() + " -n";
const std::string kPy = "/usr/bin/python3 " + kSrc + "/tests/mpi/pmix/mpi4py_coll.py";

}  // namespace

TEST_CASE("mpi_hello: size, rank, allreduce, barrier under dl_pmix_run", "[pmix][slow]") {
  for (int n : {1, 2, 4}) check_program(kPmixRun, n, kBin + "/mpi_hello", "hello rank");
}

TEST_CASE("mpi_ring: sendrecv ring under dl_pmix_run", "[pmix][slow]") {
  for (int n : {1, 2, 4}) check_program(kPmixRun, n, kBin + "/mpi_ring", "ring rank");
}

TEST_CASE("mpi4py: bcast, scatter, gather, allreduce under dl_pmix_run", "[pmix][slow]") {
  for (int n : {1, 2, 4}) check_program(kPmixRun, n, kPy, "mpi4py rank");
}

TEST_CASE("the same MPI programs are right under mpirun", "[pmix][slow]") {
  for (int n : {1, 2, 4}) {
    check_program(kMpirunN, n, kBin + "/mpi_hello", "hello rank");
    check_program(kMpirunN, n, kBin + "/mpi_ring", "ring rank");
    check_program(kMpirunN, n, kPy, "mpi4py rank");
  }
}

TEST_CASE("MPI_Abort ends the job with the rank's code and names the rank", "[pmix][slow]") {
  std::string mark = marker();
  Result r = run(kPmixRun + " 3 " + kBin + "/mpi_abort 13 " + mark);
  INFO(r.out);
  CHECK(r.code == 13);
  CHECK(count(r.out, "dl_pmix_run: rank 2 on ") == 1);
  CHECK(count(r.out, "aborted with status 13") == 1);
  CHECK_FALSE(leftover(mark));
  // mpirun agrees on the code.
  Result m = run(kMpirunN + " 3 " + kBin + "/mpi_abort 13 " + mark);
  INFO(m.out);
  CHECK(m.code == 13);
  CHECK_FALSE(leftover(mark));
}

TEST_CASE("PMIx client: registered keys, missing keys answered, no fence upcall on one host", "[pmix][slow]") {
  std::string mark = marker();
  Result r = run(kPmixRun + " -v 2 " + kBin + "/pmix_keys_client " + mark);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, "PMIX_JOB_SIZE = 2 (expected 2)") == 2);
  CHECK(count(r.out, "-> NOT-FOUND") == 6);
  CHECK(count(r.out, "rank 0 finalized") == 1);
  CHECK(count(r.out, "rank 1 finalized") == 1);
  // libpmix completes a fence whose ranks are all local by itself.
  CHECK(count(r.out, "dl_pmix_run: fence") == 0);
  CHECK_FALSE(leftover(mark));
}

TEST_CASE("dl_pmix_run leaves nothing in /tmp's OpenMPI session tree", "[pmix][slow]") {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string mark = marker();
  // A session dir OpenMPI would create under /tmp is ompi.<host>.<uid>/jf.<n>;
  // ours must be inside the job's tmpdir instead. Count before and after.
  auto jf_count = [&] {
    return run("ls -d /tmp/ompi." + std::string(host) + "." + std::to_string(getuid()) +
               "/jf.* 2>/dev/null | wc -l").out;
  };
  std::string before = jf_count();
  Result r = run(kPmixRun + " 2 " + kBin + "/mpi_hello 2 " + mark);
  CHECK(r.code == 0);
  CHECK(jf_count() == before);
}
