#include "doctor/analysis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

namespace dl::doctor {

std::vector<int> find_duplicates(size_t n, const std::function<std::vector<std::string>(size_t)>& keys) {
  std::vector<int> dup(n, -1);
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < n; ++i) {
    for (const auto& k : keys(i)) {
      auto [it, fresh] = first.emplace(k, i);
      if (!fresh && it->second != i && dup[i] < 0) dup[i] = static_cast<int>(it->second);
    }
  }
  return dup;
}

std::optional<std::string> majority(const std::vector<std::optional<std::string>>& values) {
  // Counted in a map: a thousand hosts' PATHs compared pairwise were a
  // million string comparisons per variable.
  std::map<std::optional<std::string>, std::pair<int, size_t>> count;  // value -> (hosts, first seen)
  for (size_t i = 0; i < values.size(); ++i) {
    auto [it, fresh] = count.emplace(values[i], std::make_pair(0, i));
    ++it->second.first;
  }
  const std::optional<std::string>* best = nullptr;
  std::pair<int, size_t> best_n{0, 0};
  for (const auto& [v, n] : count)
    if (!best || n.first > best_n.first || (n.first == best_n.first && n.second < best_n.second)) best = &v, best_n = n;
  return best ? *best : std::nullopt;
}

namespace {
std::vector<std::string> split_colons(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string x; std::getline(in, x, ':');) out.push_back(x);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : " ") + (x.empty() ? std::string("''") : x);
  return out;
}
}  // namespace

std::string describe_difference(const std::optional<std::string>& got, const std::optional<std::string>& want) {
  if (!got) return "is unset (most hosts have '" + want.value_or("") + "')";
  if (!want) return "is set to '" + *got + "' (most hosts leave it unset)";
  if (got->find(':') == std::string::npos && want->find(':') == std::string::npos)
    return "is '" + *got + "', most hosts have '" + *want + "'";
  auto g = split_colons(*got), w = split_colons(*want);
  std::vector<std::string> lacks, extra;
  for (const auto& x : w)
    if (std::find(g.begin(), g.end(), x) == g.end()) lacks.push_back(x);
  for (const auto& x : g)
    if (std::find(w.begin(), w.end(), x) == w.end()) extra.push_back(x);
  std::string out;
  if (!lacks.empty()) out += "lacks " + join(lacks);
  if (!extra.empty()) out += std::string(out.empty() ? "" : "; ") + "has " + join(extra) + " that most hosts lack";
  if (out.empty()) out = "has the same entries in another order ('" + *got + "')";
  return out;
}

bool env_difference_fails(const std::string& var, bool launchers_host) { return !(launchers_host && var == "PATH"); }

std::vector<std::vector<std::pair<int, int>>> tournament_rounds(int n) {
  std::vector<std::vector<std::pair<int, int>>> rounds;
  if (n < 2) return rounds;
  const int m = n % 2 ? n + 1 : n;  // with a "bye" seat for odd n
  std::vector<int> seat(static_cast<size_t>(m));
  for (int i = 0; i < m; ++i) seat[static_cast<size_t>(i)] = i;
  for (int r = 0; r < m - 1; ++r) {
    std::vector<std::pair<int, int>> round;
    for (int i = 0; i < m / 2; ++i) {
      int a = seat[static_cast<size_t>(i)], b = seat[static_cast<size_t>(m - 1 - i)];
      if (a < n && b < n) round.emplace_back(std::min(a, b), std::max(a, b));
    }
    rounds.push_back(round);
    std::rotate(seat.begin() + 1, seat.end() - 1, seat.end());  // seat 0 stays, the rest turn
  }
  return rounds;
}

