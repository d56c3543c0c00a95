// --launcher and the srun command that starts every remote agent
// (remote/start_method.h, remote/slurm_starter.h): the pure parts. The real
// srun runs in tests/slurm.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>

#include "errors/error.h"
#include "remote/sim_starter.h"
#include "remote/slurm_starter.h"
#include "remote/start_method.h"

namespace remote = dl::remote;
using SM = dl::remote::StartMethod;

TEST_CASE("start method: auto is slurm inside a Slurm job, else libssh", "[remote][slurm]") {
  CHECK(remote::resolve_start_method("auto", "") == SM::kLibssh);
  CHECK(remote::resolve_start_method("auto", "4242") == SM::kSlurm);
  CHECK(remote::resolve_start_method("libssh", "4242") == SM::kLibssh);
  CHECK(remote::resolve_start_method("slurm", "4242", {"/opt/slurm/bin/srun"}) == SM::kSlurm);
}

TEST_CASE("start method: bad choices say what to do", "[remote][slurm]") {
  CHECK_THROWS_WITH(remote::resolve_start_method("slurm", ""), Catch::Contains("SLURM_JOB_ID is unset"));
  CHECK_THROWS_WITH(remote::resolve_start_method("srun", ""),
                    "--launcher takes libssh, ssh, slurm, auto, got 'srun' (did you mean slurm?)");
  CHECK_THROWS_WITH(remote::resolve_start_method("libssh", "", {"/usr/bin/ssh"}), Catch::Contains("drop --launcher-exec"));
  CHECK_THROWS_AS(remote::resolve_start_method("", ""), dl::UsageError);
}

TEST_CASE("start method: --launcher-exec splits at blanks", "[remote][slurm]") {
  CHECK(remote::split_launcher_exec("  /opt/srun   --reservation=r ") ==
        std::vector<std::string>{"/opt/srun", "--reservation=r"});
  CHECK(remote::split_launcher_exec("").empty());
}

TEST_CASE("slurm starter: one srun step, one task per node, the agent's argv after it", "[remote][slurm]") {
  const auto v = remote::srun_argv({}, {"n2", "n1"}, {"/p/dlaunch-agent", "--connect", "10.0.0.1:5", "--node-names", "n2,n1"});
  CHECK(v == std::vector<std::string>{"srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=n2,n1",
                                      "--overlap", "--kill-on-bad-exit=1", "--cpu-bind=none", "--mpi=none",
                                      "--input=all", "/p/dlaunch-agent", "--connect", "10.0.0.1:5", "--node-names",
                                      "n2,n1"});
  // --spares, --min-hosts: one agent's end or its node's failure ends no other.
  const auto k = remote::srun_argv({}, {"n1"}, {"x"}, true);
  CHECK(std::find(k.begin(), k.end(), "--kill-on-bad-exit=0") != k.end());
  CHECK(std::find(k.begin(), k.end(), "--no-kill") != k.end());
  CHECK(std::find(k.begin(), k.end(), "--kill-on-bad-exit=1") == k.end());
  const auto w = remote::srun_argv({"/opt/slurm/bin/srun", "--reservation=r"}, {"a"}, {"x"});
  CHECK(w[0] == "/opt/slurm/bin/srun");
  CHECK(w[1] == "--reservation=r");
  CHECK(w.back() == "x");
}

TEST_CASE("slurm starter: srun's complaints are given to the node they name", "[remote][slurm]") {
  const auto by = remote::srun_errors_by_host(
      {"srun: error: n1: task 0: Exited with exit code 127", "srun: error: Node failure on n10.",
       "dlaunch-agent: error: this host (n2) is none", "srun: error: n[3-4,10]: tasks 1-3: Exited with exit code 2",
       "srun: Job step aborted", "slurmstepd-n5: error: execve(): /x/dlaunch-agent: No such file or directory"},
      {"n1", "n10", "n2", "n3", "n4", "n5"});
  CHECK(by.at("n1") == "srun: error: n1: task 0: Exited with exit code 127");  // not n10's lines
  CHECK(by.at("n10") == "srun: error: Node failure on n10.; srun: error: n[3-4,10]: tasks 1-3: Exited with exit code 2");
  CHECK(by.at("n2") == "dlaunch-agent: error: this host (n2) is none");
  CHECK(by.at("n3") == "srun: error: n[3-4,10]: tasks 1-3: Exited with exit code 2");
  CHECK(by.at("n4") == by.at("n3"));
  CHECK(by.at("n5") == "slurmstepd-n5: error: execve(): /x/dlaunch-agent: No such file or directory");
  CHECK(by.size() == 6);  // "Job step aborted" names no host
}

