// Stage 5: latency and bandwidth between hosts, in rounds of disjoint pairs
// measured at once: every pair (a round-robin tournament, n-1 rounds) or the
// sparse plan (a ring and random matchings, a constant number of rounds:
// analysis.h, link_rounds). Suspects are tested again before they are named.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

#include "doctor/analysis.h"
#include "doctor/doctor.h"
#include "doctor/hostlist.h"

namespace dl::doctor {

namespace {
std::string factor_text(double factor) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", factor);
  return " (--link-factor " + std::string(b) + "; slow again when tested alone)";
}

const char* const kLinkFix =
    "check that host's network: cables and NIC speed (ethtool), errors (ip -s link), a rate limit or qdisc (tc qdisc show)";
const char* const kPairFix =
    "check that link: cables and NIC speed (ethtool), errors (ip -s link), a rate limit or qdisc (tc qdisc show)";

LinkSample sample_of(const LinkResult& r) { return {r.latency_us, std::min(r.out_Bps, r.in_Bps)}; }
}  // namespace

std::vector<std::vector<std::pair<int, int>>> Doctor::plan_pairs(size_t hosts) const {
  const int n = static_cast<int>(hosts);
  const LinkPlan plan = o_.links == "full" ? LinkPlan::kFull : o_.links == "sparse" ? LinkPlan::kSparse : auto_plan(n);
  return link_rounds(n, plan, kDefaultMatchings, seed_);
}

void Doctor::measure_pairs(std::vector<PairTest*>& pairs, bool bandwidth, long at_once) {
  // One route for them all: at most at_once run at once (0: all), paced in
  // the tree (each subtree its share), so the doctor's work is the same
  // few replies from its children however many hosts the round has.
  const long timeout_ms = static_cast<long>(o_.connect_timeout_s * 1000);
  std::vector<std::pair<int, LinkRequest>> calls;
  std::vector<PairTest*> batch;
  for (PairTest* p : pairs) {
    if (!p->error.empty()) continue;
    const Endpoint& e = *data_endpoint_[static_cast<size_t>(p->b)];
    calls.emplace_back(p->a, LinkRequest{e.addr, e.port, bandwidth ? o_.link_seconds : 0.0, bandwidth ? 0 : 20, timeout_ms});
    batch.push_back(p);
  }
  if (batch.empty()) return;
  // Disjoint pairs: each host is the a of at most one call, so replies are by a.
  const auto t0 = std::chrono::steady_clock::now();
  const auto got = ask_each<LinkReply>(*fan_, calls, Millis(static_cast<long>(o_.link_seconds * 2000) + 120000), at_once);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (PairTest* p : batch) {
    const auto& o = got.at(p->a);  // (a route answers every node it was asked for)
    p->seconds += o.reply ? o.reply->seconds : took;
    if (!o.reply) p->error = o.error;
    else if (bandwidth) p->r.out_Bps = o.reply->out_Bps, p->r.in_Bps = o.reply->in_Bps;
    else p->r.latency_us = o.reply->latency_us;
  }
  link_tests_ += bandwidth ? static_cast<int>(batch.size()) : 0;
}

LinkResult Doctor::measure_alone(int a, int b) {
  PairTest t{a, b, {}, "", 0};
  std::vector<PairTest*> one{&t};
  measure_pairs(one, false, 0);
  measure_pairs(one, true, 0);
  if (!t.error.empty()) throw RemoteError(t.error);
  return t.r;
}

std::vector<Retest> Doctor::retest(int a, int b, const std::pair<int, int>* reference, const LinkSample& typical,
                                   LinkResult& best) {
  std::vector<Retest> tries;
  for (int t = 0; t < kLinkRetests; ++t) {
    progress("links: testing " + name(a) + " <-> " + name(b) + " again, alone (" + std::to_string(t + 1) + " of " +
             std::to_string(kLinkRetests) + ")");
    Retest x{sample_of(best), typical};
    try {
      const LinkResult r = measure_alone(a, b);
      best.latency_us = std::min(best.latency_us, r.latency_us);
      best.out_Bps = std::max(best.out_Bps, r.out_Bps);
      best.in_Bps = std::max(best.in_Bps, r.in_Bps);
      x.pair = sample_of(r);
      if (reference) x.reference = sample_of(measure_alone(reference->first, reference->second));
    } catch (const std::exception&) {
      // A link that fails while tested alone stays suspect: the first result stands.
    }
    tries.push_back(x);
    if (!confirmed_slow(tries, o_.link_factor)) break;  // cleared: a busy moment, not the link
  }
  return tries;
}

