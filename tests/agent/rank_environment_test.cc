// compose_rank_env: the layers of a rank's environment, and the outer
// launcher's identity removed before dlaunch's own is added.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>

#include "agent/rank_environment.h"
#include "agent/stack_dump.h"
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
  // Configuration, not identity: a container image's PMIx tuning stays.
  CHECK_FALSE(dl::env::is_foreign_identity_var("PMIX_MCA_gds"));
  CHECK(dl::env::is_foreign_identity_var("PMIX_RANK"));
  CHECK_FALSE(dl::env::is_foreign_identity_var("PMI"));
}

TEST_CASE("rank environment: of the PMI_ names only PMI's identity and socket are an outer launcher's",
          "[agent]") {
  for (const char* name : {"PMI_RANK", "PMI_SIZE", "PMI_FD", "PMI_PORT", "PMI_ID"}) {
    INFO(name);
    CHECK(dl::env::is_foreign_identity_var(name));
  }
  // A name that merely starts with PMI_ is the user's: it reaches the ranks unchanged.
  CHECK_FALSE(dl::env::is_foreign_identity_var("PMI_ENV_PORT"));
  CHECK_FALSE(dl::env::is_foreign_identity_var("PMI_RANKS_FILE"));
  auto env = compose_rank_env({{"PMI_ENV_PORT", "7001"}, {"PMI_PORT", "h:1"}}, {}, {{"PMI_RANK", "0"}}, {});
  CHECK(env.at("PMI_ENV_PORT") == "7001");
  CHECK(env.count("PMI_PORT") == 0);
}

TEST_CASE("rank environment: the identity table decides by name, a launcher's own namespace by its family",
          "[agent]") {
  // Names: OpenMPI's and Hydra's per-rank ones, not what merely begins so.
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_NODE_RANK", "OMPI_UNIVERSE_SIZE",
                           "MPI_LOCALRANKID", "MPI_LOCALNRANKS"}) {
    INFO(name);
    CHECK(dl::env::is_foreign_identity_var(name));
  }
  for (const char* name : {"OMPI_COMM_WORLD_NOTE", "MPI_LOCAL_SCRATCH", "OMPI_UNIVERSE_SIZE_HINT", "OMPI_MCA_btl"}) {
    INFO(name);
    CHECK_FALSE(dl::env::is_foreign_identity_var(name));
  }
  // Families: a namespace one launcher owns whole, its exceptions first.
  for (const char* name : {"PMIX_SERVER_URI51", "PMIX_DSTORE_21_BASE_PATH", "OMPI_MCA_orte_hnp_uri",
                           "OMPI_MCA_ess_base_jobid", "HYDRA_CONTROL_FD"}) {
    INFO(name);
    CHECK(dl::env::is_foreign_identity_var(name));
  }
  auto env = compose_rank_env({{"MPI_LOCAL_SCRATCH", "/scratch"}, {"PMIX_MCA_gds", "hash"}, {"PMIX_ID", "x"}}, {}, {}, {});
  CHECK(env.at("MPI_LOCAL_SCRATCH") == "/scratch");
  CHECK(env.at("PMIX_MCA_gds") == "hash");
  CHECK(env.count("PMIX_ID") == 0);
}