TEST_CASE("slurm starter: srun's lines that say it waits for resources are recognized, others are not",
          "[remote][slurm]") {
  // As srun writes them (src/srun: info() at the first and later retries; verbose() for a prolog).
  CHECK(dl::remote::srun_wait_reason("srun: Job 7 step creation temporarily disabled, retrying (Requested nodes are busy)") ==
        "Requested nodes are busy");
  CHECK(dl::remote::srun_wait_reason("srun: Job 7 step creation still disabled, retrying (Requested nodes are busy)") ==
        "Requested nodes are busy");
  CHECK(dl::remote::srun_wait_reason("srun: Job step creation temporarily disabled, retrying") == "step creation temporarily disabled");
  CHECK(dl::remote::srun_wait_reason("srun: Resources allocated for job 7 and being configured, please wait") == "being configured");
  CHECK(dl::remote::srun_wait_reason("srun: error: h2: task 1: Exited with exit code 127").empty());
  CHECK(dl::remote::srun_wait_reason("srun: error: Unable to create step for job 7: Job/step already completing or completed").empty());
  CHECK(dl::remote::srun_wait_reason("").empty());
}

TEST_CASE("slurm starter: the waiting message quotes srun, names the job's steps and what to do", "[remote][slurm]") {
  const std::string line = "srun: Job 7 step creation temporarily disabled, retrying (Requested nodes are busy)";
  const std::string m = dl::remote::srun_waiting_message(line, "7");
  CHECK_THAT(m, Catch::StartsWith("srun is waiting for resources to start the agents' step (" + line + ")"));
  CHECK_THAT(m, Catch::Contains("squeue -s -j 7") && Catch::Contains("scancel 7.STEP") &&
                    Catch::Contains("--agent-timeout"));
  // srun said nothing (22.05 waits silently): likely, not certain, and the other cause named.
  const std::string silent = dl::remote::srun_waiting_message("", "");
  CHECK_THAT(silent, Catch::Contains("likely still waiting") && Catch::Contains("squeue -s -j JOBID") &&
                         Catch::Contains("--control-addr"));
}

TEST_CASE("start method: libssh and ssh fork the local node's agent, slurm's srun starts it", "[remote][slurm]") {
  CHECK(remote::forks_local_agent(SM::kLibssh));
  CHECK(remote::forks_local_agent(SM::kSsh));
  CHECK_FALSE(remote::forks_local_agent(SM::kSlurm));
}

TEST_CASE("start method: one table of words, and auto is none of them", "[remote]") {
  for (SM m : {SM::kLibssh, SM::kSsh, SM::kSlurm, SM::kSim}) CHECK(remote::start_method_named(remote::word(m)) == m);
  CHECK(std::string(remote::word(SM::kSlurm)) == "slurm");
  CHECK_FALSE(remote::start_method_named("auto"));  // a --launcher word, resolved before any starter
  CHECK_FALSE(remote::start_method_named("srun"));
  CHECK(remote::starts_tree(SM::kSsh));
  CHECK_FALSE(remote::starts_tree(SM::kSlurm));
  CHECK(remote::passes_environment(SM::kSlurm));
  CHECK_FALSE(remote::passes_environment(SM::kLibssh));
  CHECK(remote::simulates_hosts(SM::kSim));
  CHECK_FALSE(remote::simulates_hosts(SM::kSsh));
}

TEST_CASE("start method: sim runs only with DLAUNCH_SIM=1 and is in no list users see", "[remote][sim]") {
  const char* before = std::getenv(remote::kSimEnv);
  const std::string saved = before ? before : "";
  ::unsetenv(remote::kSimEnv);
  CHECK_THROWS_WITH(remote::resolve_start_method("sim", ""),
                    Catch::Contains("not for jobs") && Catch::Contains("DLAUNCH_SIM=1"));
  ::setenv(remote::kSimEnv, "yes", 1);
  CHECK_THROWS_AS(remote::resolve_start_method("sim", ""), dl::UsageError);
  ::setenv(remote::kSimEnv, "1", 1);
  CHECK(remote::resolve_start_method("sim", "") == SM::kSim);
  CHECK(remote::forks_local_agent(SM::kSim));
  if (before) ::setenv(remote::kSimEnv, saved.c_str(), 1);
  else ::unsetenv(remote::kSimEnv);
  const auto names = remote::start_method_names();
  CHECK(std::find(names.begin(), names.end(), "sim") == names.end());
}

TEST_CASE("sim starter: each node's own loopback address, never the launcher's 127.0.0.1", "[remote][sim]") {
  CHECK(remote::sim_address(0) == "127.0.0.2");
  CHECK(remote::sim_address(253) == "127.0.0.255");
  CHECK(remote::sim_address(254) == "127.0.1.0");
  CHECK(remote::sim_address(1023) == "127.0.4.1");
  CHECK(remote::sim_address(0xfffffe - 2) == "127.255.255.254");
  CHECK_THROWS_AS(remote::sim_address(0xfffffe - 1), dl::UsageError);
  CHECK_THROWS_AS(remote::sim_address(-1), dl::UsageError);
}