std::vector<std::vector<Retest>> Doctor::retest_all(const std::vector<size_t>& suspects, std::vector<PairTest>& tests,
                                                    const std::vector<std::pair<int, int>>& references,
                                                    const LinkSample& typical) {
  std::vector<std::vector<Retest>> tries(suspects.size());
  if (suspects.size() <= kAloneRetests) {
    for (size_t i = 0; i < suspects.size(); ++i) {
      PairTest& p = tests[suspects[i]];
      tries[i] = retest(p.a, p.b, references.empty() ? nullptr : &references[0], typical, p.r);
    }
    return tries;
  }
  // Many suspects (a busy machine slowed a whole batch): tested again
  // together, round by round, beside up to kBatchReferences typical pairs
  // whose median is the reference; slower than it in every one of
  // kBatchRetests rounds is a finding.
  // A round is measured at once, its references with it, so it is no
  // bigger than --link-parallel less the references: the references must
  // share the suspects' moment, not a lighter one (on a loaded machine 32
  // streams at once are slower than 13, and all their pairs were found slow).
  const size_t parallel = static_cast<size_t>(std::max(0, link_parallel_));
  const size_t most = parallel == 0 ? 0 : parallel > kBatchReferences ? parallel - kBatchReferences : 1;
  std::vector<size_t> pending(suspects.size());
  for (size_t i = 0; i < pending.size(); ++i) pending[i] = i;
  for (int t = 0; t < kBatchRetests && !pending.empty(); ++t) {
    std::vector<std::pair<int, int>> pairs;
    for (size_t i : pending) pairs.emplace_back(tests[suspects[i]].a, tests[suspects[i]].b);
    std::vector<size_t> still;
    for (const auto& round : disjoint_rounds(pairs, most)) {
      progress("links: testing " + std::to_string(round.size()) + " suspect pairs again (" + std::to_string(t + 1) + " of " +
               std::to_string(kBatchRetests) + ")");
      std::vector<PairTest> now;
      std::set<int> busy;
      for (size_t k : round) now.push_back({pairs[k].first, pairs[k].second, {}, "", 0}), busy.insert(pairs[k].first), busy.insert(pairs[k].second);
      const size_t refs = parallel ? std::min(kBatchReferences, parallel - round.size()) : kBatchReferences;
      for (const auto& r : references)
        if (now.size() < round.size() + refs && !busy.count(r.first) && !busy.count(r.second))
          now.push_back({r.first, r.second, {}, "", 0}), busy.insert(r.first), busy.insert(r.second);
      std::vector<PairTest*> all;
      for (auto& x : now) all.push_back(&x);
      measure_pairs(all, false, 0);  // at once, its references with it
      measure_pairs(all, true, 0);
      std::vector<double> lat, bw;
      for (size_t j = round.size(); j < now.size(); ++j)
        if (now[j].error.empty()) lat.push_back(now[j].r.latency_us), bw.push_back(sample_of(now[j].r).Bps);
      const LinkSample ref = lat.empty() ? typical : LinkSample{median(lat), median(bw)};
      for (size_t j = 0; j < round.size(); ++j) {
        const size_t i = pending[round[j]];
        PairTest& p = tests[suspects[i]];
        Retest x{now[j].error.empty() ? sample_of(now[j].r) : sample_of(p.r), ref};
        if (now[j].error.empty())
          p.r.latency_us = std::min(p.r.latency_us, now[j].r.latency_us), p.r.out_Bps = std::max(p.r.out_Bps, now[j].r.out_Bps),
          p.r.in_Bps = std::max(p.r.in_Bps, now[j].r.in_Bps);
        tries[i].push_back(x);
        if (confirmed_slow(tries[i], o_.link_factor)) still.push_back(i);  // slow the same way every time so far
      }
    }
    pending = std::move(still);
  }
  return tries;
}

void Doctor::report_slow_host(int h, const std::vector<PairSample>& s, const std::vector<Retest>& tries,
                              const LinkSample& typical) {
  // One line for a host slow to every host: the fault is its own (its NIC,
  // cable or a rate limit there), not any one link's.
  LinkSample best{1e18, 0};
  for (const auto& p : s)
    if (p.a == h || p.b == h) best.latency_us = std::min(best.latency_us, p.s.latency_us), best.Bps = std::max(best.Bps, p.s.Bps);
  for (const auto& t : tries) best.latency_us = std::min(best.latency_us, t.pair.latency_us), best.Bps = std::max(best.Bps, t.pair.Bps);
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
                kLinkFix});
}

