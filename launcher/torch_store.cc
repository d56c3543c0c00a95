#include "launcher/torch_store.h"

#include <map>

#include "launcher/stacks/stack_report.h"

namespace dl::launcher {

namespace {
// The placement's ranks of `ranks`, grouped by host: "1, 3 on node1; 6-7 on node2".
std::string by_host(const hostfiles::Placement& p, const std::vector<std::string>& hosts, const std::vector<int>& ranks) {
  std::map<int, std::vector<int>> per_node;
  for (int r : ranks) per_node[p.ranks.at(static_cast<size_t>(r)).node].push_back(r);
  std::string out;
  for (const auto& [node, rs] : per_node)
    out += (out.empty() ? "" : "; ") + rank_ranges(rs) + " on " + hosts.at(static_cast<size_t>(node));
  return out;
}
}  // namespace

TorchStore::TorchStore(boost::asio::io_context& io, const std::string& bind_host, uint16_t port,
                       const hostfiles::Placement& placement,
                       std::vector<std::string> hosts, Hooks hooks)
    : placement_(placement), hosts_(std::move(hosts)), hooks_(std::move(hooks)), store_(io, [&] {
        rdzv::C10dStore::Options o;
        o.bind_host = bind_host;
        o.port = port;
        // torch 1.x opens two connections per rank; room for a clone() each and the odd tool.
        o.max_connections = 4 * placement.ranks.size() + 64;
        o.remote_allowed = [this](const std::string& a) { return hooks_.node_of && hooks_.node_of(a) >= 0; };
        // A rank's bad query fails the job (its torch would wait for ever);
        // another process's on a job host is only dropped.
        o.refused = [this](const std::string& why, const std::string& peer, bool rank) {
          if (!rank) {
            if (hooks_.log) hooks_.log("c10d store: dropped a client at " + peer + " that is none of the job's ranks: " + why);
            return;
          }
          if (hooks_.refused) hooks_.refused(why + " (client at " + peer + "); run with --torch-store rank0 to let rank 0's torch host its own store");
        };
        o.log = [this](const std::string& line) { if (hooks_.log) hooks_.log(line); };
        return o;
      }()) {}

std::vector<std::string> TorchStore::unfinished() const {
  const auto seen = store_.seen();
  if (seen.clients.empty()) return {};  // no rank's torch got as far as the store: nothing to tell
  const int world = static_cast<int>(placement_.ranks.size());
  // Connections per node, against the ranks it runs.
  std::vector<int> connected(hosts_.size(), 0);
  int elsewhere = 0, total = 0;
  for (const auto& [address, n] : seen.clients) {
    const int node = hosts_.size() == 1 ? 0 : hooks_.node_of ? hooks_.node_of(address) : -1;
    (node >= 0 ? connected[static_cast<size_t>(node)] : elsewhere) += n;
    total += n;
  }
  std::vector<int> absent;  // ranks on hosts short of clients, and ranks gloo never heard of
  for (int r = 0; r < world; ++r)
    if (!seen.ranks.empty() && !seen.ranks.count(r)) absent.push_back(r);
  const bool done = seen.ranks.empty() ? total >= world && (seen.barrier == 0 || seen.barrier >= world)
                                       : static_cast<int>(seen.ranks.size()) >= world;
  if (done) return {};
  std::vector<std::string> lines;
  lines.push_back("torch's rendezvous did not complete: " + std::to_string(total) + " of " + std::to_string(world) +
                  " ranks' clients connected to dlaunch's c10d store");
  for (size_t n = 0; n < hosts_.size(); ++n)
    if (connected[n] < placement_.local_size[n])
      lines.push_back("  " + hosts_[n] + ": " + std::to_string(connected[n]) + " of its " +
                      std::to_string(placement_.local_size[n]) + " ranks connected");
  if (elsewhere) lines.push_back("  " + std::to_string(elsewhere) + " clients from addresses of no host of the job");
  if (!absent.empty())
    lines.push_back("  never reached the rendezvous (no address published for gloo): rank" +
                    std::string(absent.size() > 1 ? "s " : " ") + by_host(placement_, hosts_, absent));
  if (seen.barrier > 0 && seen.barrier < world) {
    std::vector<int> missing;  // arrived, known to the barrier's count by name, and not in it
    for (int r : seen.ranks)
      if (!seen.at_barrier.count(r)) missing.push_back(r);
    const bool named = static_cast<int64_t>(seen.at_barrier.size()) == seen.barrier && !missing.empty();
    lines.push_back("  torch's store-based barrier: " + std::to_string(seen.barrier) + " of " + std::to_string(world) +
                    (named ? "; never reached it: rank" + std::string(missing.size() > 1 ? "s " : " ") +
                                 by_host(placement_, hosts_, missing)
                           : ""));
  }
  return lines;
}

}  // namespace dl::launcher
