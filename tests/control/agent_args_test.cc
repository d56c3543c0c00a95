// The agent's command line: what the launcher builds, the agent parses back
// to the same options, from one table.
#include <catch2/catch.hpp>

#include "control/agent_args.h"
#include "errors/error.h"

namespace control = dl::control;

TEST_CASE("agent args: every option survives to_argv and parse", "[control]") {
  control::AgentArgs a;
  a.connect_host = "10.1.2.3", a.connect_port = 4242, a.node = 7, a.gpus_per_node = 4;
  a.detect_gpus = false, a.prepare_pmix = false, a.cpu_topology = true, a.sim_host = "sim-b";
  const auto argv = control::to_argv(a);
  CHECK(argv == std::vector<std::string>{"--connect", "10.1.2.3:4242", "--node", "7", "--gpus-per-node", "4",
                                         "--no-gpu-bind", "--no-pmix", "--cpu-topology", "--sim-host", "sim-b"});
  const auto p = control::parse_agent_args(argv);
  CHECK_FALSE(p.version);
  CHECK(p.args.connect_host == "10.1.2.3");
  CHECK(p.args.connect_port == 4242);
  CHECK(p.args.node == 7);
  CHECK(p.args.gpus_per_node == 4);
  CHECK_FALSE(p.args.detect_gpus);
  CHECK_FALSE(p.args.prepare_pmix);
  CHECK(p.args.cpu_topology);
  CHECK(p.args.sim_host == "sim-b");
}

TEST_CASE("agent args: defaults and IPv6 addresses", "[control]") {
  control::AgentArgs a;
  a.connect_host = "fd00::2", a.connect_port = 1, a.node = 0;
  const auto argv = control::to_argv(a);
  CHECK(argv == std::vector<std::string>{"--connect", "[fd00::2]:1", "--node", "0"});
  const auto p = control::parse_agent_args(argv);
  CHECK(p.args.connect_host == "fd00::2");
  CHECK(p.args.gpus_per_node == -1);
  CHECK(p.args.detect_gpus);
  CHECK(p.args.prepare_pmix);
  CHECK_FALSE(p.args.cpu_topology);
  CHECK(p.args.sim_host.empty());
}

TEST_CASE("agent args: bad command lines are usage errors that name the option", "[control]") {
  auto why = [](std::vector<std::string> argv) -> std::string {
    try {
      control::parse_agent_args(argv);
    } catch (const dl::UsageError& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(why({"--node", "1"}).find("connect") != std::string::npos);
  CHECK(why({"--connect", "h:1"}).find("node") != std::string::npos);
  CHECK(why({"--connect", "h:1", "--node", "1", "--frobnicate"}).find("frobnicate") != std::string::npos);
  CHECK(why({"--connect", "h:1", "--node", "x"}).find("node") != std::string::npos);
  CHECK(why({"--connect", "h:1", "--node", "-2"}).find("--node") != std::string::npos);
  CHECK(why({"--connect", "nohostport", "--node", "1"}).find("--connect") != std::string::npos);
  CHECK(why({"--connect", "h:1", "--control-fd", "3", "--node", "1"}).find("one of them") != std::string::npos);
  CHECK(why({"--control-fd", "1", "--node", "1"}).find("--control-fd") != std::string::npos);
  CHECK(control::parse_agent_args({"--version"}).version);
}

TEST_CASE("agent args: a local agent's inherited control socket in place of --connect", "[control]") {
  control::AgentArgs a;
  a.control_fd = 3;
  a.node = 0;
  a.connect_host = "127.0.0.1", a.connect_port = 9;  // not used with a control fd
  const auto argv = control::to_argv(a);
  CHECK(argv == std::vector<std::string>{"--control-fd", "3", "--node", "0"});
  const auto back = control::parse_agent_args(argv).args;
  CHECK(back.control_fd == 3);
  CHECK(back.connect_host.empty());
  CHECK(control::parse_agent_args({"--connect", "h:1", "--node", "0"}).args.control_fd == -1);
}

TEST_CASE("agent args: --node-names in place of --node (one srun for every agent)", "[control][slurm]") {
  control::AgentArgs a;
  a.connect_host = "10.0.0.1", a.connect_port = 9, a.node_names = {"n3", "n1", "gpu7"};
  const auto argv = control::to_argv(a);
  CHECK(argv == std::vector<std::string>{"--connect", "10.0.0.1:9", "--node-names", "n3,n1,gpu7"});
  CHECK(control::parse_agent_args(argv).args.node_names == a.node_names);
  // Exactly one of the two; no empty names.
  CHECK_THROWS_WITH(control::parse_agent_args({"--connect", "h:1"}), Catch::Contains("--node K or --node-names"));
  CHECK_THROWS_WITH(control::parse_agent_args({"--connect", "h:1", "--node", "0", "--node-names", "a"}),
                    Catch::Contains("one of them"));
  CHECK_THROWS_WITH(control::parse_agent_args({"--connect", "h:1", "--node-names", "a,,b"}),
                    Catch::Contains("empty name"));
}

TEST_CASE("agent args: an agent finds its node by its own name", "[control][slurm]") {
  const std::vector<std::string> names{"n3", "n1", "gpu7.site"};
  CHECK(control::find_own_node(names, {"n1", "other"}) == 1);      // SLURMD_NODENAME first
  CHECK(control::find_own_node(names, {"", "n3.cluster"}) == 0);   // no SLURMD_NODENAME: the host name, short
  CHECK(control::find_own_node(names, {"gpu7", "x"}) == 2);
  CHECK_THROWS_WITH(control::find_own_node(names, {"n9", "n9.cluster"}),
                    "this host (n9 or n9.cluster) is none of the job's nodes (n3,n1,gpu7.site): the launcher's host "
                    "names must be the scheduler's node names");
}

TEST_CASE("agent args: --name=value, repeats, missing values and stray words", "[control]") {
  const auto p = control::parse_agent_args({"--control-fd=3", "--node=2", "--gpus-per-node=4", "--no-pmix"});
  CHECK(p.args.control_fd == 3);
  CHECK(p.args.node == 2);
  CHECK(p.args.gpus_per_node == 4);
  CHECK_FALSE(p.args.prepare_pmix);
  CHECK(control::parse_agent_args({"--help"}).help);
  CHECK_THROWS_WITH(control::parse_agent_args({"--control-fd", "3", "--node", "1", "--node", "2"}),
                    Catch::Contains("'--node' cannot be given more than once"));
  CHECK_THROWS_WITH(control::parse_agent_args({"--control-fd", "3", "--node"}),
                    Catch::Contains("argument for option '--node' is missing"));
  CHECK_THROWS_WITH(control::parse_agent_args({"--control-fd", "3", "--node", "1", "--no-pmix=yes"}),
                    Catch::Contains("'--no-pmix' does not take a value"));
  CHECK_THROWS_WITH(control::parse_agent_args({"--control-fd", "3", "--node", "1", "extra"}),
                    Catch::Contains("unexpected argument 'extra'"));
  CHECK_THROWS_WITH(control::parse_agent_args({"--control-fd", "3x", "--node", "1"}),
                    Catch::Contains("'--control-fd'") && Catch::Contains("expected an integer"));
  // The usage lists every option to_argv can write.
  const std::string usage = control::agent_usage();
  for (const char* name : {"--connect", "--control-fd", "--node", "--node-names", "--gpus-per-node", "--no-gpu-bind",
                           "--no-pmix", "--cpu-topology", "--version", "--help"})
    CHECK_THAT(usage, Catch::Contains(name));
}
