#include "mpi/job_map.h"

#include "errors/error.h"

namespace dl::mpi {
namespace {

std::string join_ints(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out;
}

}  // namespace

JobMap job_map_from(const control::msg::MpiSection& mpi) {
  JobMap map;
  map.nspace = mpi.nspace;
  map.world_size = mpi.world_size;
  map.node_rank = mpi.node_rank;
  map.node_hosts = mpi.node_hosts;
  map.node_ranks = mpi.node_ranks;
  map.universe_size = mpi.universe_size;
  map.app_sizes = mpi.app_sizes.value_or(std::vector<int>{});
  return map;
}

void validate(const JobMap& map) {
  auto fail = [&](const std::string& what) {
    throw UsageError("the MPI job map of namespace '" + map.nspace + "': " + what);
  };
  if (map.nspace.empty() || map.nspace.size() > 250) fail("namespace must be 1..250 characters");
  if (map.world_size <= 0) fail("world_size must be positive");
  if (map.node_hosts.empty() || map.node_hosts.size() != map.node_ranks.size())
    fail("node_hosts and node_ranks must be non-empty and the same length");
  if (map.node_rank < 0 || map.node_rank >= static_cast<int>(map.node_hosts.size()))
    fail("node_rank " + std::to_string(map.node_rank) + " is not a node index");
  if (map.universe_size != 0 && map.universe_size < map.world_size)
    fail("universe_size is smaller than world_size");
  std::vector<int> seen(map.world_size, 0);
  for (size_t n = 0; n < map.node_ranks.size(); ++n) {
    if (map.node_hosts[n].empty()) fail("node " + std::to_string(n) + " has no hostname");
    for (int r : map.node_ranks[n]) {
      if (r < 0 || r >= map.world_size)
        fail("rank " + std::to_string(r) + " on " + map.node_hosts[n] + " is out of range");
      if (seen[r]++) fail("rank " + std::to_string(r) + " is placed twice");
    }
  }
  for (int r = 0; r < map.world_size; ++r)
    if (!seen[r]) fail("rank " + std::to_string(r) + " is on no node");
  // A spawned namespace may be registered where only its parent's peers are.
  if (map.node_ranks[map.node_rank].empty() && map.parent_nspace.empty()) fail("this host has no ranks");
  long apps_total = 0;
  for (int n : map.app_sizes) {
    if (n < 1) fail("an app context has no ranks");
    apps_total += n;
  }
  if (!map.app_sizes.empty() && apps_total != map.world_size)
    fail("app sizes add up to " + std::to_string(apps_total) + ", not world_size " + std::to_string(map.world_size));
}

std::vector<RankPlace> place_ranks(const JobMap& map) {
  std::vector<RankPlace> out(map.world_size);
  for (size_t n = 0; n < map.node_ranks.size(); ++n)
    for (size_t i = 0; i < map.node_ranks[n].size(); ++i)
      out[map.node_ranks[n][i]] = RankPlace{static_cast<int>(n), static_cast<int>(i)};
  return out;
}

std::string ppn_string(const JobMap& map) {
  std::string out;
  // Nodes without ranks (a spawned namespace made known where only its
  // parent's peers are) are not in its maps.
  for (size_t n = 0; n < map.node_ranks.size(); ++n) {
    if (map.node_ranks[n].empty()) continue;
    if (!out.empty()) out += ';';
    out += join_ints(map.node_ranks[n]);
  }
  return out;
}

std::string hosts_string(const JobMap& map) {
  std::string out;
  for (size_t n = 0; n < map.node_hosts.size(); ++n) {
    if (map.node_ranks[n].empty()) continue;  // as in ppn_string
    if (!out.empty()) out += ',';
    out += map.node_hosts[n];
  }
  return out;
}

std::string local_peers_string(const JobMap& map) {
  return join_ints(map.node_ranks[map.node_rank]);
}

int app_of(const JobMap& map, int rank) {
  int first = 0;
  for (size_t k = 0; k < map.app_sizes.size(); ++k) {
    first += map.app_sizes[k];
    if (rank < first) return static_cast<int>(k);
  }
  return 0;
}

int app_leader(const JobMap& map, int app) {
  int first = 0;
  for (int k = 0; k < app && k < static_cast<int>(map.app_sizes.size()); ++k) first += map.app_sizes[static_cast<size_t>(k)];
  return first;
}

int universe_size(const JobMap& map) {
  return map.universe_size > 0 ? map.universe_size : map.world_size;
}

}  // namespace dl::mpi