TEST_CASE("rank environment: Slurm's task-only variables go, job-level ones stay", "[agent][slurm]") {
  EnvVars inherited{{"SLURM_JOB_ID", "77"}, {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASK_PID", "4711"},
                    {"SLURM_GTIDS", "0"},   {"SLURM_PROCID", "0"}};
  auto env = compose_rank_env(inherited, {}, {{"SLURM_PROCID", "3"}}, {});
  CHECK(env.count("SLURM_TASK_PID") == 0);
  CHECK(env.count("SLURM_GTIDS") == 0);
  CHECK(env.at("SLURM_PROCID") == "3");
  CHECK(env.at("SLURM_JOB_ID") == "77");
  CHECK(env.at("SLURM_JOB_NODELIST") == "n[1-2]");
}

TEST_CASE("torch error file: the exception, its message and where it was raised, in one line", "[agent][torchrun]") {
  using dl::agent::summarize_torch_error;
  // As torch 1.13's ErrorHandler.record_exception writes it.
  const std::string torch113 = R"({"message": {"message": "ValueError: bad lr 3.0", "extraInfo": {"py_callstack":
    "Traceback (most recent call last):\n  File \"/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py\", line 346, in wrapper\n    return f(*args, **kwargs)\n  File \"/work/train.py\", line 30, in main\n    step(lr)\n  File \"/work/train.py\", line 12, in step\n    raise ValueError(f\"bad lr {lr}\")\nValueError: bad lr 3.0\n",
    "timestamp": "1700000000"}}})";
  CHECK(summarize_torch_error(torch113) == "ValueError: bad lr 3.0 (at /work/train.py:12)");
  // Newer torch, or a file without a traceback: the message alone.
  CHECK(summarize_torch_error(R"({"message": "RuntimeError: oops"})") == "RuntimeError: oops");
  CHECK(summarize_torch_error(R"({"message": {"message": "KeyError: 'x'", "extraInfo": {}}})") == "KeyError: 'x'");
  // A multi-line, huge message keeps its first line, cut.
  const std::string long_msg = R"({"message": {"message": "AssertionError: )" + std::string(1000, 'x') + R"(\nmore"}})";
  auto cut = summarize_torch_error(long_msg);
  REQUIRE(cut);
  CHECK(cut->size() < 320);
  CHECK(cut->find("more") == std::string::npos);
  // Not torch's format: nothing.
  CHECK_FALSE(summarize_torch_error("not json"));
  CHECK_FALSE(summarize_torch_error("[1, 2]"));
  CHECK_FALSE(summarize_torch_error(R"({"error": "x"})"));
  CHECK_FALSE(summarize_torch_error(""));
}

TEST_CASE("torch error files: one file per rank in the job's Python dir, made on demand, removed", "[agent][torchrun]") {
  std::string dir;
  {
    dl::agent::PythonDir py;
    dl::agent::TorchErrorFiles files(py);
    const std::string p = files.path(3);
    REQUIRE_FALSE(p.empty());
    // dlaunch-<pid>-: the name the next agent's sweep of dead agents' dirs knows.
    CHECK(p.find("/dlaunch-" + std::to_string(::getpid()) + "-py-") != std::string::npos);
    CHECK(files.path(4) != p);
    dir = p.substr(0, p.rfind('/'));
    CHECK(dir == py.path());
    // Named, not made: a job of non-Python programs makes no directory.
    CHECK(::access(dir.c_str(), F_OK) != 0);
    CHECK_FALSE(files.read(3));
    files.remove();  // nothing to remove: no error
    REQUIRE(py.ensure());
    REQUIRE(py.ensure());  // made already: still fine
    CHECK_FALSE(files.read(3));  // the rank wrote nothing
    {
      FILE* f = std::fopen(p.c_str(), "w");
      REQUIRE(f);
      std::fputs(R"({"message": {"message": "ZeroDivisionError: division by zero", "extraInfo": {"py_callstack":
        "Traceback (most recent call last):\n  File \"/t/x.py\", line 5, in <module>\n    1/0\n"}}})", f);
      std::fclose(f);
    }
    { FILE* f = std::fopen((dir + "/py.77.stack").c_str(), "w"); REQUIRE(f); std::fclose(f); }
    CHECK(files.read(3) == "ZeroDivisionError: division by zero (at /t/x.py:5)");
    // A restart: the error files go, the directory (and the stack dumps) stay.
    files.remove();
    CHECK(::access(p.c_str(), F_OK) != 0);
    CHECK(::access((dir + "/py.77.stack").c_str(), F_OK) == 0);
    CHECK_FALSE(files.read(3));
  }
  // The PythonDir's end removes the directory and everything in it.
  CHECK(::access(dir.c_str(), F_OK) != 0);
}

TEST_CASE("python dir: which programs are Python, and the installed hook beside the binary", "[agent]") {
  using dl::agent::PythonDir;
  CHECK(PythonDir::is_python("/usr/bin/python3"));
  CHECK(PythonDir::is_python("/opt/venv/bin/python3.11"));
  CHECK_FALSE(PythonDir::is_python("/bin/true"));
  CHECK_FALSE(PythonDir::is_python("/usr/bin/mypython"));
  // The test binary is in build/bin: build/share/dlaunch/python holds the hook.
  const std::string hook = PythonDir::installed_hook_dir();
  REQUIRE_FALSE(hook.empty());
  CHECK(::access((hook + "/sitecustomize.py").c_str(), R_OK) == 0);
}

