// A real PMI-2 client against the agent's PMI-2 server: Slurm's libpmi2
// (what Intel MPI loads with I_MPI_PMI=pmi2 I_MPI_PMI_LIBRARY=libpmi2.so)
// in tests/mpi/pmi/pmi2_client.c, which checks init, job id, two rounds of
// KVS put/fence/get across every rank, PMI_process_mapping and a node
// attribute one rank waits for. Each rank prints "pmi2 rank R of N ... ok".
#include <catch2/catch.hpp>

#include <string>

#include "tests/mpi/pmix/mpi_test_util.h"

using namespace dl::mpitest;

namespace {
const std::string kBin = DLAUNCH_BIN_DIR;
const std::string kDlaunch = kBin + "/dlaunch";
}  // namespace

TEST_CASE("dlaunch -n N pmi2_client: Slurm's libpmi2 through the agent's PMI-2 server", "[pmi2][slow]") {
  for (const char* mpi : {"", "--mpi pmi "}) {
    for (int n : {1, 3, 4}) {
      const std::string mark = marker();
      Result r = run(kDlaunch + " " + mpi + "-n " + std::to_string(n) + " " + kBin + "/pmi2_client " + std::to_string(n) +
                     " " + mark);
      INFO(mpi << "-n " << n << "\n" << r.out);
      CHECK(r.code == 0);
      CHECK(count(r.out, "BAD") == 0);
      CHECK(count(r.out, " ok\n") == n);
      for (int k = 0; k < n; ++k) CHECK(count(r.out, "pmi2 rank " + std::to_string(k) + " of " + std::to_string(n) + " jobid ") == 1);
      CHECK_FALSE(leftover(mark));
    }
  }
}

TEST_CASE("dlaunch: PMI2_Abort is the job's verdict, with the program's message", "[pmi2][slow]") {
  const std::string mark = marker();
  Result r = run(kDlaunch + " -n 4 " + kBin + "/pmi2_client 4 " + mark + " abort");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(count(r.out, "dlaunch: rank 3 on localhost called MPI_Abort with code 1: \"pmi2 rank 3 gives up\"") == 1);
  CHECK(count(r.out, " ok\n") == 0);  // the other ranks were ended while they slept
  CHECK_FALSE(leftover(mark));
}

TEST_CASE("dlaunch --mpi pmix: a PMI-2 client is told what is served, never left as a singleton", "[pmi2][slow]") {
  const std::string mark = marker();
  Result r = run(kDlaunch + " -n 2 --mpi pmix " + kBin + "/pmi2_client 2 " + mark);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(count(r.out, "but this job serves only PMIx") >= 1);
  CHECK(count(r.out, " ok\n") == 0);
  CHECK_FALSE(leftover(mark));
}
