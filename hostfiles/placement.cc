#include "hostfiles/placement.h"

#include <algorithm>
#include <numeric>

#include "errors/error.h"

namespace dl::hostfiles {
namespace {

constexpr long kUnlimited = 1L << 40;

// How many ranks each host takes before (soft) and while (hard) oversubscribing.
struct Caps {
  std::vector<long> soft, hard;
};

Caps caps_for(const std::vector<HostEntry>& hosts, int per_node) {
  Caps c;
  for (const auto& h : hosts) {
    long hard = h.max_slots > 0 ? h.max_slots : kUnlimited;
    long soft = (per_node > 0 && !h.slots_given) ? per_node : h.slots;
    if (per_node > 0) hard = std::min<long>(hard, per_node);
    c.soft.push_back(std::min(soft, hard));
    c.hard.push_back(hard);
  }
  return c;
}

std::string source_of(const std::vector<HostEntry>& hosts) {
  const std::string& o = hosts.front().origin;
  if (o == "-H") return "the -H list";
  std::size_t colon = o.rfind(':');
  return colon == std::string::npos ? "the hosts" : "the hostfile '" + o.substr(0, colon) + "'";
}

// "(node1: 2, node2: 4)", the first 8 hosts and a count of the rest.
std::string breakdown(const std::vector<HostEntry>& hosts, const std::vector<long>& n) {
  std::string s = "(";
  for (std::size_t i = 0; i < hosts.size() && i < 8; ++i) {
    s += (i ? ", " : "") + describe(hosts[i]) + ": " + std::to_string(n[i]);
  }
  if (hosts.size() > 8) s += ", and " + std::to_string(hosts.size() - 8) + " more";
  return s + ")";
}

// Throws UsageError when np ranks do not fit.
void check_fits(const std::vector<HostEntry>& hosts, const PlacementOptions& o, long np, const Caps& c) {
  std::string n = std::to_string(np) + (np == 1 ? " rank" : " ranks") + " requested but ";
  long nodes = static_cast<long>(hosts.size());
  if (o.per_node > 0 && np > o.per_node * nodes) {
    throw UsageError(n + "--npernode " + std::to_string(o.per_node) + " on " + std::to_string(nodes) +
                     " hosts allows at most " + std::to_string(o.per_node * nodes) +
                     "; add hosts, lower -n, or raise --npernode");
  }
  long soft = std::accumulate(c.soft.begin(), c.soft.end(), 0L);
  if (!o.oversubscribe && np > soft) {
    std::string at = o.per_node > 0 ? " at --npernode " + std::to_string(o.per_node) + " " : " ";
    throw UsageError(n + source_of(hosts) + " gives " + std::to_string(soft) + " slots" + at +
                     breakdown(hosts, c.soft) + "; add hosts, lower -n, or pass --oversubscribe");
  }
  long hard = std::accumulate(c.hard.begin(), c.hard.end(), 0L);
  if (np > hard) {
    throw UsageError(n + "max_slots in " + source_of(hosts) + " allows at most " + std::to_string(hard) +
                     " even with --oversubscribe " + breakdown(hosts, c.hard) + "; add hosts or lower -n");
  }
}

// Gives ranks round-robin to hosts below `cap`, appending host indices to
// `order` until it holds np entries or every host is full.
void round_robin(const std::vector<long>& cap, long np, std::vector<long>& count, std::vector<int>& order) {
  std::vector<int> open;
  for (std::size_t i = 0; i < cap.size(); ++i)
    if (count[i] < cap[i]) open.push_back(static_cast<int>(i));
  while (static_cast<long>(order.size()) < np && !open.empty()) {
    std::vector<int> still;
    for (int i : open) {
      if (static_cast<long>(order.size()) == np) break;
      order.push_back(i);
      if (++count[i] < cap[i]) still.push_back(i);
    }
    open = std::move(still);
  }
}

// Host index of each rank, in rank order.
std::vector<int> host_of_ranks(const Caps& c, MapBy map_by, long np) {
  std::vector<long> count(c.soft.size(), 0);
  std::vector<int> order;
  if (map_by == MapBy::kNode) {
    round_robin(c.soft, np, count, order);
    round_robin(c.hard, np, count, order);
    return order;
  }
  long left = np;
  for (std::size_t i = 0; i < c.soft.size(); ++i) {
    count[i] = std::min(c.soft[i], left);
    left -= count[i];
  }
  round_robin(c.hard, left, count, order);  // oversubscribed ranks, spread evenly
  order.clear();
  for (std::size_t i = 0; i < count.size(); ++i) order.insert(order.end(), count[i], static_cast<int>(i));
  return order;
}

}  // namespace

Placement place_given(const std::vector<HostEntry>& hosts, const std::vector<int>& host_of_rank) {
  Placement p;
  std::vector<int> node_of_host(hosts.size(), -1);
  for (int h : host_of_rank) node_of_host[h] = 0;  // mark used hosts
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    if (node_of_host[h] < 0) continue;
    node_of_host[h] = static_cast<int>(p.nodes.size());
    p.nodes.push_back(hosts[h]);
  }
  p.local_size.assign(p.nodes.size(), 0);
  for (std::size_t r = 0; r < host_of_rank.size(); ++r) {
    int node = node_of_host[host_of_rank[r]];
    p.ranks.push_back(RankPlace{static_cast<int>(r), node, p.local_size[node]++});
  }
  return p;
}

Placement place(const std::vector<HostEntry>& hosts, const PlacementOptions& opts) {
  if (opts.np < 0) throw UsageError("-n must be a positive number of ranks, got " + std::to_string(opts.np));
  if (opts.per_node < 0) throw UsageError("--npernode must be positive, got " + std::to_string(opts.per_node));
  if (hosts.empty()) {
    throw UsageError("no hosts to place ranks on; give --hostfile or -H, or neither to run on this host");
  }
  Caps caps = caps_for(hosts, opts.per_node);
  long np = opts.np;
  if (np == 0) {
    np = opts.per_node > 0 ? static_cast<long>(opts.per_node) * static_cast<long>(hosts.size())
                           : std::accumulate(caps.soft.begin(), caps.soft.end(), 0L);
  }
  check_fits(hosts, opts, np, caps);
  return place_given(hosts, host_of_ranks(caps, opts.map_by, np));
}

std::vector<HostEntry> take_spares(std::vector<HostEntry>& hosts, int k, const std::string& source) {
  if (k <= 0) return {};
  if (hosts.size() <= static_cast<size_t>(k))
    throw UsageError("--spares " + std::to_string(k) + ": " + source + " gives " + std::to_string(hosts.size()) +
                     (hosts.size() == 1 ? " host" : " hosts") + "; the spares are its last " + std::to_string(k) +
                     " and at least one host must run ranks: add hosts or lower --spares");
  std::vector<HostEntry> spares(hosts.end() - k, hosts.end());
  hosts.resize(hosts.size() - static_cast<size_t>(k));
  return spares;
}

Placement place_local(int np, int slots) {
  if (np < 1) throw UsageError("-n must be a positive number of ranks, got " + std::to_string(np));
  HostEntry local{"localhost", "", 0, std::max(1, slots), 0, false, std::string(kLocalCpusOrigin)};
  return place_given({local}, std::vector<int>(static_cast<std::size_t>(np), 0));
}

}  // namespace dl::hostfiles
