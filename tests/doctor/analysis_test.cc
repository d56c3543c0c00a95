// The doctor's pure judgements (doctor/analysis.h), and how a route's answers merge (doctor/peer_fan.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "doctor/analysis.h"
#include "doctor/peer_fan.h"

using namespace dl::doctor;

TEST_CASE("tournament rounds cover every pair once, each round disjoint", "[doctor]") {
  for (int n : {2, 3, 4, 5, 8, 9, 16}) {
    auto rounds = tournament_rounds(n);
    CHECK(rounds.size() == static_cast<size_t>(n % 2 ? n : n - 1));
    std::set<std::pair<int, int>> seen;
    for (const auto& r : rounds) {
      std::set<int> busy;
      for (auto [a, b] : r) {
        CHECK(a < b);
        CHECK(busy.insert(a).second);
        CHECK(busy.insert(b).second);
        CHECK(seen.insert({a, b}).second);
      }
    }
    CHECK(seen.size() == static_cast<size_t>(n * (n - 1) / 2));
  }
  CHECK(tournament_rounds(1).empty());
}

TEST_CASE("duplicates: two names that share an address are one host", "[doctor]") {
  std::vector<std::vector<std::string>> keys{{"10.0.0.1:22"}, {"10.0.0.2:22"}, {"10.0.0.3:22", "10.0.0.1:22"}, {"local:22"}, {"local:22"}};
  auto dup = find_duplicates(keys.size(), [&](size_t i) { return keys[i]; });
  CHECK(dup == std::vector<int>{-1, -1, 0, -1, 3});
}

TEST_CASE("majority and how a value differs from it", "[doctor]") {
  using O = std::optional<std::string>;
  CHECK(majority({O("a"), O("b"), O("a")}) == O("a"));
  CHECK(majority({O("a"), O("b")}) == O("a"));
  CHECK(majority({std::nullopt, std::nullopt, O("x")}) == std::nullopt);
  CHECK(describe_difference(O("/usr/bin:/bin:/opt/x"), O("/usr/local/bin:/usr/bin:/bin")) ==
        "lacks /usr/local/bin; has /opt/x that most hosts lack");
  CHECK(describe_difference(O("1"), O("2")) == "is '1', most hosts have '2'");
  CHECK(describe_difference(std::nullopt, O("2")) == "is unset (most hosts have '2')");
  CHECK(describe_difference(O("/b:/a"), O("/a:/b")) == "has the same entries in another order ('/b:/a')");
}

TEST_CASE("env: the launcher's own PATH is a warning, every other difference fails", "[doctor]") {
  CHECK_FALSE(env_difference_fails("PATH", true));
  CHECK(env_difference_fails("PATH", false));
  CHECK(env_difference_fails("LD_LIBRARY_PATH", true));
  CHECK(env_difference_fails("NCCL_DEBUG", true));
}

TEST_CASE("clock offset takes the midpoint of the exchange", "[doctor]") {
  CHECK(clock_offset_ns(1000, 3000, 2000) == 0);
  CHECK(clock_offset_ns(1000, 3000, 5000) == 3000);
  CHECK(clock_offset_ns(1000, 3000, -1000) == -3000);
}

TEST_CASE("hosts_to_drop keeps the launcher's host and drops the worst", "[doctor]") {
  CHECK(hosts_to_drop(4, {}) == std::vector<bool>{false, false, false, false});
  CHECK(hosts_to_drop(4, {{1, 3}}) == std::vector<bool>{false, false, false, true});
  // Host 2 is in three bad pairs: dropping it alone heals the rest.
  CHECK(hosts_to_drop(4, {{0, 2}, {1, 2}, {2, 3}}) == std::vector<bool>{false, false, true, false});
  CHECK(hosts_to_drop(4, {{0, 1}, {2, 3}}) == std::vector<bool>{false, true, false, true});
}