std::vector<int> Doctor::confirm_slow_hosts(const LinkJudgement& j, const std::vector<PairSample>& s, std::vector<bool>& suspect) {
  std::vector<int> slow;
  for (int h : j.suspect_hosts) {
    // Tested again, alone, with hosts it was not measured with where it can
    // be, each time right before a typical pair: slow every time, it is the host.
    const auto ref = reference_pair(s, suspect, j.suspect_hosts, j.typical);
    std::vector<Retest> tries;
    bool cleared = false;
    for (int partner : retest_partners(h, s, suspect, j.suspect_hosts, kLinkRetests)) {
      LinkResult best{1e18, 0, 0};
      auto t = retest(h, partner, ref ? &*ref : nullptr, j.typical, best);
      cleared = cleared || !confirmed_slow(t, o_.link_factor);
      tries.insert(tries.end(), t.begin(), t.end());
      if (cleared) break;
    }
    if (cleared || tries.empty()) continue;  // its pairs stay suspects of their own
    slow.push_back(h);
    for (size_t k : pairs_of(h, s)) suspect[k] = false;  // said once, for its host
    report_slow_host(h, s, tries, j.typical);
  }
  return slow;
}

void Doctor::report_slow_pairs(const LinkRun& run, const std::vector<size_t>& slow, const LinkSample& typical) {
  auto pair_of = [&](size_t k) -> const PairTest& { return run.tests[run.measured[k]]; };
  auto line = [&](size_t k) {
    const auto& p = pair_of(k);
    const LinkSample& s = run.samples[k].s;
    if (!slower_than({0, s.Bps}, {0, typical.Bps}, o_.link_factor))
      return name(p.a) + " <-> " + name(p.b) + ": round trip " + human_us(s.latency_us);
    return name(p.a) + " <-> " + name(p.b) + ": " + human_rate(s.Bps) + " (" + name(p.a) + "->" + name(p.b) + " " +
           human_rate(p.r.out_Bps) + ", " + name(p.b) + "->" + name(p.a) + " " + human_rate(p.r.in_Bps) + ")";
  };
  const std::string typical_text = ", a typical host's best pair does " + human_rate(typical.Bps) + " and takes " +
                                   human_us(typical.latency_us);
  if (slow.size() <= 3) {
    for (size_t k : slow)
      report_->add({Mark::kFail, Check::kLinks, {name(pair_of(k).a), name(pair_of(k).b)},
                    line(k) + typical_text + factor_text(o_.link_factor), kPairFix});
    return;
  }
  // Many slow pairs (a slow switch or rack): one line naming their hosts.
  std::vector<std::string> hosts;
  std::string some;
  for (size_t i = 0; i < slow.size(); ++i) {
    hosts.push_back(name(pair_of(slow[i]).a)), hosts.push_back(name(pair_of(slow[i]).b));
    if (i < 3) some += (some.empty() ? "" : "; ") + line(slow[i]);
  }
  report_->add({Mark::kFail, Check::kLinks, hosts,
                std::to_string(slow.size()) + " pairs among " + name_hosts(hosts) + " are slow (" + some + "; ...)" + typical_text +
                    factor_text(o_.link_factor),
                "check the switches and uplinks between them, then each link: ethtool, ip -s link, tc qdisc show"});
}

Doctor::LinkRun Doctor::plan_links(std::vector<int> hosts) const {
  LinkRun run;
  run.hosts = std::move(hosts);
  run.rounds = plan_pairs(run.hosts.size());
  for (const auto& round : run.rounds)
    for (auto [a, b] : round) run.tests.push_back({run.hosts[static_cast<size_t>(a)], run.hosts[static_cast<size_t>(b)], {}, "", 0});
  return run;
}

void Doctor::measure_plan(LinkRun& run) {
  // Two passes over the rounds: latency alone first (no other pair streams
  // meanwhile, so a busy CPU does not pass for a slow link), then bandwidth.
  for (int pass = 0; pass < 2; ++pass) {
    size_t first = 0;
    for (size_t r = 0; r < run.rounds.size(); first += run.rounds[r].size(), ++r) {
      progress(std::string(pass ? "links: bandwidth" : "links: latency") + ", round " + std::to_string(r + 1) + " of " +
               std::to_string(run.rounds.size()));
      std::vector<PairTest*> round;
      for (size_t k = 0; k < run.rounds[r].size(); ++k) round.push_back(&run.tests[first + k]);
      measure_pairs(round, pass == 1, pass == 1 ? link_parallel_ : ping_parallel_);
    }
  }
}

