// The agent's command line: what the launcher builds, the agent parses back
// to the same options, from one table.
#include <catch2/catch.hpp>

#include "control/agent_args.h"
#include "errors/error.h"

namespace control = dl::control;

TEST_CASE("agent args: every option survives to_argv and parse", "[control]") {
  control::AgentArgs a;
  a.connect_host = "10.1.2.3", a.connect_port = 4242, a.node = 7, a.gpus_per_node = 4;
  a.detect_gpus = false, a.prepare_pmix = false, a.cpu_topology = true;
  const auto argv = control::to_argv(a);
  CHECK(argv == std::vector<std::string>{"--connect", "10.1.2.3:4242", "--node", "7", "--gpus-per-node", "4",
                                         "--no-gpu-bind", "--no-pmix", "--cpu-topology"});
  const auto p = control::parse_agent_args(argv);
  CHECK_FALSE(p.version);
  CHECK(p.args.connect_host == "10.1.2.3");
  CHECK(p.args.connect_port == 4242);
  CHECK(p.args.node == 7);
  CHECK(p.args.gpus_per_node == 4);
  CHECK_FALSE(p.args.detect_gpus);
  CHECK_FALSE(p.args.prepare_pmix);
  CHECK(p.args.cpu_topology);
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
  CHECK(control::parse_agent_args({"--version"}).version);
}
