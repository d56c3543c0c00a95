// Stage 4: every host listens on each of its addresses; every other host
// connects to each of them. Which addresses everybody reached decides the
// data interface; a pair that could not connect is named with both hosts and
// the port.
#include <algorithm>
#include <map>

#include "doctor/analysis.h"
#include "doctor/doctor.h"
#include "doctor/hostlist.h"
#include "errors/error.h"

namespace dl::doctor {

namespace {
std::string where(const Endpoint& e) { return e.addr + ":" + std::to_string(e.port) + " (" + e.ifname + ")"; }

// What host a's probes of host b's endpoints found: reached[k] when it
// reached endpoint k, else why[k] says why not.
struct Probed {
  std::vector<bool> reached;
  std::vector<std::string> why;
};
using Matrix = std::map<std::pair<int, int>, Probed>;  // by (a, b)
}  // namespace

void Doctor::report_unreachable(int b, const std::vector<int>& from, const std::string& at, const std::string& why) {
  std::vector<std::string> names;
  for (int a : from) names.push_back(name(a));
  const std::string who = from.size() == 1 ? name(from[0]) : name_hosts(names);
  names.insert(names.begin(), name(b));
  report_->add({Mark::kFail, Check::kNetwork, names,
                who + " cannot connect to " + name(b) + " at " + at + ": " + why,
                "let " + (from.size() == 1 ? who : std::string("them")) + " reach " + name(b) +
                    " on TCP (dlaunch, NCCL and gloo use ephemeral ports): check the firewall on " + name(b) +
                    " (nft list ruleset, iptables -L) and between " + (from.size() == 1 ? "the two" : "them")});
}

void Doctor::stage_network() {
  progress("network: listening on every host");
  for (const auto& [h, got] : ask_every<ListenReply>(*fan_, alive(), ListenRequest{""}, Millis(10000))) {
    if (!got.reply) {
      fail(h, Check::kNetwork, "", got.error);
      continue;
    }
    for (const auto& e : got.reply->endpoints) endpoints_[static_cast<size_t>(h)].push_back({e.ifname, e.addr, e.port});
    if (endpoints_[static_cast<size_t>(h)].empty())
      fail(h, Check::kNetwork, "no address", name(h) + ": has no address but loopback", "connect it to the network");
  }
  const std::vector<int> hosts = alive();
  const size_t n = entries_.size();
  // Who probes whom: every other host, or (the sparse plan) the partners
  // stage 5 would test, both ways.
  std::vector<std::vector<int>> targets(n);
  for (const auto& round : plan_pairs(hosts.size()))
    for (auto [i, j] : round) {
      const int a = hosts[static_cast<size_t>(i)], b = hosts[static_cast<size_t>(j)];
      targets[static_cast<size_t>(a)].push_back(b), targets[static_cast<size_t>(b)].push_back(a);
    }
  Matrix m;
  progress("network: " + std::to_string(hosts.size()) + " hosts connect to each other");
  const long timeout_ms = static_cast<long>(o_.connect_timeout_s * 1000);
  std::vector<std::pair<int, ProbeRequest>> calls;
  for (int a : hosts) {
    ProbeRequest req;
    req.timeout_ms = timeout_ms;
    std::sort(targets[static_cast<size_t>(a)].begin(), targets[static_cast<size_t>(a)].end());
    for (int b : targets[static_cast<size_t>(a)])
      for (const auto& e : endpoints_[static_cast<size_t>(b)]) req.targets.push_back({name(b), e.ifname, e.addr, e.port});
    calls.emplace_back(a, std::move(req));
  }
  // At most link_parallel_ hosts probing at once (0: all of them): on the
  // test bed every host's probes share this machine's cores, and a
  // thousand hosts' at once would pass their connect timeouts.
  // Paced in the tree (peer_fan.h): one route, whatever the hosts.
  const auto replies = ask_each<ProbeReply>(*fan_, calls, Millis(timeout_ms * 3 + 10000), link_parallel_);
  for (const auto& [a, req] : calls) {
    const auto& got = replies.at(a);
    if (got.reply && got.reply->results.size() != req.targets.size())
      fail(a, Check::kNetwork, "", name(a) + ": the doctor's peer answered " + std::to_string(got.reply->results.size()) +
                                       " of " + std::to_string(req.targets.size()) + " probes");
    if (!got.reply) fail(a, Check::kNetwork, "", got.error);
    if (dropped_[static_cast<size_t>(a)]) continue;
    size_t j = 0;
    for (int b : targets[static_cast<size_t>(a)])
      for (size_t k = 0; k < endpoints_[static_cast<size_t>(b)].size(); ++k, ++j) {
        Probed& p = m[{a, b}];
        p.reached.push_back(got.reply->results[j].ok);
        p.why.push_back(got.reply->results[j].error);
      }
  }
  const std::vector<int> probed = alive();

  std::vector<std::pair<int, int>> bad;                   // (a, b): a cannot reach b
  std::map<std::string, std::vector<std::string>> stray;  // ifname -> hosts where not everybody reached it
  std::vector<std::string> ifnames(n);
  for (int b : probed) {
    const auto& eps = endpoints_[static_cast<size_t>(b)];
    std::vector<int> count(eps.size(), 0);
    std::vector<int> probers;  // the hosts that probed b
    for (int a : targets[static_cast<size_t>(b)]) {
      auto it = m.find({a, b});
      if (it == m.end() || dropped_[static_cast<size_t>(a)]) continue;
      probers.push_back(a);
      for (size_t k = 0; k < eps.size(); ++k) count[k] += it->second.reached[k] ? 1 : 0;
    }
    size_t best = 0;
    for (size_t k = 1; k < eps.size(); ++k)
      if (count[k] > count[best]) best = k;
    data_endpoint_[static_cast<size_t>(b)] = eps[best];
    ifnames[static_cast<size_t>(b)] = eps[best].ifname;
    for (size_t k = 0; k < eps.size(); ++k)
      if (k != best && count[k] < static_cast<int>(probers.size())) stray[eps[k].ifname].push_back(name(b));
    std::map<std::string, std::vector<int>> refused;  // why -> the hosts that could not reach b's data address
    for (int a : probers)
      if (const Probed& p = m.at({a, b}); !p.reached[best]) bad.emplace_back(a, b), refused[p.why[best]].push_back(a);
    for (const auto& [why, from] : refused) report_unreachable(b, from, where(eps[best]), why);
  }
  std::vector<std::pair<int, int>> undirected;
  for (auto [a, b] : bad) undirected.emplace_back(std::min(a, b), std::max(a, b));
  std::sort(undirected.begin(), undirected.end());
  undirected.erase(std::unique(undirected.begin(), undirected.end()), undirected.end());
  const auto drop = hosts_to_drop(static_cast<int>(n), undirected);
  std::vector<std::string> kept_ifnames;
  for (int h : probed) {
    const size_t i = static_cast<size_t>(h);
    int pairs = 0;
    for (auto [a, b] : undirected) pairs += (a == h || b == h) ? 1 : 0;
    if (drop[i]) {
      report_->set(h, Check::kNetwork, Mark::kFail, std::to_string(pairs) + (pairs == 1 ? " pair" : " pairs"));
      dropped_[i] = true;
    } else {
      report_->set(h, Check::kNetwork, pairs ? Mark::kWarn : Mark::kOk, ifnames[i]);
      kept_ifnames.push_back(ifnames[i]);
    }
  }
  const std::string ifv = ifname_value(kept_ifnames);
  if (ifv.empty() || kept_ifnames.size() < 2) return;  // one host: nothing was tested
  report_->notes().ifname = ifv;
  ifname_ = ifv;
  // Written as dlaunch takes them: an export in the launch shell reaches
  // only the launch host's ranks (docs/dlaunch.md, "Environment").
  report_->notes().interface = "-x NCCL_SOCKET_IFNAME=" + ifv + " -x GLOO_SOCKET_IFNAME=" + ifv +
                                " -x DLAUNCH_SOCKET_IFNAME=" + ifv +
                                " (the interface every host reached the others on; -x gives it to every host's ranks)";
  for (const auto& [iface, where_hosts] : stray) {
    std::string list;
    for (const auto& h : where_hosts) list += (list.empty() ? "" : ", ") + h;
    report_->add({Mark::kWarn, Check::kNetwork, where_hosts,
                  iface + " on " + list + " is not reachable from every other host",
                  "keep NCCL and gloo off it: dlaunch -x NCCL_SOCKET_IFNAME=" + ifv + " -x GLOO_SOCKET_IFNAME=" + ifv});
  }
}

}  // namespace dl::doctor
