// Stage 5: latency and bandwidth of every pair of hosts. Pairs run in the
// rounds of a round-robin tournament: each round a set of disjoint pairs
// measured at once, so n hosts cost n-1 rounds (n for odd n), not n(n-1)/2
// one-by-one tests, and no host is in two tests at the same time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <cstdio>
#include <thread>

#include "doctor/analysis.h"
#include "doctor/doctor.h"

namespace dl::doctor {

namespace {
struct PairResult {
  int a = 0, b = 0;
  LinkResult r;
  std::string error;
  double seconds = 0;  // how long this pair's test took
};
}  // namespace

LinkResult Doctor::measure_alone(int a, int b) {
  const Endpoint& e = *data_endpoint_[static_cast<size_t>(b)];
  const auto j = peers_[static_cast<size_t>(a)]->call<LinkReply>(
      LinkRequest{e.addr, e.port, o_.link_seconds, 20, static_cast<long>(o_.connect_timeout_s * 1000)},
      Millis(static_cast<long>(o_.link_seconds * 2000) + 120000));
  return {j.latency_us, j.out_Bps, j.in_Bps};
}

std::vector<Retest> Doctor::retest(int a, int b, const std::pair<int, int>* reference, const LinkSample& typical,
                                   LinkResult& best) {
  std::vector<Retest> tries;
  for (int t = 0; t < kLinkRetests; ++t) {
    progress("links: testing " + name(a) + " <-> " + name(b) + " again, alone (" + std::to_string(t + 1) + " of " +
             std::to_string(kLinkRetests) + ")");
    Retest x{{best.latency_us, std::min(best.out_Bps, best.in_Bps)}, typical};
    try {
      const LinkResult r = measure_alone(a, b);
      best.latency_us = std::min(best.latency_us, r.latency_us);
      best.out_Bps = std::max(best.out_Bps, r.out_Bps);
      best.in_Bps = std::max(best.in_Bps, r.in_Bps);
      x.pair = {r.latency_us, std::min(r.out_Bps, r.in_Bps)};
      if (reference) {
        const LinkResult ref = measure_alone(reference->first, reference->second);
        x.reference = {ref.latency_us, std::min(ref.out_Bps, ref.in_Bps)};
      }
    } catch (const std::exception&) {
      // A link that fails while tested alone stays suspect: the first result stands.
    }
    tries.push_back(x);
    if (!slower_than(x.pair, x.reference, o_.link_factor)) break;  // cleared: a busy moment, not the link
  }
  return tries;
}

namespace {

// Host h's best pair: its lowest latency and, apart, its highest bandwidth.
LinkSample best_of(const std::vector<PairSample>& s, int h) {
  LinkSample best{1e18, 0};
  for (const auto& p : s)
    if (p.a == h || p.b == h) best.latency_us = std::min(best.latency_us, p.s.latency_us), best.Bps = std::max(best.Bps, p.s.Bps);
  return best;
}

std::string factor_text(double factor) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", factor);
  return " (--link-factor " + std::string(b) + "; slow again when tested alone)";
}
}  // namespace

std::vector<int> Doctor::report_slow_hosts(const std::vector<PairSample>& s, const std::vector<bool>& slow,
                                           const LinkSample& typical) {
  const std::vector<int> slow_host = slow_hosts(s, slow);
  for (int h : slow_host) {
    // One line for a host slow to every host: the fault is its own (its NIC,
    // cable or a rate limit there), not any one link's.
    const LinkSample best = best_of(s, h);
    const bool bw = slower_than({0, best.Bps}, {0, typical.Bps}, o_.link_factor);
    std::string each;  // its pairs: "peer rate", or "peer round trip"
    for (const auto& p : s)
      if (p.a == h || p.b == h)
        each += (each.empty() ? "" : ", ") + name(p.a == h ? p.b : p.a) + " " + (bw ? human_rate(p.s.Bps) : human_us(p.s.latency_us));
    const std::string what =
        bw ? human_rate(best.Bps) + " at best (" + each + "), a typical host's best pair does " + human_rate(typical.Bps)
           : "round trip " + human_us(best.latency_us) + " at best (" + each + "), a typical host's best pair takes " +
                 human_us(typical.latency_us);
    report_->add({Mark::kFail, Check::kLinks, {name(h)}, name(h) + " is slow to every host: " + what + factor_text(o_.link_factor),
                  "check that host's network: cables and NIC speed (ethtool), errors (ip -s link), a rate limit or qdisc (tc qdisc show)"});
  }
  return slow_host;
}

