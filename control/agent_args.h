#pragma once
// dlaunch-agent's command line: part of the control protocol, defined once.
// The launcher builds it with to_argv(); the agent parses it with
// parse_agent_args(); both read the one option table in agent_args.cc, so an
// option cannot be added on one side only. The job token is never here: it
// arrives as the first line of the agent's stdin.
#include <cstdint>
#include <string>
#include <vector>

namespace dl::control {

struct AgentArgs {
  std::string connect_host;    // the launcher's control server
  uint16_t connect_port = 0;
  // --control-fd N, in place of --connect: the local agent's end of a
  // socketpair its launcher made, inherited as fd N; authenticated by
  // construction (only the launcher and its child hold it), so no handshake.
  int control_fd = -1;
  int node = 0;                // the node index this agent runs
  // --node-names h1,h2,..: instead of --node, for one command that starts
  // every agent (srun): each agent's node is where its own name is in the list.
  std::vector<std::string> node_names;
  int gpus_per_node = -1;      // --gpus-per-node N; -1: detect
  bool detect_gpus = true;     // false: --no-gpu-bind
  bool prepare_pmix = true;    // false: --no-pmix (no PMIx server warming up beside the ranks)
  bool cpu_topology = false;   // --cpu-topology: report cores and NUMA nodes in the hello
  // --sim-host NAME: the test bed's simulated host (--launcher sim): the hello
  // names NAME as the host and a machine identity of its own, so several
  // agents on one machine stand for distinct hosts. Never for a real job.
  std::string sim_host;
  // --parent HOST: started by the launch tree's agent on HOST (agent/relay.h),
  // which --connect reaches, not by the launcher; said when that link is lost.
  std::string parent;
};

// The arguments after the program name, e.g. {"--connect", "10.0.0.1:4000", "--node", "2", "--no-pmix"}
// ({"--control-fd", "3", ...} when control_fd >= 0).
std::vector<std::string> to_argv(const AgentArgs& a);

struct ParsedAgentArgs {
  AgentArgs args;
  bool version = false;  // --version was asked for
  bool help = false;     // --help
};
// Parses what to_argv() built; throws UsageError naming the option at fault.
ParsedAgentArgs parse_agent_args(const std::vector<std::string>& argv);
// The usage text (from the same table).
std::string agent_usage();

// With --node-names: the index of this host in `names`, found by the first of
// `self` (SLURMD_NODENAME, then the host name) that is in it; a short name
// matches a qualified one. Throws UsageError naming `self` and `names` when
// none is.
int find_own_node(const std::vector<std::string>& names, const std::vector<std::string>& self);

}  // namespace dl::control
