// Links without every pair (doctor/analysis.h: sparse_rounds, judge_links):
// the plan's shape, what its judgement finds, and how often a single slow
// pair is missed (the figure docs/doctor.md gives).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <random>
#include <set>

#include "doctor/analysis.h"
#include "doctor/peer_start.h"

using namespace dl::doctor;

namespace {
using Rounds = std::vector<std::vector<std::pair<int, int>>>;

// Every round disjoint, no pair twice; returns the pairs.
std::set<std::pair<int, int>> check_rounds(const Rounds& rounds, int n) {
  std::set<std::pair<int, int>> seen;
  for (const auto& r : rounds) {
    std::set<int> busy;
    for (auto [a, b] : r) {
      CHECK(a < b);
      CHECK(b < n);
      CHECK(busy.insert(a).second);
      CHECK(busy.insert(b).second);
      CHECK(seen.insert({a, b}).second);
    }
  }
  return seen;
}

// The samples of a plan: every pair `fast`, except the pairs `slow_pair`
// says, with a few percent of noise.
std::vector<PairSample> measure(const Rounds& rounds, const std::function<bool(int, int)>& slow_pair, std::mt19937& rng) {
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  std::vector<PairSample> s;
  for (const auto& r : rounds)
    for (auto [a, b] : r) s.push_back({a, b, {60 * noise(rng), (slow_pair(a, b) ? 2.5e6 : 1e9) * noise(rng)}});
  return s;
}
}  // namespace

TEST_CASE("sparse plan: O(n) pairs in a constant number of rounds, every host in 2 or more", "[doctor]") {
  for (int n : {3, 4, 5, 9, 16, 17, 64, 255, 1024}) {
    INFO(n);
    const auto rounds = sparse_rounds(n, kDefaultMatchings, 7);
    const auto pairs = check_rounds(rounds, n);
    CHECK(rounds.size() <= static_cast<size_t>(3 + kDefaultMatchings));
    CHECK(pairs.size() <= static_cast<size_t>(n + kDefaultMatchings * n / 2));
    std::vector<int> degree(static_cast<size_t>(n), 0);
    for (auto [a, b] : pairs) ++degree[static_cast<size_t>(a)], ++degree[static_cast<size_t>(b)];
    for (int d : degree) CHECK(d >= 2);
    // The ring is all there.
    for (int i = 0; i < n; ++i) CHECK(pairs.count({std::min(i, (i + 1) % n), std::max(i, (i + 1) % n)}) == 1);
  }
  CHECK(sparse_rounds(1, 2, 1).empty());
  CHECK(sparse_rounds(2, 2, 1) == Rounds{{{0, 1}}});
  // 1,024 hosts: 2,048 pairs in 4 rounds instead of 523,776 in 1,023.
  const auto big = sparse_rounds(1024, kDefaultMatchings, 11);
  CHECK(big.size() == 4);
  CHECK(check_rounds(big, 1024).size() > 2000);
  // The seed picks the matchings; the ring stays.
  CHECK(sparse_rounds(64, 2, 1) != sparse_rounds(64, 2, 2));
  CHECK(sparse_rounds(64, 2, 1) == sparse_rounds(64, 2, 1));
  CHECK(auto_plan(8) == LinkPlan::kFull);
  CHECK(auto_plan(9) == LinkPlan::kSparse);
  CHECK(link_rounds(8, LinkPlan::kFull, 2, 1).size() == 7);
}

TEST_CASE("judge_links: one slow host is a suspect host, with 3, 4 and 1,024 hosts", "[doctor]") {
  std::mt19937 rng(3);
  for (int n : {3, 4, 9, 64, 1024}) {
    INFO(n);
    const int slow = n / 2;
    const auto rounds = link_rounds(n, auto_plan(n), kDefaultMatchings, 5);
    const auto s = measure(rounds, [&](int a, int b) { return a == slow || b == slow; }, rng);
    const LinkJudgement j = judge_links(s, 3);
    CHECK(j.suspect_hosts == std::vector<int>{slow});
    CHECK(j.suspect_pairs.empty());
    CHECK(j.typical.Bps > 0.8e9);
    // Its retest partners: hosts it was not measured with where there are any.
    std::vector<bool> suspect(s.size());
    for (size_t i = 0; i < s.size(); ++i) suspect[i] = s[i].a == slow || s[i].b == slow;
    const auto partners = retest_partners(slow, s, suspect, j.suspect_hosts, 2);
    CHECK(partners.size() == 2);
    for (int p : partners) CHECK(p != slow);
    const auto ref = reference_pair(s, suspect, j.suspect_hosts, j.typical);
    REQUIRE(ref);
    CHECK(ref->first != slow);
    CHECK(ref->second != slow);
  }
}

