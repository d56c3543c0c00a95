// dlaunch-agent: started by the launcher (locally, or over ssh) with the
// command line of control/agent_args.h:
//   dlaunch-agent --connect HOST:PORT --node K [--gpus-per-node N] [--no-gpu-bind] [--no-pmix] [--cpu-topology]
// or, when one srun starts every node's agent, --node-names H1,H2,.. in place
// of --node: the agent's node is where this host's name is in the list.
// The job token arrives as the first line of stdin, never on the command
// line; stdin then stays open, and its EOF means the launcher is gone.
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "agent/agent.h"
#include "agent/agent_main.h"
#include "agent/rank_supervisor.h"
#include "control/agent_args.h"
#include "errors/error.h"
#include "remote/sim_starter.h"
#include "wire/host.h"
#include "wire/socket.h"

namespace dl::agent {
namespace {
// The first line of stdin. Read in chunks (the launcher writes the line in
// one write, so one read): nothing follows it on stdin but EOF, so reading
// past the newline takes nothing the agent needs later.
std::string read_token_line() {
  std::string tok;
  char buf[257];
  while (tok.size() < 256) {
    ssize_t n = ::read(0, buf, sizeof buf - 1 - tok.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    tok.append(buf, static_cast<size_t>(n));
    if (auto nl = tok.find('\n'); nl != std::string::npos) return tok.substr(0, nl);
  }
  return tok.substr(0, 256);
}

// --node-names: this host's names, the scheduler's first (Slurm's task
// environment names the node as slurm.conf does), then the kernel's.
std::vector<std::string> own_names() {
  const char* slurm = std::getenv("SLURMD_NODENAME");
  return {slurm ? slurm : "", wire::host_name()};
}

int usage(const std::string& why) {
  std::cerr << "dlaunch-agent: error: " << why << "\n" << dl::control::agent_usage();
  return 2;
}
}  // namespace

void agent_get_ready(int ranks) { RankSupervisor::get_ready_for(static_cast<size_t>(ranks)); }

int agent_main(int argc, char** argv) {
  dl::wire::open_standard_descriptors();
  dl::wire::raise_descriptor_limit();
  // stdout and stderr are the launcher's ssh channel: once the launcher is
  // gone a write there must fail (EPIPE), not end the agent before it kills
  // its ranks' leftovers and removes the job's temp dirs (an agent stopped
  // for longer than --heartbeat-timeout wrote its last line there and died).
  // Ranks get the default back (rank_process.cc resets ignored signals).
  ::signal(SIGPIPE, SIG_IGN);
  dl::agent::AgentOptions o;
  try {
    auto parsed = dl::control::parse_agent_args(std::vector<std::string>(argv + 1, argv + argc));
    if (parsed.version) {
      std::cout << "dlaunch-agent " DLAUNCH_VERSION "\n";
      return 0;
    }
    if (parsed.help) {
      std::cout << dl::control::agent_usage();
      return 0;
    }
    o.args = parsed.args;
  } catch (const std::exception& e) {
    return usage(e.what());
  }
  // The test bed's plants for this simulated host (remote/sim_starter.h).
  if (const char* plants = std::getenv(dl::remote::kSimHostEnv); plants && !o.args.sim_host.empty())
    for (const auto& e : dl::remote::sim_environment({}, plants, o.args.sim_host)) {
      const size_t eq = e.find('=');
      ::setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
    }
  try {
    if (!o.args.node_names.empty()) o.args.node = dl::control::find_own_node(o.args.node_names, own_names());
  } catch (const std::exception& e) {
    std::cerr << "dlaunch-agent: error: " << e.what() << "\n";
    return 1;
  }
  o.token = read_token_line();
  if (o.token.empty()) return usage("no job token on stdin");
  try {
    boost::asio::io_context io;
    dl::agent::Agent agent(io, o);
    const int code = agent.run();
    // The agent leaves its PMIx server to the exit (Agent::finish_if_done):
    // libpmix's thread still runs, so no destructors, no exit().
    std::cout.flush();
    std::fflush(nullptr);
    ::_exit(code);
  } catch (const dl::Error& e) {
    std::cerr << "dlaunch-agent: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace dl::agent
