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

namespace dl::doctor {

// The test bed's planted faults: DLAUNCH_SIM_HOST_ENV="NAME:VAR=VALUE;..."
// makes VAR VALUE in the environment simulated host NAME reports (as an
// sshd SetEnv would on one real host): its peer's facts say so, and the
// peers it starts are not touched by it.
inline constexpr const char* kSimHostEnv = "DLAUNCH_SIM_HOST_ENV";

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

// The environment a simulated host's peer gets: `env` with the plants of
// `spec` (kSimHostEnv's format) for `name` set. Pure.
std::vector<std::string> sim_environment(const std::vector<std::string>& env, const std::string& spec,
                                         const std::string& name);

}  // namespace dl::doctor