TEST_CASE("judge_links: a slow pair is a suspect pair, no host blamed - a healthy cluster has no suspect", "[doctor]") {
  std::mt19937 rng(4);
  const auto rounds = sparse_rounds(64, kDefaultMatchings, 9);
  const auto s = measure(rounds, [](int a, int b) { return a == 10 && b == 11; }, rng);
  const LinkJudgement j = judge_links(s, 3);
  CHECK(j.suspect_hosts.empty());
  REQUIRE(j.suspect_pairs.size() == 1);
  CHECK(s[j.suspect_pairs[0]].a == 10);
  CHECK(s[j.suspect_pairs[0]].b == 11);
  const auto healthy = judge_links(measure(rounds, [](int, int) { return false; }, rng), 3);
  CHECK(healthy.suspect_hosts.empty());
  CHECK(healthy.suspect_pairs.empty());
  CHECK(judge_links({{0, 1, {60, 2e6}}}, 3).suspect_pairs.empty());  // one pair: nothing to compare with
}

TEST_CASE("judge_links: a slow rack's links to the rest are suspect pairs, its hosts are not slow hosts", "[doctor]") {
  std::mt19937 rng(5);
  // Hosts 0..15 (a rack, contiguous in the hostfile) slow to everyone outside it.
  auto rack = [](int h) { return h < 16; };
  const auto rounds = sparse_rounds(128, kDefaultMatchings, 13);
  const auto s = measure(rounds, [&](int a, int b) { return rack(a) != rack(b); }, rng);
  const LinkJudgement j = judge_links(s, 3);
  size_t crossing = 0;
  for (const auto& p : s) crossing += rack(p.a) != rack(p.b) ? 1 : 0;
  CHECK(j.suspect_pairs.size() + 0 <= crossing);
  CHECK(j.suspect_pairs.size() >= crossing - 4);  // a rack host whose every pair crossed is a suspect host
  CHECK(crossing >= 10);
}

TEST_CASE("a single slow pair among 1,024 hosts: how often the sparse plan tests it", "[doctor]") {
  // The plan tests a pair of the ring, or of one of the matchings: about
  // (2 + matchings) / (n - 1) of all pairs. Over 2,000 runs with a random
  // slow pair each, the share found is close to that.
  std::mt19937 rng(6);
  const int n = 1024, runs = 2000;
  int tested = 0;
  std::uniform_int_distribution<int> host(0, n - 1);
  for (int r = 0; r < runs; ++r) {
    int a = host(rng), b = host(rng);
    while (b == a) b = host(rng);
    const std::pair<int, int> p{std::min(a, b), std::max(a, b)};
    for (const auto& round : sparse_rounds(n, kDefaultMatchings, static_cast<uint64_t>(r)))
      tested += std::count(round.begin(), round.end(), p);
  }
  const double p = static_cast<double>(tested) / runs, expected = (2.0 + kDefaultMatchings) / (n - 1);
  INFO(p);
  CHECK(p > expected / 3);
  CHECK(p < expected * 3);
}

