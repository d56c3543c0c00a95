#pragma once
// Placement: which host runs which rank. Pure functions of the host list and
// the options, so the launcher's -n/--map-by/--npernode/--oversubscribe
// behaviour is tested without starting anything.
#include <string>
#include <string_view>
#include <vector>

#include "hostfiles/hostfile.h"

namespace dl::hostfiles {

enum class MapBy {
  kSlot,  // fill host 1's slots, then host 2's (mpirun --map-by slot): ranks
          // on one host are consecutive
  kNode,  // one rank per host, round and round (mpirun --map-by node)
};

struct PlacementOptions {
  int np = 0;                  // ranks to start; 0: one per slot in total
                               // (per_node * hosts when per_node is set)
  MapBy map_by = MapBy::kSlot;
  int per_node = 0;            // --npernode/--ppn: at most (np = 0: exactly)
                               // this many ranks per host; 0: no such limit.
                               // A host whose slots were not written takes
                               // per_node slots.
  bool oversubscribe = false;  // allow more ranks than slots on a host, but
                               // never more than its max_slots
};

struct RankPlace {
  int rank;
  int node;        // index into Placement::nodes; hostfile order = NODE_RANK
  int local_rank;  // dense 0..local_size-1 per node, in global rank order
  std::string cpus = {};  // --rankfile: the rank's slot= text (rankfile.h), "" = not pinned by it
};

struct Placement {
  std::vector<HostEntry> nodes;  // only the hosts that got ranks, hostfile order
  std::vector<RankPlace> ranks;  // ranks[r].rank == r
  std::vector<int> local_size;   // per node: how many ranks it runs
  // --spares: hosts that hold no ranks and take a lost node's at a restart
  // (launcher/seats.h); after `nodes` in the job's host order.
  std::vector<HostEntry> spares;
};

// --spares K: the last K of `hosts` (in their order), taken off `hosts`.
// Throws dl::UsageError naming `source` (the hostfile, -H, the allocation)
// when fewer than K + 1 hosts are given: at least one must run ranks.
std::vector<HostEntry> take_spares(std::vector<HostEntry>& hosts, int k, const std::string& source);

// Places opts.np ranks on `hosts` (as parsed: duplicates merged).
// Throws dl::UsageError when the hosts cannot take the ranks: more ranks than
// slots without oversubscribe ("8 ranks requested but the hostfile 'hosts'
// gives 6 slots (node1: 2, node2: 4); add hosts, lower -n, or pass
// --oversubscribe"), more than per_node * hosts, more than max_slots allows,
// no hosts, or a negative np/per_node.
Placement place(const std::vector<HostEntry>& hosts, const PlacementOptions& opts);

// The placement that puts rank r on hosts[host_of_rank[r]]: the nodes are
// the hosts that got ranks, in `hosts` order; local ranks in rank order.
Placement place_given(const std::vector<HostEntry>& hosts, const std::vector<int>& host_of_rank);

// The origin of place_local's host: its slots are the CPUs dlaunch may use
// there (usable_cpus.h), not a count the user wrote.
inline constexpr std::string_view kLocalCpusOrigin = "this machine's CPUs";

// No hostfile, -H or allocation: all np ranks on "localhost", whose slots
// are `slots` (the CPUs dlaunch may use: the room MPI_Comm_spawn has beside
// the ranks). np may exceed them: the job's own ranks have no slot limit.
// Throws dl::UsageError when np < 1.
Placement place_local(int np, int slots);

}  // namespace dl::hostfiles