namespace {
// Pairs of hosts with their (latency, bandwidth), in the given order.
std::vector<PairSample> pairs(const std::vector<std::pair<int, int>>& hosts, const std::vector<LinkSample>& s) {
  std::vector<PairSample> out;
  for (size_t i = 0; i < hosts.size(); ++i) out.push_back({hosts[i].first, hosts[i].second, s[i]});
  return out;
}
const std::vector<std::pair<int, int>> kFour{{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
const std::vector<std::pair<int, int>> kThree{{0, 1}, {0, 2}, {1, 2}};
const std::vector<std::pair<int, int>> kFourTwoRounds{{0, 1}, {2, 3}, {0, 2}, {1, 3}};
}  // namespace

TEST_CASE("link outliers: a pair slower than a typical host's best pair by the factor", "[doctor]") {
  std::vector<LinkSample> s{{50, 1e9}, {55, 1.1e9}, {52, 0.9e9}, {51, 2e6}, {53, 1e9}, {49, 1.2e9}};
  CHECK(link_outliers(pairs(kFour, s), 3) == std::vector<size_t>{3});
  s[3].Bps = 0.5e9;  // half the others: within a factor of 3
  CHECK(link_outliers(pairs(kFour, s), 3).empty());
  s[1].latency_us = 5000;  // latency 100x the others'
  CHECK(link_outliers(pairs(kFour, s), 3) == std::vector<size_t>{1});
  s[1].latency_us = 160;  // 3x, but within the absolute slack: noise, not a finding
  CHECK(link_outliers(pairs(kFour, s), 3).empty());
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 2, 3}) == 2.5);
}

TEST_CASE("the IFNAME value lists each working interface name once", "[doctor]") {
  CHECK(ifname_value({"eth0", "eth0", "eth0"}) == "eth0");
  CHECK(ifname_value({"ens1", "eth0", "ens1"}) == "ens1,eth0");
  CHECK(human_rate(2.5e9) == "2.5GB/s");
  CHECK(human_rate(2.5e6) == "2MB/s");
  CHECK(human_us(1500) == "1.5ms");
}

TEST_CASE("link verdicts on noisy measurements: only a pair slow every time is a finding", "[doctor]") {
  const double f = 3;
  // A pair slowed by a busy CPU in the first pass (4x below the others),
  // normal when tested again alone: cleared.
  CHECK(link_outliers(pairs(kFourTwoRounds, {{60, 600e6}, {58, 610e6}, {70, 150e6}, {61, 590e6}}), f) ==
        std::vector<size_t>{2});
  CHECK_FALSE(confirmed_slow({{{65, 560e6}, {60, 600e6}}}, f));
  // The machine got busy during the retest: the suspect and its reference are
  // slow together, so the ratio clears it.
  CHECK_FALSE(confirmed_slow({{{300, 140e6}, {280, 160e6}}}, f));
  // A rate-limited link (20 Mbit/s): slow against the reference every time.
  CHECK(confirmed_slow({{{80, 2.5e6}, {60, 600e6}}, {{90, 2.4e6}, {200, 300e6}}}, f));
  // ...but one retest that clears it is enough (a burst of load in the other).
  CHECK_FALSE(confirmed_slow({{{80, 2.5e6}, {60, 600e6}}, {{70, 580e6}, {60, 600e6}}}, f));
  // Latency spikes from scheduling: 900 us once, then normal.
  CHECK(slower_than({900, 600e6}, {100, 600e6}, f));
  CHECK_FALSE(confirmed_slow({{{900, 600e6}, {100, 600e6}}, {{120, 600e6}, {110, 600e6}}}, f));
  // A link with 5 ms of added delay stays slow.
  CHECK(confirmed_slow({{{5100, 500e6}, {100, 600e6}}, {{5080, 550e6}, {130, 600e6}}}, f));
  // The absolute floors: a crawling machine (every stream a few MB/s) and
  // microsecond latencies are no finding, whatever the ratio.
  CHECK_FALSE(slower_than({50, 1e6}, {50, 8e6}, f));
  CHECK_FALSE(slower_than({40, 600e6}, {10, 600e6}, f));
  CHECK(link_outliers(pairs(kFourTwoRounds, {{50, 1e6}, {50, 8e6}, {50, 9e6}, {50, 7e6}}), f).empty());
  // No retest (none could be made): not a finding on one measurement.
  CHECK_FALSE(confirmed_slow({}, f));
  // A loaded machine: the pings lost the CPU in one retest, the stream in
  // the next, the pings again in the third. Slow each time, but never the
  // same way: no finding (at 1,024 simulated hosts such pairs were named).
  const std::vector<Retest> mixed{{{682, 28.8e6}, {112, 22.5e6}}, {{38, 11.5e6}, {49, 81.3e6}}, {{754, 16.8e6}, {130, 56.1e6}}};
  for (const auto& t : mixed) CHECK(slower_than(t.pair, t.reference, 5));
  CHECK_FALSE(confirmed_slow(mixed, 5));
  CHECK(slower_in({38, 11.5e6}, {49, 81.3e6}, 5).bandwidth);
  CHECK_FALSE(slower_in({38, 11.5e6}, {49, 81.3e6}, 5).latency);
  // Both ways every time (a slow, delayed link): a finding.
  CHECK(confirmed_slow({{{5100, 2.5e6}, {100, 600e6}}, {{900, 2.4e6}, {100, 600e6}}}, f));
}