TEST_CASE("a single slow pair at 16, 64 and 1,024 hosts: found as often as sparse_miss_probability says", "[doctor]") {
  // A random slow pair each run, the plan drawn anew (a seed per run), the
  // first pass judged: the share of runs whose slow pair is a suspect pair
  // is 1 - sparse_miss_probability, within 4 standard deviations.
  CHECK(sparse_miss_probability(3, 2) == 0);
  CHECK(sparse_miss_probability(16, 2) == Approx(0.7550).epsilon(1e-3));
  CHECK(sparse_miss_probability(64, 2) == Approx(0.9378).epsilon(1e-3));
  CHECK(sparse_miss_probability(1024, 2) == Approx(0.99609).epsilon(1e-4));
  std::mt19937 rng(42);
  for (auto [n, runs] : {std::pair{16, 20000}, std::pair{17, 20000}, std::pair{64, 20000}, std::pair{1024, 6000}}) {
    INFO(n);
    std::uniform_int_distribution<int> host(0, n - 1);
    int found = 0, other = 0;
    for (int r = 0; r < runs; ++r) {
      int a = host(rng), b = host(rng);
      while (b == a) b = host(rng);
      const std::pair<int, int> slow{std::min(a, b), std::max(a, b)};
      const auto rounds = sparse_rounds(n, kDefaultMatchings, 1000003ull * static_cast<uint64_t>(n) + static_cast<uint64_t>(r));
      bool planned = false;
      for (const auto& round : rounds) planned = planned || std::count(round.begin(), round.end(), slow) > 0;
      if (!planned) continue;  // judging it cannot find what was not tested
      const auto s = measure(rounds, [&](int x, int y) { return std::pair{x, y} == slow; }, rng);
      const LinkJudgement j = judge_links(s, 3);
      CHECK(j.suspect_hosts.empty());
      for (size_t k : j.suspect_pairs) (std::pair{s[k].a, s[k].b} == slow ? found : other) += 1;
    }
    CHECK(other == 0);
    const double p = 1 - sparse_miss_probability(n, kDefaultMatchings);
    const double sd = std::sqrt(runs * p * (1 - p));
    INFO("found " << found << " of " << runs << ", expected " << runs * p << " +- " << sd);
    CHECK(std::abs(found - runs * p) <= 4 * sd + 1);
  }
}

TEST_CASE("the test bed's planted environment reaches one simulated host only", "[doctor]") {
  const std::vector<std::string> env{"HOME=/root", "PATH=/usr/bin:/bin"};
  CHECK(sim_environment(env, "node0513:PATH=/opt/x/bin:/usr/bin:/bin", "node0513") ==
        std::vector<std::string>{"HOME=/root", "PATH=/opt/x/bin:/usr/bin:/bin"});
  CHECK(sim_environment(env, "node0513:PATH=/opt/x/bin", "node0512") == env);
  CHECK(sim_environment(env, "a:X=1;b:Y=2=3", "b") == std::vector<std::string>{"HOME=/root", "PATH=/usr/bin:/bin", "Y=2=3"});
  CHECK(sim_environment(env, "garbage", "a") == env);
}

TEST_CASE("suspects are dealt into rounds of disjoint pairs", "[doctor]") {
  const std::vector<std::pair<int, int>> pairs{{0, 1}, {2, 3}, {1, 2}, {0, 3}, {4, 5}, {1, 4}};
  const auto rounds = disjoint_rounds(pairs);
  CHECK(rounds == std::vector<std::vector<size_t>>{{0, 1, 4}, {2, 3}, {5}});
  CHECK(disjoint_rounds({}).empty());
  // At most 2 a round (the pairs --link-parallel measures at once, less the references).
  CHECK(disjoint_rounds(pairs, 2) == std::vector<std::vector<size_t>>{{0, 1}, {2, 3}, {4}, {5}});
  CHECK(disjoint_rounds({{0, 1}, {2, 3}, {4, 5}}, 1) == std::vector<std::vector<size_t>>{{0}, {1}, {2}});
}

TEST_CASE("reference pairs: the typical ones, nearest first, never a suspect's or an avoided host's", "[doctor]") {
  const std::vector<PairSample> s{{0, 1, {50, 1.0e9}}, {2, 3, {50, 0.5e9}}, {4, 5, {50, 0.9e9}}, {1, 2, {50, 2e6}}, {6, 7, {50, 1.1e9}}};
  const std::vector<bool> suspect{false, false, false, true, false};
  CHECK(reference_pairs(s, suspect, {}, {50, 1.0e9}, 3) == std::vector<std::pair<int, int>>{{0, 1}, {4, 5}, {6, 7}});
  CHECK(reference_pairs(s, suspect, {4}, {50, 1.0e9}, 8) == std::vector<std::pair<int, int>>{{0, 1}, {6, 7}, {2, 3}});
  CHECK(reference_pair(s, suspect, {0}, {50, 1.0e9}) == std::make_pair(4, 5));
}

