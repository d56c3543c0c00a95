// env:// identity from every source, and connect_store's URL forms.
#include <catch2/catch.hpp>

#include "errors/error.h"
#include "rendezvous/bootstrap.h"
#include "tests/rendezvous/store_envs.h"

using namespace dl::rdzv;
using namespace dl::rdzv::testing;
using namespace std::chrono_literals;

namespace {
PmixJobInfo no_pmix() { throw dl::IoError("pmix must not be queried"); }
}

TEST_CASE("identity from dlaunch and torchrun variables", "[rendezvous]") {
  Environment env{{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                  {"GROUP_RANK", "1"}, {"MASTER_ADDR", "head"}, {"MASTER_PORT", "29400"}};
  Identity id = identity_from_env(env, no_pmix);
  CHECK(id.source == "torchrun");
  CHECK((id.rank == 3 && id.world_size == 8 && id.local_rank == 1 && id.local_world_size == 2));
  CHECK((id.node_rank == 1 && id.master_addr == "head" && id.master_port == 29400));
  env["DLAUNCH_RANK"] = "5";
  env["DLAUNCH_WORLD_SIZE"] = "6";
  id = identity_from_env(env, no_pmix);
  CHECK((id.source == "dlaunch" && id.rank == 5 && id.world_size == 6 && id.local_rank == -1));
}

TEST_CASE("identity from OpenMPI, PMI and Slurm variables", "[rendezvous]") {
  Identity id = identity_from_env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
                                  no_pmix);
  CHECK((id.source == "OpenMPI" && id.rank == 2 && id.world_size == 4 && id.local_world_size == 2));
  id = identity_from_env({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}}, no_pmix);
  CHECK((id.source == "PMI" && id.rank == 1 && id.world_size == 2 && id.local_rank == 1));
  id = identity_from_env({{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"},
                          {"SLURM_NODEID", "4"}, {"SLURM_JOB_NODELIST", "gpu[07-10,12],cpu1"}},
                         no_pmix);
  CHECK((id.source == "Slurm" && id.rank == 9 && id.world_size == 16 && id.node_rank == 4));
  CHECK((id.master_addr == "gpu07" && id.master_port == 29500));
}

TEST_CASE("identity from PMIx goes through the PMIx client", "[rendezvous]") {
  int calls = 0;
  auto fake = [&] { ++calls; return PmixJobInfo{6, 12, 2, 4, 1}; };
  Identity id = identity_from_env({{"PMIX_RANK", "6"}, {"PMIX_NAMESPACE", "job1"}}, fake);
  CHECK(calls == 1);
  CHECK((id.source == "PMIx" && id.rank == 6 && id.world_size == 12 && id.local_rank == 2 && id.node_rank == 1));
}

TEST_CASE("identity errors list what was looked for", "[rendezvous]") {
  try {
    identity_from_env({{"HOME", "/root"}}, no_pmix);
    FAIL("no error");
  } catch (const dl::UsageError& e) {
    std::string msg = e.what();
    for (const char* v : {"DLAUNCH_RANK", "DLAUNCH_WORLD_SIZE", "RANK+WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                          "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "PMIX_RANK", "PMIX_NAMESPACE"})
      CHECK_THAT(msg, Catch::Contains(v));
  }
  CHECK_THROWS_WITH(identity_from_env({{"RANK", "1"}}, no_pmix), Catch::Contains("WORLD_SIZE is not"));
  CHECK_THROWS_WITH(identity_from_env({{"RANK", "x"}, {"WORLD_SIZE", "2"}}, no_pmix), Catch::Contains("RANK='x'"));
  CHECK_THROWS_AS(identity_from_env({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, no_pmix), dl::UsageError);
}

TEST_CASE("Slurm: the master is the first host of the node list, ranges expanded", "[rendezvous]") {
  Environment base{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}};
  auto master = [&](const std::string& list) {
    Environment e = base;
    e["SLURM_JOB_NODELIST"] = list;
    return identity_from_env(e, no_pmix).master_addr;
  };
  CHECK(master("node1") == "node1");
  CHECK(master("node[03-04,07],gpu1") == "node03");
  CHECK(master("a,b") == "a");
  CHECK(master("rack[2-3]-n[5,9]") == "rack2-n5");
  CHECK_THROWS_WITH(master("n[1-2"), Catch::Contains("SLURM_JOB_NODELIST"));
}

TEST_CASE("connect_store: env:// with DLAUNCH_STORE_ADDR, tcp:// with rank 0 hosting, file://", "[rendezvous]") {
  TcpEnv env;
  Environment vars{{"DLAUNCH_STORE_ADDR", "127.0.0.1:" + std::to_string(env.server.port())},
                   {"DLAUNCH_TOKEN", env.token}};
  auto a = connect_store("env://", 1, 2, 5000ms, vars);
  a->set("x", "1");
  CHECK(env.client()->get("x") == "1");
  CHECK_THROWS_AS(connect_store("env://", 1, 2, 500ms, {{"DLAUNCH_STORE_ADDR", vars["DLAUNCH_STORE_ADDR"]}}),
                  dl::AuthError);
  CHECK_THROWS_WITH(connect_store("env://", 0, 1, 500ms, {}), Catch::Contains("MASTER_ADDR"));
  CHECK_THROWS_AS(connect_store("udp://x:1", 0, 1, 500ms, {}), dl::UsageError);

  // Rank 0 hosts on a port that is free: found by a server that then goes away.
  uint16_t port;
  { BackgroundStoreServer probe("127.0.0.1", 0, "t"); port = probe.port(); }
  const std::string url = "tcp://127.0.0.1:" + std::to_string(port);
  auto r0 = connect_store(url, 0, 2, 5000ms, {});
  auto r1 = connect_store(url, 1, 2, 5000ms, {});
  r1->set("from1", "hi");
  CHECK(r0->get("from1") == "hi");

  TempDir dir;
  auto f0 = connect_store("file://" + dir.path + "/s", 0, 2, 5000ms, {});
  auto f1 = connect_store("file://" + dir.path + "/s", 1, 2, 5000ms, {});
  f0->set("k", "v");
  CHECK(f1->get("k") == "v");
  CHECK_THROWS_AS(connect_store("file://relative", 0, 1, 500ms, {}), dl::UsageError);
}