TEST_CASE("one slow host among 3 is found and named, though it is in 2 of the 3 pairs", "[doctor]") {
  // Host 2 at 20 Mbit/s: the median pair is one of its own, so it hid.
  const auto s = pairs(kThree, {{60, 1e9}, {70, 2.5e6}, {65, 2.4e6}});
  CHECK(median({1e9, 2.5e6, 2.4e6}) == 2.5e6);
  CHECK(typical_best(s).Bps == 1e9);
  CHECK(link_outliers(s, 3) == std::vector<size_t>{1, 2});
  CHECK(slow_hosts(s, {false, true, true}) == std::vector<int>{2});
  // The same by latency: 5 ms to host 2, from each host.
  const auto l = pairs(kThree, {{60, 1e9}, {5100, 1e9}, {5080, 1e9}});
  CHECK(link_outliers(l, 3) == std::vector<size_t>{1, 2});
}

TEST_CASE("one slow host among 4 is found and named once", "[doctor]") {
  const auto s = pairs(kFour, {{50, 1e9}, {55, 1.1e9}, {52, 2e6}, {51, 0.9e9}, {53, 2.2e6}, {49, 2.1e6}});
  CHECK(link_outliers(s, 3) == std::vector<size_t>{2, 4, 5});
  CHECK(slow_hosts(s, {false, false, true, false, true, true}) == std::vector<int>{3});
}

TEST_CASE("one slow pair only: the pair is flagged, no host is blamed", "[doctor]") {
  const auto four = pairs(kFour, {{50, 1e9}, {55, 1.1e9}, {52, 0.9e9}, {51, 1e9}, {53, 1e9}, {49, 2e6}});
  CHECK(link_outliers(four, 3) == std::vector<size_t>{5});
  CHECK(slow_hosts(four, {false, false, false, false, false, true}).empty());
  const auto three = pairs(kThree, {{60, 2e6}, {70, 1e9}, {65, 1.1e9}});
  CHECK(link_outliers(three, 3) == std::vector<size_t>{0});
  CHECK(slow_hosts(three, {true, false, false}).empty());
}

TEST_CASE("equal links: nothing is flagged - every pair slow: no host is to blame", "[doctor]") {
  CHECK(link_outliers(pairs(kThree, {{60, 1e9}, {60, 1e9}, {60, 1e9}}), 3).empty());
  CHECK(link_outliers(pairs(kFour, {{60, 1e9}, {61, 1.1e9}, {59, 0.9e9}, {60, 1e9}, {62, 1e9}, {58, 1e9}}), 3).empty());
  CHECK(slow_hosts(pairs(kThree, {{60, 1e9}, {60, 1e9}, {60, 1e9}}), {false, false, false}).empty());
  CHECK(slow_hosts(pairs(kThree, {{60, 2e6}, {60, 2e6}, {60, 2e6}}), {true, true, true}).empty());
  // Two hosts, one pair: which end is slow cannot be told.
  CHECK(slow_hosts(pairs({{0, 1}}, {{60, 2e6}}), {true}).empty());
}

TEST_CASE("stage 6's job bounds: dlaunch's own up to a 15 s start of the peers, beyond it twice the start for each of agents and ranks", "[doctor]") {
  // Hosts of their own: the peers start in seconds, and the job gets
  // dlaunch's 30 s for its agents and 120 s in all.
  for (double s : {0.0, 0.4, 3.0, 15.0}) {
    const JobBounds b = job_bounds(s);
    INFO(s);
    CHECK(b.agent_timeout_s == 30);
    CHECK(b.timeout_s == 120);
    CHECK(b.kill_after_s == 150);
    CHECK(job_bound_text(b) == "120 s");
  }
  // The test bed at a thousand hosts: every simulated host's peer started
  // on this machine's cores, 40 s; the agents get twice that, and the job
  // 120 s plus what that adds, once for the agents and once for the ranks.
  const JobBounds b = job_bounds(40);
  CHECK(b.agent_timeout_s == 80);
  CHECK(b.timeout_s == 220);
  CHECK(b.kill_after_s == 250);
  CHECK(job_bound_text(b) == "220 s (120 s, and 50 s more each for starting the agents and the ranks: "
                             "this run's peers took 40 s to start, each start is given twice that)");
  // Rounded up to whole seconds, never below a start's twice.
  CHECK(job_bounds(15.2).agent_timeout_s == 31);
  CHECK(job_bounds(15.2).timeout_s == 122);
  CHECK(job_bounds(-1).timeout_s == 120);
}

