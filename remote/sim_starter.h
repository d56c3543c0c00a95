#pragma once
// --launcher sim: the test bed's start method. Each host of the hostfile is
// simulated on this machine by a real dlaunch-agent, started as a local
// process (no ssh) the way a remote one is (the token on its stdin, a TCP
// connection back to the control port and the token handshake), standing for
// the host the hostfile names (--sim-host: its hello's host name and a machine
// identity of its own) at its own loopback address 127.x.y.z (the `reached`
// address, so MASTER_ADDR of node 0 is it). For tests and benches of many
// hosts on one machine; dlaunch refuses it unless DLAUNCH_SIM=1.
#include <memory>
#include <string>
#include <vector>

#include "remote/agent_starter.h"

namespace dl::remote {

// The environment variable that must be 1 for --launcher sim.
constexpr const char* kSimEnv = "DLAUNCH_SIM";

// Node `node`'s loopback address: 127.0.0.2 for node 0, then counting up
// through 127.255.255.254 (127.0.0.1 stays the launcher's own).
std::string sim_address(int node);

// The test bed's planted faults: DLAUNCH_SIM_HOST_ENV="NAME:VAR=VALUE;..."
// makes VAR VALUE in the environment of simulated host NAME, as an sshd
// SetEnv would on one real host: its agent's own environment, and so its
// ranks' and its health checks' (the agent sets them at its start), and the
// facts a doctor peer there reports. An agent of that host that starts
// others in a launch tree passes its plants on to them (a limit of the test
// bed: a real host's sshd plants into no other host).
inline constexpr const char* kSimHostEnv = "DLAUNCH_SIM_HOST_ENV";

// `env` ("VAR=VALUE" each) with the plants of `spec` (kSimHostEnv's format)
// for host `name` set. Pure.
std::vector<std::string> sim_environment(const std::vector<std::string>& env, const std::string& spec,
                                         const std::string& name);

std::unique_ptr<AgentStarter> make_sim_starter(boost::asio::io_context& io, StarterOptions o,
                                               AgentStarter::Events ev);

}  // namespace dl::remote