// The per-launch base (rank_env_base) and a rank's own layers on it give
// exactly what composing the whole environment per rank gave, in the same
// (sorted) order.
TEST_CASE("rank environment: the shared base and a rank's layers give what compose_rank_env gives", "[agent]") {
  using dl::agent::rank_env_base;
  using dl::agent::rank_env_strings;
  using dl::agent::rank_env_value;
  EnvVars inherited{{"PATH", "/usr/bin"}, {"HOME", "/root"}, {"A", "inherited"}, {"B", "inherited"},
                    {"C", "inherited"}, {"PMIX_RANK", "9"}, {"OMPI_COMM_WORLD_RANK", "9"}, {"ZZ", "last"}};
  EnvVars common{{"A", "common"}, {"B", "common"}, {"WORLD_SIZE", "4"}};
  const auto base = rank_env_base(inherited, common);
  auto strings = [](const EnvVars& env) {
    std::vector<std::string> out;
    for (const auto& [k, v] : env) out.push_back(k + "=" + v);
    return out;
  };
  const std::vector<std::pair<EnvVars, std::vector<std::pair<std::string, std::string>>>> cases = {
      {{}, {}},                                                               // nothing of its own
      {{{"B", "own"}, {"RANK", "3"}}, {{"C", "server"}, {"PMIX_RANK", "3"}}},  // overrides and new names
      {{{"AA", "first"}, {"ZZZ", "after all"}}, {{"0", "before all"}}},        // names at either end
      {{{"RANK", "1"}}, {{"RANK", "server wins"}}},                           // the server over the rank's own
  };
  for (const auto& [own, server] : cases) {
    EnvVars over = own;
    for (const auto& [k, v] : server) over[k] = v;
    const auto want = strings(compose_rank_env(inherited, common, own, server));
    CHECK(rank_env_strings(base, over) == want);
  }
  // Lookups see the rank's value first, then the base's; the filtered ones are gone.
  EnvVars over{{"PATH", "/opt/bin"}};
  REQUIRE(rank_env_value(base, over, "PATH") != nullptr);
  CHECK(*rank_env_value(base, over, "PATH") == "/opt/bin");
  CHECK(*rank_env_value(base, over, "HOME") == "/root");
  CHECK(*rank_env_value(base, over, "A") == "common");
  CHECK(rank_env_value(base, over, "PMIX_RANK") == nullptr);
  CHECK(rank_env_value(base, over, "NOT_SET") == nullptr);
}

TEST_CASE("rank contributors: the error file and the stack hook, each over what the rank has so far",
          "[agent][torchrun]") {
  boost::asio::io_context io;
  dl::agent::PythonDir py;
  dl::agent::TorchErrorFiles files(py);
  dl::agent::StackDumper stacks(io, py);
  const EnvVars base{{"PATH", "/usr/bin"}, {"PYTHONPATH", "/site"}};
  EnvVars over;
  const auto error = files.task_env(3, {base, over});
  REQUIRE(error.vars.size() == 1);
  CHECK(error.vars[0] == std::make_pair(std::string("TORCHELASTIC_ERROR_FILE"), files.path(3)));
  CHECK(error.inherit_fd == -1);
  // The hook goes in front of the PYTHONPATH the rank has so far: the
  // launch's, or the rank's own over it.
  auto hook = stacks.task_env(3, {base, over});
  REQUIRE(hook.vars.size() == 2);
  CHECK(hook.vars[0].first == "PYTHONPATH");
  const std::string hook_dir = hook.vars[0].second.substr(0, hook.vars[0].second.find(':'));
  CHECK(hook.vars[0].second == hook_dir + ":/site");
  CHECK(hook.vars[1] == std::make_pair(std::string("DLAUNCH_PYTHON_DIR"), py.path()));
  over["PYTHONPATH"] = "/mine";
  CHECK(stacks.task_env(3, {base, over}).vars[0].second == hook_dir + ":/mine");
  over["PYTHONPATH"] = "";
  CHECK(stacks.task_env(3, {base, over}).vars[0].second == hook_dir);
  // A spawned child's fixed variables, whatever the rank.
  const dl::mpi::EnvList pmix{{"PMIX_RANK", "0"}};
  dl::agent::FixedContribution fixed(pmix);
  CHECK(fixed.task_env(7, {base, over}).vars == pmix);
  py.remove();
}
