#pragma once
// The launcher's answer to a rank's MPI_Comm_spawn (a spawn_request from its
// agent's PMIx server). dlaunch does not start processes for MPI_Comm_spawn
// yet (docs/mpi.md, "Spawning"), so the answer is always an error, sent at
// once: the rank's MPI_Comm_spawn fails instead of waiting, dlaunch's stderr
// says why and what to do instead, and the job ends (a program that asked
// for processes cannot go on as it meant to; mpi4py's MPIPoolExecutor would
// wait for its workers forever). Pure: tested without processes.
#include <string>

#include "control/messages.h"

namespace dl::launcher {

struct SpawnAnswer {
  control::msg::SpawnReply reply;  // for the rank's agent
  std::string line;                // for dlaunch's stderr at once, ending in '\n'
  std::string verdict;             // the job's verdict (Fate::on_spawn_refused)
};

// `host` is the requesting rank's host as the hostfile names it.
SpawnAnswer answer_spawn(const control::msg::SpawnRequest& request, const std::string& host);

}  // namespace dl::launcher
