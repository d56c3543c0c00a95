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

#include "remote/agent_starter.h"

namespace dl::remote {

// The environment variable that must be 1 for --launcher sim.
constexpr const char* kSimEnv = "DLAUNCH_SIM";

// Node `node`'s loopback address: 127.0.0.2 for node 0, then counting up
// through 127.255.255.254 (127.0.0.1 stays the launcher's own).
std::string sim_address(int node);

std::unique_ptr<AgentStarter> make_sim_starter(boost::asio::io_context& io, StarterOptions o,
                                               AgentStarter::Events ev);

}  // namespace dl::remote