TEST_CASE("stage 6 runs on every host, or on a test bed past its limit on an even spread it can run", "[doctor]") {
  std::vector<int> hosts;
  for (int i = 0; i < 1024; ++i) hosts.push_back(i);
  CHECK(all_reduce_hosts(hosts, false, 2).hosts == hosts);  // hosts of their own: all of them
  CHECK(all_reduce_hosts(hosts, false, 2).step == 1);
  const auto sample = all_reduce_hosts(hosts, true, 2);
  REQUIRE(sample.hosts.size() == 256);
  CHECK(sample.step == 4);
  for (size_t i = 0; i < sample.hosts.size(); ++i) CHECK(sample.hosts[i] == static_cast<int>(4 * i));  // one in 4, the first included
  CHECK(all_reduce_hosts(hosts, true, 8).hosts == hosts);  // 128 a core on 8 cores: all 1,024
  std::vector<int> some(hosts.begin(), hosts.begin() + 300);
  const auto half = all_reduce_hosts(some, true, 2);
  CHECK(half.hosts.size() == 150);
  CHECK(half.step == 2);
  CHECK_FALSE(machine_limit(true, static_cast<int>(half.hosts.size()), 2));  // what is run fits
  std::vector<int> few(hosts.begin(), hosts.begin() + 256);
  CHECK(all_reduce_hosts(few, true, 2).hosts == few);
  CHECK(all_reduce_hosts(few, true, 2).step == 1);
}

TEST_CASE("a stage-6 job is past this machine only on a test bed of more than 128 simulated hosts a core", "[doctor]") {
  CHECK_FALSE(machine_limit(false, 1024, 2));  // hosts of their own: a host's problem, however many
  CHECK_FALSE(machine_limit(true, 40, 2));     // a test bed this machine runs easily: its failure is a finding
  CHECK_FALSE(machine_limit(true, 256, 2));
  CHECK(machine_limit(true, 257, 2));
  CHECK(machine_limit(true, 1023, 2));
  CHECK_FALSE(machine_limit(true, 1023, 8));
  CHECK(machine_limit(true, 200, 0));  // no core count known: one
}

// A route's answers (doctor/peer_fan.h): the same reply text from many
// nodes goes up the launch tree once, with all their nodes.
TEST_CASE("merge_answers: answers of the same line and error are one, in the order first seen, their nodes in order",
          "[doctor]") {
  const std::string long_line(200, 'x');  // past the short-string buffer: moved, not copied
  std::vector<RouteAnswer> in = {
      {{1}, "a", ""}, {{2}, long_line, ""}, {{3}, "a", ""}, {{4}, "", "gone"},
      {{5}, "a", "gone"}, {{6, 7}, long_line, ""}, {{8}, "", "gone"}, {{9}, "b", ""},
  };
  const auto out = merge_answers(in);
  REQUIRE(out.size() == 5);
  CHECK(out[0].line == "a");
  CHECK(out[0].error.empty());
  CHECK(out[0].nodes == std::vector<int>{1, 3});
  CHECK(out[1].line == long_line);
  CHECK(out[1].nodes == std::vector<int>{2, 6, 7});
  CHECK(out[2].line.empty());
  CHECK(out[2].error == "gone");
  CHECK(out[2].nodes == std::vector<int>{4, 8});
  CHECK(out[3].line == "a");
  CHECK(out[3].error == "gone");
  CHECK(out[3].nodes == std::vector<int>{5});
  CHECK(out[4].line == "b");
  CHECK(out[4].nodes == std::vector<int>{9});
  CHECK(merge_answers({}).empty());
}