void Doctor::collect_samples(LinkRun& run) {
  for (size_t i = 0; i < run.tests.size(); ++i) {
    const auto& p = run.tests[i];
    run.matrix.push_back({name(p.a), name(p.b), p.r.latency_us, p.r.out_Bps, p.r.in_Bps, p.seconds, p.error, std::nullopt});
    if (p.error.empty()) {
      run.samples.push_back({p.a, p.b, sample_of(p.r)}), run.measured.push_back(i);
      continue;
    }
    run.bad.emplace_back(p.a, p.b);
    report_->add({Mark::kFail, Check::kLinks, {name(p.a), name(p.b)}, name(p.a) + " <-> " + name(p.b) + ": " + p.error, ""});
  }
}

std::vector<size_t> Doctor::confirm_slow_pairs(LinkRun& run, const std::vector<bool>& suspect,
                                               const std::vector<int>& slow_hosts, const LinkSample& typical) {
  // Each suspect is tested again, alone, each time followed by a typical
  // pair (the one nearest a typical host's best bandwidth), also alone: only
  // what is slower than that reference every time is a finding. A busy CPU
  // slows one test, or both of a retest; a slow link every one.
  const auto refs = reference_pairs(run.samples, suspect, slow_hosts, typical, 8);
  std::vector<size_t> again, slow;
  for (size_t k = 0; k < run.samples.size(); ++k)
    if (suspect[k]) again.push_back(run.measured[k]);
  const auto all_tries = retest_all(again, run.tests, refs, typical);
  for (size_t i = 0, k = 0; k < run.samples.size(); ++k) {
    if (!suspect[k]) continue;
    const PairTest& p = run.tests[run.measured[k]];
    const auto& tries = all_tries[i++];
    run.samples[k].s = sample_of(p.r);
    LinkNote& note = run.matrix[run.measured[k]];
    note.latency_us = p.r.latency_us, note.a_to_b_Bps = p.r.out_Bps, note.b_to_a_Bps = p.r.in_Bps;
    note.retested.emplace();
    for (const auto& t : tries) note.retested->push_back({t.pair.latency_us, t.pair.Bps, t.reference.latency_us, t.reference.Bps});
    if (confirmed_slow(tries, o_.link_factor)) slow.push_back(k), run.bad.emplace_back(p.a, p.b);
  }
  return slow;
}

void Doctor::note_links(LinkRun& run, int retests, const LinkSample& typical) {
  Notes& n = report_->notes();
  const bool sparse = run.tests.size() < run.hosts.size() * (run.hosts.size() - 1) / 2;
  n.link_rounds = static_cast<int>(run.rounds.size());
  n.link_plan = sparse ? "sparse" : "full";
  n.link_tests = link_tests_;
  n.links_summary = links_summary(run.tests.size(), run.rounds.size(), sparse ? kDefaultMatchings : -1, retests, typical);
  n.links = std::move(run.matrix);
}

void Doctor::stage_links() {
  LinkRun run = plan_links(alive());
  const int before = link_tests_;
  measure_plan(run);
  const int first_pass = link_tests_ - before;
  collect_samples(run);
  const LinkJudgement j = judge_links(run.samples, o_.link_factor);
  std::vector<bool> suspect = suspects_of(j, run.samples);
  const std::vector<int> slow_hosts = confirm_slow_hosts(j, run.samples, suspect);
  for (int h : slow_hosts)
    for (size_t k : pairs_of(h, run.samples)) run.bad.emplace_back(run.samples[k].a, run.samples[k].b);
  const std::vector<size_t> slow = confirm_slow_pairs(run, suspect, slow_hosts, j.typical);
  report_slow_pairs(run, slow, j.typical);
  note_links(run, link_tests_ - before - first_pass, j.typical);
  mark_links(run);
}

void Doctor::mark_links(const LinkRun& run) {
  const auto drop = hosts_to_drop(static_cast<int>(entries_.size()), run.bad);
  std::vector<double> worst(entries_.size(), -1);
  for (const auto& p : run.samples)
    for (int h : {p.a, p.b}) {
      double& w = worst[static_cast<size_t>(h)];
      w = w < 0 ? p.s.Bps : std::min(w, p.s.Bps);
    }
  std::vector<int> in_bad(entries_.size(), 0);
  for (auto [a, b] : run.bad) ++in_bad[static_cast<size_t>(a)], ++in_bad[static_cast<size_t>(b)];
  for (int h : run.hosts) {
    const size_t i = static_cast<size_t>(h);
    const std::string text = worst[i] >= 0 ? human_rate(worst[i]) : "";
    if (drop[i]) report_->set(h, Check::kLinks, Mark::kFail, text), dropped_[i] = true;
    else report_->set(h, Check::kLinks, in_bad[i] ? Mark::kWarn : Mark::kOk, text);
  }
}

}  // namespace dl::doctor
