#pragma once
// One MPI job's map, as the launch message's mpi section describes it: its
// namespace, sizes, nodes and their ranks, app contexts. The PMIx server
// (mpi/pmix/) and the PMI server (mpi/pmi/) both read it, and the pure
// layout questions it answers (which node holds a rank, its local rank, its
// app context, the PMIx map strings) are answered here once. No libpmix
// here, so all of it is testable without processes.
#include <string>
#include <vector>

#include "control/messages.h"

namespace dl::mpi {

struct JobMap {
  std::string nspace;            // PMIx namespace, unique per job (< 255 chars)
  int world_size = 0;            // ranks in the job
  int node_rank = 0;             // index of THIS host in node_hosts
  std::vector<std::string> node_hosts;        // hostnames, node order
  std::vector<std::vector<int>> node_ranks;   // global ranks per node, node order
  int universe_size = 0;         // 0 means world_size
  std::vector<int> app_sizes;    // MPMD: ranks per app context, rank order; empty = one app
  std::string tmpdir;            // PMIx: the per-job directory; exists; the agent removes it
  // The ranks' shared-memory directory (shm_dir); "" = one named after tmpdir.
  // The agent gives a random name of its own, which nothing world-visible
  // (the temp dir's name in /tmp) gives away.
  std::string shm_dir;
  // MPI_Comm_spawn's children: the namespace and rank that spawned them
  // (PMIX_SPAWNED, PMIX_PARENT_ID); "" for a job started by dlaunch.
  std::string parent_nspace;
  int parent_rank = 0;
};

// Where one global rank lives.
struct RankPlace {
  int node = -1;        // index into node_hosts
  int local_rank = -1;  // position among its node's ranks
};

// The map of the launch message's mpi section (tmpdir, shm_dir and the
// parent are the PMIx server's to fill in).
JobMap job_map_from(const control::msg::MpiSection& mpi);

// Throws UsageError naming the problem when the map is inconsistent: sizes
// differ, a rank is missing, repeated or out of range, node_rank is out of
// range, or nspace is empty or too long. (pmix::validate adds the server's
// own requirements.)
void validate(const JobMap& map);

// One entry per global rank. REQUIRES: validate(map) passed.
std::vector<RankPlace> place_ranks(const JobMap& map);

// "r0,r1;r2,r3": each node's ranks, nodes separated by ';' (input of
// PMIx_generate_ppn).
std::string ppn_string(const JobMap& map);

// "host0,host1" (input of PMIx_generate_regex).
std::string hosts_string(const JobMap& map);

// This host's ranks, comma-separated ("2,3"): PMIX_LOCAL_PEERS.
std::string local_peers_string(const JobMap& map);

// The app context of global rank `rank` (0 with one app). REQUIRES: validate(map).
int app_of(const JobMap& map, int rank);
// The first rank of app `app`.
int app_leader(const JobMap& map, int app);

// The universe size, defaulted to world_size.
int universe_size(const JobMap& map);

}  // namespace dl::mpi