void Doctor::stage_links() {
  const std::vector<int> hosts = alive();
  const auto rounds = tournament_rounds(static_cast<int>(hosts.size()));
  // Two passes over the rounds: latency alone first (no other pair streams
  // meanwhile, so a busy CPU does not pass for a slow link), then bandwidth.
  std::vector<PairResult> results;
  for (const auto& round : rounds)
    for (auto [a, b] : round) results.push_back({hosts[static_cast<size_t>(a)], hosts[static_cast<size_t>(b)], {}, "", 0});
  const long timeout_ms = static_cast<long>(o_.connect_timeout_s * 1000);
  for (int pass = 0; pass < 2; ++pass) {
    size_t first = 0;
    for (size_t r = 0; r < rounds.size(); first += rounds[r].size(), ++r) {
      progress(std::string(pass ? "links: bandwidth" : "links: latency") + ", round " + std::to_string(r + 1) + " of " +
               std::to_string(rounds.size()));
      std::vector<std::thread> threads;
      for (size_t k = 0; k < rounds[r].size(); ++k)
        threads.emplace_back([&, k, pass, at = first + k] {
          PairResult& p = results[at];
          if (!p.error.empty()) return;
          const Endpoint& e = *data_endpoint_[static_cast<size_t>(p.b)];
          const auto t0 = std::chrono::steady_clock::now();
          try {
            const auto j = peers_[static_cast<size_t>(p.a)]->call<LinkReply>(
                LinkRequest{e.addr, e.port, pass ? o_.link_seconds : 0.0, pass ? 0 : 20, timeout_ms},
                Millis(static_cast<long>(o_.link_seconds * 2000) + 120000));
            if (pass == 0) p.r.latency_us = j.latency_us;
            else p.r.out_Bps = j.out_Bps, p.r.in_Bps = j.in_Bps;
          } catch (const std::exception& ex) {
            p.error = ex.what();
          }
          p.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        });
      for (auto& t : threads) t.join();
    }
  }
  std::vector<PairSample> samples;
  std::vector<size_t> measured;
  std::vector<LinkNote> matrix;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& p = results[i];
    matrix.push_back({name(p.a), name(p.b), p.r.latency_us, p.r.out_Bps, p.r.in_Bps, p.seconds, p.error, std::nullopt});
    if (p.error.empty())
      samples.push_back({p.a, p.b, {p.r.latency_us, std::min(p.r.out_Bps, p.r.in_Bps)}}), measured.push_back(i);
  }
  report_->notes().link_rounds = static_cast<int>(rounds.size());
  std::vector<std::pair<int, int>> bad;
  for (const auto& p : results)
    if (!p.error.empty()) {
      bad.emplace_back(p.a, p.b);
      report_->add({Mark::kFail, Check::kLinks, {name(p.a), name(p.b)}, name(p.a) + " <-> " + name(p.b) + ": " + p.error, ""});
    }
  // A pair that looks slow is tested again, alone, each time followed by a
  // typical pair (the one nearest a typical host's best bandwidth), also
  // alone: only a pair slower than that reference every time is a finding. A
  // busy CPU slows one test, or both of a retest; a slow link slows it every time.
  const LinkSample typical = typical_best(samples);
  std::vector<size_t> suspects;
  std::vector<bool> slow(samples.size(), false);
  if (samples.size() >= 3) suspects = link_outliers(samples, o_.link_factor);
  std::optional<std::pair<int, int>> reference;
  double nearest = 0;
  for (size_t k = 0; k < samples.size(); ++k)
    if (std::find(suspects.begin(), suspects.end(), k) == suspects.end() &&
        (!reference || std::abs(samples[k].s.Bps - typical.Bps) < nearest))
      reference = std::make_pair(samples[k].a, samples[k].b), nearest = std::abs(samples[k].s.Bps - typical.Bps);
  for (size_t k : suspects) {
    PairResult& p = results[measured[k]];
    const auto tries = retest(p.a, p.b, reference ? &*reference : nullptr, typical, p.r);
    samples[k].s = {p.r.latency_us, std::min(p.r.out_Bps, p.r.in_Bps)};
    LinkNote& note = matrix[measured[k]];
    note.latency_us = p.r.latency_us, note.a_to_b_Bps = p.r.out_Bps, note.b_to_a_Bps = p.r.in_Bps;
    note.retested.emplace();
    for (const auto& t : tries)
      note.retested->push_back({t.pair.latency_us, t.pair.Bps, t.reference.latency_us, t.reference.Bps});
    slow[k] = confirmed_slow(tries, o_.link_factor);
  }
  report_->notes().links = std::move(matrix);
  const std::vector<int> slow_host = report_slow_hosts(samples, slow, typical);
  for (size_t k = 0; k < samples.size(); ++k) {
    if (!slow[k]) continue;
    const auto& p = results[measured[k]];
    bad.emplace_back(p.a, p.b);
    if (std::find_if(slow_host.begin(), slow_host.end(), [&](int h) { return h == p.a || h == p.b; }) != slow_host.end())
      continue;  // said once, for its host
    const bool slow_bw = slower_than({0, samples[k].s.Bps}, {0, typical.Bps}, o_.link_factor);
    std::string what = name(p.a) + " <-> " + name(p.b) + ": ";
    if (slow_bw)
      what += human_rate(samples[k].s.Bps) + " (" + name(p.a) + "->" + name(p.b) + " " + human_rate(p.r.out_Bps) + ", " +
              name(p.b) + "->" + name(p.a) + " " + human_rate(p.r.in_Bps) + "), a typical host's best pair does " +
              human_rate(typical.Bps);
    else
      what += "round trip " + human_us(samples[k].s.latency_us) + ", a typical host's best pair takes " + human_us(typical.latency_us);
    report_->add({Mark::kFail, Check::kLinks, {name(p.a), name(p.b)}, what + factor_text(o_.link_factor),
                  "check that link: cables and NIC speed (ethtool), errors (ip -s link), a rate limit or qdisc (tc qdisc show)"});
  }
  const auto drop = hosts_to_drop(static_cast<int>(entries_.size()), bad);
  for (int h : hosts) {
    double worst = 0;
    bool any = false;
    for (size_t k = 0; k < samples.size(); ++k) {
      const auto& p = results[measured[k]];
      if (p.a == h || p.b == h) worst = any ? std::min(worst, samples[k].s.Bps) : samples[k].s.Bps, any = true;
    }
    int pairs = 0;
    for (auto [a, b] : bad) pairs += (a == h || b == h) ? 1 : 0;
    const std::string text = any ? human_rate(worst) : "";
    if (drop[static_cast<size_t>(h)]) report_->set(h, Check::kLinks, Mark::kFail, text), dropped_[static_cast<size_t>(h)] = true;
    else report_->set(h, Check::kLinks, pairs ? Mark::kWarn : Mark::kOk, text);
  }
}

}  // namespace dl::doctor
