#pragma once
// The launcher's answer to a rank's MPI_Comm_spawn (a spawn_request from its
// agent's PMIx server): where the children go, what they are called, and
// the messages and lines that say so; or, when there is no room, the error
// the rank's call returns at once and the line that says why. Pure: tested
// without processes (docs/mpi.md, "Spawning").
//
// Placement: every child goes to the spawning rank's host, onto its free
// slots (the host's slots less the processes of the job still running
// there); with --oversubscribe beyond them, up to max_slots. Children get
// dlaunch rank ids after the job's ranks (world_size, world_size + 1, ...),
// so that output, exits and teardown treat them as ranks, and a name:
// "spawn<k>:<rank in its namespace>", k counting the job's spawns from 1.
//
// Thread-safety: none; the launcher's thread only.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/messages.h"

namespace dl::launcher {

// What the spawning rank's host has.
struct SpawnRoom {
  int slots = 0;           // the hostfile's slots (without one: the CPUs dlaunch may use)
  int max_slots = 0;       // hard limit even with --oversubscribe; 0: none
  int in_use = 0;          // the job's processes running there now
  bool oversubscribe = false;
  bool cpu_slots = false;  // the slots are the CPUs, not a count the user wrote
};

struct SpawnAnswer {
  // Refused: `reply` (with an error) for the rank's agent; `verdict` for
  // the job; `line` ('\n'-ended) for dlaunch's stderr at once in its place
  // when the job has a verdict already.
  std::optional<control::msg::SpawnReply> reply;
  std::string line, verdict;
  // Placed: the message for the rank's agent, and for -v what was started.
  std::optional<control::msg::SpawnLaunch> launch;
  std::string log;
};

class SpawnBook {
 public:
  // `job_nspace`: the job's PMIx namespace; its ranks are 0..world_size-1.
  SpawnBook(std::string job_nspace, int world_size);

  // Answers `request` from the rank whose id is request.rank on `host`.
  // Placed children are recorded (name, namespace) from then on.
  SpawnAnswer answer(const control::msg::SpawnRequest& request, const std::string& host, const SpawnRoom& room);

  // "rank 3" for the job's ranks, "spawn1:0 (spawned by rank 0)" for children.
  std::string describe(int id) const;
  // The output tag's name: "3", "spawn1:0".
  std::string tag(int id) const;
  // The PMIx namespace and rank there of dlaunch rank `id`.
  std::pair<std::string, int> pmix_name(int id) const;
  // The dlaunch rank ids of rank `rank` (-1: every rank) of `nspace`; none
  // for a namespace or rank this job does not have.
  std::vector<int> ids_of(const std::string& nspace, int rank) const;
  // Ids given out so far (world_size + every child placed).
  int ids() const { return next_id_; }

 private:
  struct Child {
    int spawn = 0, rank = 0, parent = 0;
    std::string nspace;
  };
  std::string job_nspace_;
  int world_size_, next_id_, spawns_ = 0;
  std::map<int, Child> children_;  // by id
};

}  // namespace dl::launcher
