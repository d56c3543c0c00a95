// The PmixServer inside the test process (each ctest case is its own
// process, so libpmix's one-per-process rule holds): what rank_env gives,
// what it refuses, and that stop() leaves nothing in the job's tmpdir.
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <filesystem>
#include <map>

#include "mpi/pmix/pmix_server.h"
#include "errors/error.h"

using namespace dl::mpi::pmix;
using dl::mpi::JobMap;

TEST_CASE("pmix server refuses a job map without its per-job directory", "[pmix]") {
  JobMap m;
  m.nspace = "dl-tmp", m.world_size = 1, m.node_hosts = {"h"}, m.node_ranks = {{0}};
  REQUIRE_NOTHROW(dl::mpi::validate(m));
  CHECK_THROWS_WITH(validate_served(m), Catch::Contains("tmpdir"));
  m.tmpdir = "/nonexistent";
  CHECK_NOTHROW(validate_served(m));
}

TEST_CASE("pmix server gives local ranks their PMIx and OpenMPI variables", "[pmix]") {
  char tmpl[] = "/tmp/dl_pmix_test.XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  JobMap m;
  m.nspace = "dlaunch.unit";
  m.world_size = 4;
  m.node_rank = 0;
  m.node_hosts = {"hostA", "hostB"};
  m.node_ranks = {{0, 1}, {2, 3}};
  m.tmpdir = tmpl;
  dl::mpi::MpiHooks cb;
  cb.post = [](std::function<void()> t) { t(); };
  auto server = PmixServer::start(m, cb);
  CHECK(std::filesystem::is_directory(std::string(tmpl) + "/pmix"));

  std::map<std::string, std::string> env;
  for (auto& [k, v] : server->rank_env(1)) env[k] = v;
  CHECK(env["PMIX_NAMESPACE"] == "dlaunch.unit");
  CHECK(env["PMIX_RANK"] == "1");
  CHECK(env.count("PMIX_SERVER_URI41") + env.count("PMIX_SERVER_URI4") + env.count("PMIX_SERVER_URI3") > 0);
  CHECK(env["OMPI_MCA_schizo"] == "^orte");
  CHECK(env["OMPI_MCA_orte_tmpdir_base"] == tmpl);
  CHECK_THROWS_AS(server->rank_env(2), dl::UsageError);  // lives on hostB
  CHECK_THROWS_AS(PmixServer::start(m, cb), dl::UsageError);  // one per process

  server->fence_done(12345, "ignored");  // unknown id: no effect, no crash
  server->stop();
  CHECK_FALSE(std::filesystem::exists(std::string(tmpl) + "/pmix"));
  CHECK(std::filesystem::is_empty(tmpl));
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("pmix server started before the job: register_job later, the plan's host name", "[pmix]") {
  char tmpl[] = "/tmp/dl_pmix_test.XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  // The agent's order: init (no job, no host name yet) while it connects...
  auto server = PmixServer::init(tmpl, "", false);
  CHECK_THROWS_AS(server->rank_env(0), dl::UsageError);  // no job yet
  JobMap m;
  m.nspace = "dlaunch.late";
  m.world_size = 3;
  m.node_rank = 1;
  m.node_hosts = {"hostA", "plan-name-of-this-host"};
  m.node_ranks = {{0}, {1, 2}};
  m.tmpdir = tmpl;
  dl::mpi::MpiHooks cb;
  cb.post = [](std::function<void()> t) { t(); };
  JobMap other = m;
  other.tmpdir = "/elsewhere";
  CHECK_THROWS_AS(server->register_job(other, cb), dl::UsageError);  // not the server's dir
  // ... then the launch message's job.
  server->register_job(m, cb);
  CHECK_THROWS_AS(server->register_job(m, cb), dl::UsageError);  // one job per server
  std::map<std::string, std::string> env;
  for (auto& [k, v] : server->rank_env(2)) env[k] = v;
  CHECK(env["PMIX_NAMESPACE"] == "dlaunch.late");
  CHECK(env["PMIX_RANK"] == "2");
  CHECK(env["PMIX_HOSTNAME"] == "plan-name-of-this-host");
  CHECK_THROWS_AS(server->rank_env(0), dl::UsageError);  // lives on hostA
  server->stop();
  CHECK(std::filesystem::is_empty(tmpl));
  std::filesystem::remove_all(tmpl);
}