std::vector<std::vector<std::pair<int, int>>> sparse_rounds(int n, int matchings, uint64_t seed) {
  std::vector<std::vector<std::pair<int, int>>> rounds;
  if (n < 2) return rounds;
  if (n == 2) return {{{0, 1}}};
  std::set<std::pair<int, int>> planned;
  auto add = [&](std::vector<std::pair<int, int>>& round, int a, int b) {
    const std::pair<int, int> p{std::min(a, b), std::max(a, b)};
    if (a != b && planned.insert(p).second) round.push_back(p);
  };
  // The ring: (i, i+1) for even i, then for odd i; the closing pair (n-1, 0)
  // joins the second round when n is even (both ends are free there).
  std::vector<std::pair<int, int>> even, odd, closing;
  for (int i = 0; i + 1 < n; ++i) add(i % 2 ? odd : even, i, i + 1);
  add(n % 2 ? closing : odd, n - 1, 0);
  for (auto* r : {&even, &odd, &closing})
    if (!r->empty()) rounds.push_back(*r);
  std::mt19937_64 rng(seed);
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (int m = 0; m < matchings; ++m) {
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::pair<int, int>> round;
    for (size_t i = 0; i + 1 < order.size(); i += 2) add(round, order[i], order[i + 1]);
    std::sort(round.begin(), round.end());
    if (!round.empty()) rounds.push_back(round);
  }
  return rounds;
}

std::vector<std::vector<std::pair<int, int>>> link_rounds(int n, LinkPlan plan, int matchings, uint64_t seed) {
  return plan == LinkPlan::kFull ? tournament_rounds(n) : sparse_rounds(n, matchings, seed);
}

double sparse_miss_probability(int n, int matchings) {
  if (n <= 3) return 0;
  const double ring = 2.0 / (n - 1), matching = n % 2 ? 1.0 / n : 1.0 / (n - 1);
  return (1 - ring) * std::pow(1 - matching, matchings);
}

LinkPlan auto_plan(int n) { return n <= kFullPlanHosts ? LinkPlan::kFull : LinkPlan::kSparse; }

