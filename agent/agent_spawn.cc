// The agent's side of MPI_Comm_spawn: the launcher placed the children of a
// rank's spawn request here (spawn_launch); register their PMIx namespace,
// start them as ranks of the job (output, exits and teardown as for any
// rank), then complete the rank's PMIx_Spawn. docs/mpi.md, "Spawning".
#include "agent/agent.h"

#include <iostream>

#include "errors/error.h"

namespace dl::agent {

namespace msg = control::msg;

void Agent::start_spawn(const msg::SpawnLaunch& m) {
  resolved_.clear(), wdirs_.clear();
  if (done_) return;
  std::vector<std::vector<std::pair<std::string, std::string>>> envs;
  std::string error;
  try {
    if (!mpi_ || !launch_) throw UsageError("no MPI job runs on this host");
    envs = mpi_->start_spawn(m);
  } catch (const Error& e) {
    error = e.what();
  }
  if (m.elsewhere) {
    // Only made known here, for the spawning rank's peers.
    if (!error.empty())
      std::cerr << "dlaunch-agent: warning: cannot register " << m.nspace << " (spawned on " << *m.elsewhere
                << "): " << error << "; this host's ranks cannot reach it\n";
    msg::SpawnKnown known{m.nspace, std::nullopt};
    if (!error.empty()) known.error = error;
    link_->send_message(known);
    return;
  }
  if (!error.empty()) {
    for (const auto& c : m.children) ranks_.refuse(c.rank, 1, "cannot start a spawned process: " + error);
    if (mpi_) mpi_->spawn_done(m.id, "", error);
    return;
  }
  EnvVars inherited = own_environment();
  MpiJob::scrub_rank_env(inherited);
  for (size_t k = 0; k < m.children.size(); ++k) start_rank(m.children[k], *launch_, inherited, &envs[k]);
  // The children exist and their namespace is known here: the rank's
  // MPI_Comm_spawn goes on to connect with them.
  mpi_->spawn_done(m.id, m.nspace, "");
}

// Another host's process asked for the data of a spawned rank here.
void Agent::serve_dmodex(const msg::MpiDmodexServe& m) {
  auto reply = [this](msg::MpiDmodexData d) {
    if (link_ && !done_) link_->send_message(d);
  };
  if (!mpi_) return reply(msg::MpiDmodexData{m.id, false, ""});
  mpi_->serve_dmodex(m, reply);
}

}  // namespace dl::agent