namespace {
// The link judgements' definitions written out plainly, over std::set: what
// retest_partners, reference_pair and slow_hosts must give (their own code
// answers each "is h one of these?" from a flag per host).
std::vector<int> partners_by_definition(int host, const std::vector<PairSample>& s, const std::vector<bool>& suspect,
                                        const std::vector<int>& avoid, int count) {
  std::set<int> all, tainted, measured, avoided(avoid.begin(), avoid.end());
  for (size_t i = 0; i < s.size(); ++i) {
    all.insert(s[i].a), all.insert(s[i].b);
    if (suspect[i]) tainted.insert(s[i].a), tainted.insert(s[i].b);
    if (s[i].a == host) measured.insert(s[i].b);
    if (s[i].b == host) measured.insert(s[i].a);
  }
  std::vector<int> out;
  auto take = [&](auto fits) {
    for (int h : all)
      if (static_cast<int>(out.size()) < count && h != host && !avoided.count(h) && fits(h) &&
          std::find(out.begin(), out.end(), h) == out.end())
        out.push_back(h);
  };
  take([&](int h) { return !tainted.count(h) && !measured.count(h); });
  take([&](int h) { return !tainted.count(h); });
  take([](int) { return true; });
  return out;
}

std::vector<int> slow_hosts_by_definition(const std::vector<PairSample>& s, const std::vector<bool>& slow) {
  std::set<int> hosts;
  for (const auto& p : s) hosts.insert(p.a), hosts.insert(p.b);
  std::vector<int> out;
  for (int h : hosts) {
    int pairs = 0, slow_pairs = 0;
    bool other_fast = false;
    for (size_t i = 0; i < s.size(); ++i) {
      const bool in = s[i].a == h || s[i].b == h;
      pairs += in, slow_pairs += in && slow[i];
      other_fast = other_fast || (!in && !slow[i]);
    }
    if (pairs >= 2 && slow_pairs == pairs && other_fast) out.push_back(h);
  }
  return out;
}
}  // namespace

TEST_CASE("the link judgements give what their definitions give, on a loaded machine's many suspects", "[doctor]") {
  std::mt19937 rng(11);
  for (int n : {5, 64, 300}) {
    for (int trial = 0; trial < 20; ++trial) {
      INFO(n << " hosts, trial " << trial);
      const auto rounds = link_rounds(n, auto_plan(n), kDefaultMatchings, static_cast<uint64_t>(trial));
      // A busy machine: a third of the pairs slow at random, a few hosts slow to all.
      std::set<int> slow_to_all{static_cast<int>(rng() % n), static_cast<int>(rng() % n)};
      const auto s = measure(rounds, [&](int a, int b) { return slow_to_all.count(a) || slow_to_all.count(b) || rng() % 3 == 0; }, rng);
      std::vector<bool> suspect(s.size());
      for (size_t i = 0; i < s.size(); ++i) suspect[i] = rng() % 4 == 0;
      const LinkJudgement j = judge_links(s, 3);
      CHECK(slow_hosts(s, suspect) == slow_hosts_by_definition(s, suspect));
      std::vector<int> avoid;
      for (int h = 0; h < n; ++h)
        if (rng() % 5 == 0) avoid.push_back(h);
      for (int host : {0, n / 2, n - 1}) {
        CHECK(retest_partners(host, s, suspect, avoid, 2) == partners_by_definition(host, s, suspect, avoid, 2));
        CHECK(retest_partners(host, s, suspect, j.suspect_hosts, 3) ==
              partners_by_definition(host, s, suspect, j.suspect_hosts, 3));
      }
      // The reference: of the pairs not suspect and with no avoided host, the one nearest typical's bandwidth.
      const std::set<int> avoided(avoid.begin(), avoid.end());
      std::optional<std::pair<int, int>> want;
      double nearest = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (suspect[i] || avoided.count(s[i].a) || avoided.count(s[i].b)) continue;
        const double d = std::abs(s[i].s.Bps - j.typical.Bps);
        if (!want || d < nearest) want = std::make_pair(s[i].a, s[i].b), nearest = d;
      }
      CHECK(reference_pair(s, suspect, avoid, j.typical) == want);
      const auto refs = reference_pairs(s, suspect, avoid, j.typical, 8);
      if (want) {
        REQUIRE(!refs.empty());
        CHECK(refs[0] == *want);
      }
      for (const auto& [a, b] : refs) CHECK((!avoided.count(a) && !avoided.count(b)));
    }
  }
}
