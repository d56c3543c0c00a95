// compose_rank_env: the layers of a rank's environment, and the outer
// launcher's identity removed before dlaunch's own is added.
#include <catch2/catch.hpp>

#include "agent/rank_environment.h"
#include "control/env_names.h"

using dl::agent::compose_rank_env;
using dl::agent::EnvVars;

TEST_CASE("rank environment: inherited, then the launch's, then the rank's, then the PMIx server's", "[agent]") {
  EnvVars inherited{{"PATH", "/usr/bin"}, {"HOME", "/root"}, {"A", "inherited"}, {"B", "inherited"},
                    {"C", "inherited"}};
  EnvVars common{{"A", "common"}, {"B", "common"}};
  EnvVars own{{"B", "own"}, {"RANK", "3"}};
  auto env = compose_rank_env(inherited, common, own, {{"C", "server"}, {"PMIX_RANK", "3"}});
  CHECK(env.at("PATH") == "/usr/bin");
  CHECK(env.at("A") == "common");
  CHECK(env.at("B") == "own");
  CHECK(env.at("C") == "server");
  CHECK(env.at("RANK") == "3");
  CHECK(env.at("PMIX_RANK") == "3");
}

TEST_CASE("rank environment: an outer launcher's identity is dropped, dlaunch's own kept", "[agent]") {
  EnvVars inherited{{"PMIX_RANK", "9"},        {"PMIX_SERVER_URI41", "x"}, {"PMI_FD", "5"},
                    {"OMPI_COMM_WORLD_RANK", "9"}, {"HYDRA_CONTROL_FD", "4"},  {"MPI_LOCALRANKID", "1"},
                    {"SLURM_JOB_ID", "77"},     {"USER", "me"}};
  auto env = compose_rank_env(inherited, {}, {{"PMI_RANK", "0"}, {"OMPI_COMM_WORLD_RANK", "0"}}, {});
  CHECK(env.count("PMIX_RANK") == 0);
  CHECK(env.count("PMIX_SERVER_URI41") == 0);
  CHECK(env.count("PMI_FD") == 0);
  CHECK(env.count("HYDRA_CONTROL_FD") == 0);
  CHECK(env.count("MPI_LOCALRANKID") == 0);
  CHECK(env.at("OMPI_COMM_WORLD_RANK") == "0");  // ours, added after the filter
  CHECK(env.at("PMI_RANK") == "0");
  CHECK(env.at("SLURM_JOB_ID") == "77");  // the allocation, not an identity
  CHECK(env.at("USER") == "me");
  CHECK(dl::env::is_foreign_identity_var("PMIX_NAMESPACE"));
  CHECK_FALSE(dl::env::is_foreign_identity_var("RANK"));
  CHECK_FALSE(dl::env::is_foreign_identity_var("PMI"));
}
