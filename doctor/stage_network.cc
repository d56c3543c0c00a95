// Stage 4: every host listens on each of its addresses; every other host
// connects to each of them. Which addresses everybody reached decides the
// data interface; a pair that could not connect is named with both hosts and
// the port.
#include <algorithm>
#include <map>

#include "doctor/analysis.h"
#include "doctor/doctor.h"
#include "errors/error.h"

namespace dl::doctor {

namespace {
std::string where(const Endpoint& e) { return e.addr + ":" + std::to_string(e.port) + " (" + e.ifname + ")"; }

// Probe results: reached[a][b][k] when host a reached endpoint k of host b.
struct Matrix {
  std::vector<std::vector<std::vector<bool>>> reached;
  std::vector<std::vector<std::vector<std::string>>> why;
};
}  // namespace

void Doctor::stage_network() {
  progress("network: listening on every host");
  auto errors = each_alive([&](int h) {
    const auto r = peers_[static_cast<size_t>(h)]->call<ListenReply>(ListenRequest{name(h)}, Millis(10000));
    for (const auto& e : r.endpoints) endpoints_[static_cast<size_t>(h)].push_back({e.ifname, e.addr, e.port});
  });
  for (int h : alive()) {
    if (!errors[static_cast<size_t>(h)].empty()) fail(h, Check::kNetwork, "", errors[static_cast<size_t>(h)]);
    else if (endpoints_[static_cast<size_t>(h)].empty())
      fail(h, Check::kNetwork, "no address", name(h) + ": has no address but loopback", "connect it to the network");
  }
  const std::vector<int> hosts = alive();
  const size_t n = entries_.size();
  Matrix m{std::vector<std::vector<std::vector<bool>>>(n, std::vector<std::vector<bool>>(n)),
           std::vector<std::vector<std::vector<std::string>>>(n, std::vector<std::vector<std::string>>(n))};
  progress("network: " + std::to_string(hosts.size()) + " hosts connect to each other");
  const long timeout_ms = static_cast<long>(o_.connect_timeout_s * 1000);
  errors = each_alive([&](int a) {
    ProbeRequest req;
    req.timeout_ms = timeout_ms;
    for (int b : hosts)
      if (b != a)
        for (const auto& e : endpoints_[static_cast<size_t>(b)]) req.targets.push_back({name(b), e.ifname, e.addr, e.port});
    const auto r = peers_[static_cast<size_t>(a)]->call<ProbeReply>(req, Millis(timeout_ms * 3 + 10000));
    if (r.results.size() != req.targets.size())
      throw RemoteError(name(a) + ": the doctor's peer answered " + std::to_string(r.results.size()) + " of " +
                        std::to_string(req.targets.size()) + " probes");
    size_t j = 0;
    for (int b : hosts)
      for (size_t k = 0; b != a && k < endpoints_[static_cast<size_t>(b)].size(); ++k, ++j) {
        m.reached[static_cast<size_t>(a)][static_cast<size_t>(b)].push_back(r.results[j].ok);
        m.why[static_cast<size_t>(a)][static_cast<size_t>(b)].push_back(r.results[j].error);
      }
  });
  for (int h : hosts)
    if (!errors[static_cast<size_t>(h)].empty()) fail(h, Check::kNetwork, "", errors[static_cast<size_t>(h)]);
  const std::vector<int> probed = alive();

  std::vector<std::pair<int, int>> bad;                   // (a, b): a cannot reach b
  std::map<std::string, std::vector<std::string>> stray;  // ifname -> hosts where not everybody reached it
  std::vector<std::string> ifnames(n);
  for (int b : probed) {
    const auto& eps = endpoints_[static_cast<size_t>(b)];
    std::vector<int> count(eps.size(), 0);
    for (int a : probed)
      for (size_t k = 0; a != b && k < eps.size(); ++k) count[k] += m.reached[static_cast<size_t>(a)][static_cast<size_t>(b)][k] ? 1 : 0;
    size_t best = 0;
    for (size_t k = 1; k < eps.size(); ++k)
      if (count[k] > count[best]) best = k;
    data_endpoint_[static_cast<size_t>(b)] = eps[best];
    ifnames[static_cast<size_t>(b)] = eps[best].ifname;
    const int others = static_cast<int>(probed.size()) - 1;
    for (size_t k = 0; k < eps.size(); ++k)
      if (k != best && count[k] < others) stray[eps[k].ifname].push_back(name(b));
    for (int a : probed)
      if (a != b && !m.reached[static_cast<size_t>(a)][static_cast<size_t>(b)][best]) {
        bad.emplace_back(a, b);
        report_->add({Mark::kFail, Check::kNetwork, {name(a), name(b)},
                      name(a) + " cannot connect to " + name(b) + " at " + where(eps[best]) + ": " +
                          m.why[static_cast<size_t>(a)][static_cast<size_t>(b)][best],
                      "let " + name(a) + " reach " + name(b) + " on TCP (dlaunch, NCCL and gloo use ephemeral ports): "
                      "check the firewall on " + name(b) + " (nft list ruleset, iptables -L) and between the two"});
      }
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
