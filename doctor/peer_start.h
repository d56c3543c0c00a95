#pragma once
// Starting the doctor's peers (`dlaunch doctor --peer`) on hosts, the ways a
// job's agents are started (remote/start_method.h), each with the run's
// token as the first line of its stdin, never on a command line:
//   libssh  a libssh session per host (remote/ssh/fan_out.h), --ssh-parallel at once
//   ssh     the system's OpenSSH client, one child process per host
//   sim     the test bed (DLAUNCH_SIM=1): a local process standing for the host
//   local   this machine: a local process
// The doctor starts the launch tree's roots with these, and every peer with
// children starts them the same way (peer_fan.h).
#include <memory>
#include <string>
#include <vector>

#include "doctor/peer_link.h"
#include "doctor/tree_records.h"
#include "remote/sim_starter.h"

namespace dl::doctor {

// The test bed's planted faults (DLAUNCH_SIM_HOST_ENV) are
// remote/sim_starter.h's: a simulated host's peer reports them in its facts.
using remote::kSimHostEnv;
using remote::sim_environment;

struct StartedPeer {
  std::unique_ptr<PeerLink> link;  // set when started
  std::string error;               // one line naming the host, when not
};

// Starts a peer on each of `nodes` (their `below` is not looked at) with
// `how.method`, in parallel; in `nodes`' order. Never throws for one host's
// failure: it is that host's error. A peer that started may still fail its
// first request (dlaunch not found there): the caller's first call says so.
// Throws UsageError for a method it does not know.
std::vector<StartedPeer> start_peers(const std::vector<TreeNode>& nodes, const StartHow& how, const std::string& token);

}  // namespace dl::doctor