// A route's pacing (doctor/peer_fan.h): at most at_once of its requests
// run at once beneath, each child given its share, or the children called
// in turn when there are more of them than that.
TEST_CASE("pace_shares: a route's at_once shared among its children, or the children taken in turn", "[doctor]") {
  SECTION("nothing to pace: every request at once, each child waited for one timeout") {
    for (long at_once : {0L, 6L, 100L}) {
      const auto p = pace_shares({1, 3, 2}, at_once, 1000);
      CHECK(p.slots == 3);
      CHECK(p.order == std::vector<size_t>{0, 1, 2});
      CHECK(p.at_once == std::vector<long>{0, 0, 0});
      CHECK(p.wait_ms == std::vector<long>{1000, 1000, 1000});
    }
  }
  SECTION("fewer children than at_once: shares as their requests say, summing to at_once") {
    // 32 requests among 4 children, 8 at once: 16 -> 4, 8 -> 2, 4 -> 1, 4 -> 1.
    const auto p = pace_shares({16, 8, 4, 4}, 8, 1000);
    CHECK(p.slots == 4);
    CHECK(p.at_once == std::vector<long>{4, 2, 1, 1});
    CHECK(p.wait_ms == std::vector<long>{4000, 4000, 4000, 4000});  // 4 turns each
    // Rounding's leftover goes to who has the most requests a turn: 7 at once for 3 + 3 + 1.
    const auto q = pace_shares({3, 3, 1}, 5, 100);
    long sum = 0;
    for (long a : q.at_once) sum += a == 0 ? 1 : a;
    CHECK(q.at_once[2] == 0);  // its one request: all of it at once
    CHECK(q.at_once[0] + q.at_once[1] == 4);
    CHECK(sum == 5);
    CHECK(q.wait_ms[0] <= 300);
    CHECK(q.wait_ms[2] == 100);
  }
  SECTION("never more at once than at_once, however uneven the children") {
    for (const auto& counts : std::vector<std::vector<size_t>>{{100, 1, 1, 1}, {7, 1, 1, 1, 1}, {5, 5, 1}, {1, 1, 1, 30}}) {
      size_t total = 0;
      for (size_t c : counts) total += c;
      for (long at_once = 1; at_once <= 6; ++at_once) {
        const auto p = pace_shares(counts, at_once, 10);
        INFO("at_once " << at_once << ", counts[0] " << counts[0]);
        // Child i runs at most `each[i]` at a time (at_once 0: all of its
        // requests), and `slots` children at once: the busiest ones at worst.
        std::vector<size_t> each;
        for (size_t i = 0; i < counts.size(); ++i) {
          each.push_back(p.at_once[i] == 0 ? counts[i] : static_cast<size_t>(p.at_once[i]));
          CHECK(each[i] >= 1);
          CHECK(p.wait_ms[i] == 10 * static_cast<long>((counts[i] + each[i] - 1) / each[i]));  // a timeout a turn
        }
        std::vector<size_t> worst = each;
        std::sort(worst.rbegin(), worst.rend());
        size_t most = 0;
        for (size_t k = 0; k < std::min(p.slots, worst.size()); ++k) most += worst[k];
        CHECK(most <= std::min<size_t>(total, static_cast<size_t>(at_once)));
      }
    }
  }
  SECTION("more children than at_once: one request at a time each, at_once of them at once, the biggest first") {
    const auto p = pace_shares({1, 4, 2, 1, 3}, 2, 500);
    CHECK(p.slots == 2);
    CHECK(p.order == std::vector<size_t>{1, 4, 2, 0, 3});
    CHECK(p.at_once == std::vector<long>{0, 1, 1, 0, 1});
    CHECK(p.wait_ms == std::vector<long>{500, 2000, 1000, 500, 1500});
  }
  SECTION("one at a time") {
    const auto p = pace_shares({2, 2}, 1, 10);
    CHECK(p.slots == 1);
    CHECK(p.at_once == std::vector<long>{1, 1});
    CHECK(p.wait_ms == std::vector<long>{20, 20});
  }
}

TEST_CASE("answer_unanswered: a node a child's reply left out gets an error answer, the rest are kept as they came",
          "[doctor]") {
  RouteRequest asked;
  asked.calls = {{1, "x"}, {2, "y"}};
  asked.nodes = {3, 4};
  auto why = [](int n) { return "node " + std::to_string(n) + " unanswered"; };
  std::vector<RouteAnswer> whole = {{{1, 3}, "a", ""}, {{2}, "", "gone"}, {{4}, "b", ""}};
  const auto before = whole.size();
  answer_unanswered(asked, whole, why);
  CHECK(whole.size() == before);
  std::vector<RouteAnswer> part = {{{3}, "a", ""}, {{1}, "b", ""}};
  answer_unanswered(asked, part, why);
  REQUIRE(part.size() == 4);
  CHECK(part[0].nodes == std::vector<int>{3});
  CHECK(part[1].nodes == std::vector<int>{1});
  CHECK(part[2].nodes == std::vector<int>{2});
  CHECK(part[2].error == "node 2 unanswered");
  CHECK(part[3].nodes == std::vector<int>{4});
  CHECK(part[3].error == "node 4 unanswered");
  std::vector<RouteAnswer> none;
  answer_unanswered(asked, none, why);
  CHECK(none.size() == 4);
}