std::vector<bool> hosts_to_drop(int n, const std::vector<std::pair<int, int>>& bad) {
  std::vector<bool> drop(static_cast<size_t>(n), false);
  for (;;) {
    std::vector<int> count(static_cast<size_t>(n), 0);
    for (auto [a, b] : bad)
      if (!drop[static_cast<size_t>(a)] && !drop[static_cast<size_t>(b)]) ++count[static_cast<size_t>(a)], ++count[static_cast<size_t>(b)];
    int worst = -1;
    for (int i = 0; i < n; ++i)
      if (count[static_cast<size_t>(i)] > 0 && (worst < 0 || count[static_cast<size_t>(i)] >= count[static_cast<size_t>(worst)])) worst = i;
    if (worst < 0) return drop;
    drop[static_cast<size_t>(worst)] = true;
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : (v[k - 1] + v[k]) / 2;
}

Slower slower_in(const LinkSample& s, const LinkSample& ref, double factor, const LinkSlack& slack) {
  return {s.Bps * factor < ref.Bps && s.Bps + slack.Bps < ref.Bps,
          s.latency_us > ref.latency_us * factor && s.latency_us > ref.latency_us + slack.latency_us};
}

namespace {
// A flag per host index, for every host of some samples and a list: the
// link stage's judgements ask "is h one of these?" for each of thousands of
// samples, for each of hundreds of suspects, and a std::set<int> built and
// searched each time was about a sixth of the doctor's CPU at 1,024 hosts.
class HostFlags {
 public:
  // Every host of `s` and `hosts` has a flag; those of `hosts` are set.
  HostFlags(const std::vector<PairSample>& s, const std::vector<int>& hosts) {
    int most = -1;
    for (const auto& p : s) most = std::max({most, p.a, p.b});
    for (int h : hosts) most = std::max(most, h);
    flags_.assign(static_cast<size_t>(most + 1), 0);
    for (int h : hosts) set(h);
  }
  // The same hosts, none set.
  HostFlags none() const {
    HostFlags f = *this;
    std::fill(f.flags_.begin(), f.flags_.end(), 0);
    return f;
  }
  int size() const { return static_cast<int>(flags_.size()); }
  void set(int h) { flags_[static_cast<size_t>(h)] = 1; }
  bool operator[](int h) const { return h >= 0 && h < size() && flags_[static_cast<size_t>(h)]; }

 private:
  std::vector<char> flags_;
};
}  // namespace

bool slower_than(const LinkSample& s, const LinkSample& ref, double factor, const LinkSlack& slack) {
  const Slower w = slower_in(s, ref, factor, slack);
  return w.bandwidth || w.latency;
}

LinkSample typical_best(const std::vector<PairSample>& s) {
  std::map<int, LinkSample> best;  // per host
  for (const auto& p : s)
    for (int h : {p.a, p.b}) {
      auto [it, fresh] = best.emplace(h, p.s);
      it->second.latency_us = std::min(it->second.latency_us, p.s.latency_us);
      it->second.Bps = std::max(it->second.Bps, p.s.Bps);
    }
  std::vector<double> lat, bw;
  for (const auto& [h, b] : best) lat.push_back(b.latency_us), bw.push_back(b.Bps);
  return {median(lat), median(bw)};
}

std::vector<size_t> link_outliers(const std::vector<PairSample>& s, double factor, const LinkSlack& slack) {
  const LinkSample reference = typical_best(s);
  std::vector<size_t> out;
  for (size_t i = 0; i < s.size(); ++i)
    if (slower_than(s[i].s, reference, factor, slack)) out.push_back(i);
  return out;
}

std::vector<int> slow_hosts(const std::vector<PairSample>& s, const std::vector<bool>& slow) {
  std::map<int, std::pair<int, int>> count;  // per host: its pairs, its slow pairs
  for (size_t i = 0; i < s.size(); ++i)
    for (int h : {s[i].a, s[i].b}) ++count[h].first, count[h].second += slow[i] ? 1 : 0;
  // A host all of whose pairs are slow is in no fast pair, so a fast pair
  // without it is any fast pair: counted once, not looked for per host (a
  // thousand hosts' samples scanned for each of hundreds of suspects).
  const bool any_fast = std::find(slow.begin(), slow.end(), false) != slow.end();
  std::vector<int> out;
  for (const auto& [h, n] : count)
    if (n.first >= 2 && n.second >= n.first && any_fast) out.push_back(h);
  return out;
}

bool confirmed_slow(const std::vector<Retest>& retests, double factor, const LinkSlack& slack) {
  if (retests.empty()) return false;
  bool bandwidth = true, latency = true;
  for (const auto& r : retests) {
    const Slower w = slower_in(r.pair, r.reference, factor, slack);
    bandwidth = bandwidth && w.bandwidth, latency = latency && w.latency;
  }
  return bandwidth || latency;
}

LinkJudgement judge_links(const std::vector<PairSample>& s, double factor, const LinkSlack& slack) {
  LinkJudgement j;
  j.typical = typical_best(s);
  if (s.size() < 3) return j;
  std::vector<bool> slow(s.size(), false);
  for (size_t i : link_outliers(s, factor, slack)) slow[i] = true;
  j.suspect_hosts = slow_hosts(s, slow);
  const HostFlags hosts(s, j.suspect_hosts);
  for (size_t i = 0; i < s.size(); ++i)
    if (slow[i] && !hosts[s[i].a] && !hosts[s[i].b]) j.suspect_pairs.push_back(i);
  return j;
}

std::vector<bool> suspects_of(const LinkJudgement& j, const std::vector<PairSample>& s) {
  std::vector<bool> suspect(s.size(), false);
  for (size_t k : j.suspect_pairs) suspect.at(k) = true;
  for (int h : j.suspect_hosts)
    for (size_t k : pairs_of(h, s)) suspect[k] = true;
  return suspect;
}

std::vector<size_t> pairs_of(int host, const std::vector<PairSample>& s) {
  std::vector<size_t> in;
  for (size_t k = 0; k < s.size(); ++k)
    if (s[k].a == host || s[k].b == host) in.push_back(k);
  return in;
}

std::string links_summary(size_t pairs, size_t rounds, int matchings, int retests, const LinkSample& typical) {
  return std::to_string(pairs) + " pairs in " + std::to_string(rounds) + " rounds (" +
         (matchings >= 0 ? "a ring and " + std::to_string(matchings) + " random matchings" : std::string("every pair")) + "), " +
         std::to_string(retests) + " retests; a typical host's best pair does " + human_rate(typical.Bps) + ", round trip " +
         human_us(typical.latency_us);
}

std::vector<int> retest_partners(int host, const std::vector<PairSample>& s, const std::vector<bool>& suspect,
                                 const std::vector<int>& avoid, int count) {
  const HostFlags avoided(s, avoid);
  HostFlags all = avoided.none(), tainted = avoided.none(), measured = avoided.none();
  for (size_t i = 0; i < s.size(); ++i) {
    all.set(s[i].a), all.set(s[i].b);
    if (suspect[i]) tainted.set(s[i].a), tainted.set(s[i].b);
    if (s[i].a == host) measured.set(s[i].b);
    if (s[i].b == host) measured.set(s[i].a);
  }
  std::vector<int> out;
  auto take = [&](auto fits) {
    for (int h = 0; h < all.size(); ++h)
      if (all[h] && static_cast<int>(out.size()) < count && h != host && !avoided[h] && fits(h) &&
          std::find(out.begin(), out.end(), h) == out.end())
        out.push_back(h);
  };
  take([&](int h) { return !tainted[h] && !measured[h]; });
  take([&](int h) { return !tainted[h]; });
  take([](int) { return true; });
  return out;
}

std::optional<std::pair<int, int>> reference_pair(const std::vector<PairSample>& s, const std::vector<bool>& suspect,
                                                  const std::vector<int>& avoid, const LinkSample& typical) {
  std::optional<std::pair<int, int>> best;
  double nearest = 0;
  const HostFlags avoided(s, avoid);
  for (size_t i = 0; i < s.size(); ++i) {
    if (suspect[i] || avoided[s[i].a] || avoided[s[i].b]) continue;
    const double d = std::abs(s[i].s.Bps - typical.Bps);
    if (!best || d < nearest) best = std::make_pair(s[i].a, s[i].b), nearest = d;
  }
  return best;
}

std::vector<std::pair<int, int>> reference_pairs(const std::vector<PairSample>& s, const std::vector<bool>& suspect,
                                                 const std::vector<int>& avoid, const LinkSample& typical, size_t count) {
  const HostFlags avoided(s, avoid);
  std::vector<std::pair<double, size_t>> near;
  for (size_t i = 0; i < s.size(); ++i)
    if (!suspect[i] && !avoided[s[i].a] && !avoided[s[i].b]) near.emplace_back(std::abs(s[i].s.Bps - typical.Bps), i);
  std::sort(near.begin(), near.end());
  std::vector<std::pair<int, int>> out;
  for (size_t k = 0; k < near.size() && out.size() < count; ++k) out.emplace_back(s[near[k].second].a, s[near[k].second].b);
  return out;
}

std::vector<std::vector<size_t>> disjoint_rounds(const std::vector<std::pair<int, int>>& pairs, size_t most) {
  std::vector<std::vector<size_t>> rounds;
  std::vector<std::set<int>> busy;
  for (size_t i = 0; i < pairs.size(); ++i) {
    size_t r = 0;
    while (r < rounds.size() && ((most && rounds[r].size() >= most) || busy[r].count(pairs[i].first) ||
                                 busy[r].count(pairs[i].second)))
      ++r;
    if (r == rounds.size()) rounds.emplace_back(), busy.emplace_back();
    rounds[r].push_back(i);
    busy[r].insert(pairs[i].first), busy[r].insert(pairs[i].second);
  }
  return rounds;
}

std::string ifname_value(const std::vector<std::string>& names) {
  std::vector<std::string> seen;
  for (const auto& n : names)
    if (!n.empty() && std::find(seen.begin(), seen.end(), n) == seen.end()) seen.push_back(n);
  std::string out;
  for (const auto& n : seen) out += (out.empty() ? "" : ",") + n;
  return out;
}

size_t all_reduce_bytes(int hosts) {
  constexpr double kFull = 4 << 20;
  if (hosts <= 8) return static_cast<size_t>(kFull);
  const double b = kFull * 64.0 / (static_cast<double>(hosts) * hosts);
  return std::max<size_t>(1024, static_cast<size_t>(b) / 4 * 4);
}

JobBounds job_bounds(double peers_start_s) {
  const JobBounds base;
  JobBounds b;
  b.peers_start_s = peers_start_s;
  b.agent_timeout_s = std::max(base.agent_timeout_s, static_cast<long>(std::ceil(2 * std::max(0.0, peers_start_s))));
  b.timeout_s += 2 * (b.agent_timeout_s - base.agent_timeout_s);
  b.kill_after_s = b.timeout_s + (base.kill_after_s - base.timeout_s);
  return b;
}

std::string job_bound_text(const JobBounds& b) {
  const JobBounds base;
  const long more = b.agent_timeout_s - base.agent_timeout_s;
  if (more <= 0) return std::to_string(b.timeout_s) + " s";
  char took[32];
  std::snprintf(took, sizeof took, "%.0f", b.peers_start_s);
  return std::to_string(b.timeout_s) + " s (" + std::to_string(base.timeout_s) + " s, and " + std::to_string(more) +
         " s more each for starting the agents and the ranks: this run's peers took " + took +
         " s to start, each start is given twice that)";
}

bool machine_limit(bool sim, int hosts, unsigned cores) {
  return sim && hosts > kMachineHostsPerCore * static_cast<long>(std::max(1u, cores));
}

AllReduceSpread all_reduce_hosts(const std::vector<int>& hosts, bool sim, unsigned cores) {
  const int n = static_cast<int>(hosts.size());
  if (!machine_limit(sim, n, cores)) return {hosts, 1};
  const long most = kMachineHostsPerCore * static_cast<long>(std::max(1u, cores));
  AllReduceSpread out;
  out.step = static_cast<size_t>((n + most - 1) / most);
  for (size_t i = 0; i < hosts.size(); i += out.step) out.hosts.push_back(hosts[i]);
  return out;
}

std::string size_text(size_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MB";
  if (bytes >= 1024) return std::to_string(bytes / 1024) + " kB";
  return std::to_string(bytes) + " bytes";
}

std::string human_rate(double Bps) {
  char b[32];
  if (Bps >= 1e9) std::snprintf(b, sizeof b, "%.1fGB/s", Bps / 1e9);
  else if (Bps >= 1e6) std::snprintf(b, sizeof b, "%.0fMB/s", Bps / 1e6);
  else std::snprintf(b, sizeof b, "%.0fkB/s", Bps / 1e3);
  return b;
}

std::string human_us(double us) {
  char b[32];
  if (us >= 1000) std::snprintf(b, sizeof b, "%.1fms", us / 1000);
  else std::snprintf(b, sizeof b, "%.0fus", us);
  return b;
}

std::string human_bytes(double bytes) {
  char b[32];
  if (bytes >= 1e12) std::snprintf(b, sizeof b, "%.1fTB", bytes / 1e12);
  else if (bytes >= 1e9) std::snprintf(b, sizeof b, "%.1fGB", bytes / 1e9);
  else std::snprintf(b, sizeof b, "%.0fMB", bytes / 1e6);
  return b;
}

}  // namespace dl::doctor
