#pragma once
// The doctor's judgements, pure (no I/O), so each is unit-tested alone:
// which hosts are one machine twice, which value of a variable is the odd
// one, which pairs to test together, which links are outliers, which hosts to
// drop so that the rest can all reach each other.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "machine/clock.h"

namespace dl::doctor {

// Hosts that are the same machine under two names: `key(i)` gives each host's
// identity (its resolved addresses, or "local" for this machine); two hosts
// sharing any key are one. Returns, for each host, the index of the first
// host it duplicates, or -1.
std::vector<int> find_duplicates(size_t n, const std::function<std::vector<std::string>(size_t)>& keys);

// The value most hosts have (ties: the one seen first). Unset counts as a value.
std::optional<std::string> majority(const std::vector<std::optional<std::string>>& values);

// How `got` differs from `want`, for messages. Colon lists (PATH,
// LD_LIBRARY_PATH) by entry: "lacks /opt/x/bin; has /other"; other values
// whole: "is 'a', most hosts have 'b'"; "is unset" / "is set (most hosts leave it unset)".
std::string describe_difference(const std::optional<std::string>& got, const std::optional<std::string>& want);

// Whether a host whose `var` differs from most hosts' fails (and leaves the
// later stages) or only gets a warning: the launcher's own host may have a
// PATH of its own (a login shell's nearly always differs from the one
// non-interactive ssh gives the others), a warning; any other difference fails.
bool env_difference_fails(const std::string& var, bool launchers_host);

// Clock offset of a peer (ns) from one exchange (machine/clock.h).
using machine::clock_offset_ns;

// Rounds of a round-robin tournament (circle method): every pair of 0..n-1
// exactly once, each round a set of disjoint pairs; n-1 rounds for even n,
// n for odd. Pairs are (a, b) with a < b.
std::vector<std::vector<std::pair<int, int>>> tournament_rounds(int n);

// Which pairs the link stage (and, for its probes, the network stage)
// tests. kFull: every pair, tournament_rounds(n). kSparse: a ring (each host
// with the next in hostfile order, the last with the first) in 2 rounds (3
// for odd n), then `matchings` random perfect matchings drawn from `seed`, a
// round each (odd n: a different host sits each one out), a pair already
// planned left out of a later round: about n + matchings * n/2 pairs in
// matchings + 3 rounds at most, whatever n. Every host is in at least 2
// pairs for n >= 3.
enum class LinkPlan { kFull, kSparse };
inline constexpr int kDefaultMatchings = 2;
std::vector<std::vector<std::pair<int, int>>> sparse_rounds(int n, int matchings, uint64_t seed);
std::vector<std::vector<std::pair<int, int>>> link_rounds(int n, LinkPlan plan, int matchings, uint64_t seed);
// The probability that the sparse plan of n hosts (a ring and `matchings`
// random matchings) leaves out one pair drawn at random of the n(n-1)/2:
// the ring holds n of them (2/(n-1)), each matching holds a given pair
// with probability 1/(n-1) (n even; 1/n for odd n, where one host sits
// out), the matchings drawn apart from the ring and each other:
// (1 - 2/(n-1)) (1 - 1/(n-1))^matchings. docs/doctor.md, "What the sparse
// plan finds and misses". 0 for n <= 3 (the ring is every pair).
double sparse_miss_probability(int n, int matchings);
// --links auto: every pair up to this many hosts (28 pairs in 7 rounds), the sparse plan above.
inline constexpr int kFullPlanHosts = 8;
LinkPlan auto_plan(int n);

// The hosts to drop, greedily, until no `bad` pair has both ends kept: each
// time the host in the most remaining bad pairs (ties: the later host, so the
// launcher's own host, listed first, stays). Returns a flag per host.
std::vector<bool> hosts_to_drop(int n, const std::vector<std::pair<int, int>>& bad);

// Median of the values (0 for none).
double median(std::vector<double> v);

// Links. A pair is slower than a reference when its bandwidth is below the
// reference's divided by `factor` and at least `bandwidth_slack_Bps` below it,
// or its latency is above the reference's times `factor` and at least
// `latency_slack_us` above it: the slack keeps noise on tiny numbers (a few
// microseconds, a few MB/s on a crawling machine) from being a finding.
struct LinkSample {
  double latency_us = 0, Bps = 0;
};
struct LinkSlack {
  double latency_us = 200;
  double Bps = 10e6;
};
bool slower_than(const LinkSample& s, const LinkSample& reference, double factor, const LinkSlack& slack = {});
// In which ways `s` is slower than `reference`, as slower_than judges each.
struct Slower {
  bool bandwidth = false, latency = false;
};
Slower slower_in(const LinkSample& s, const LinkSample& reference, double factor, const LinkSlack& slack = {});

// One measured pair: hosts `a` and `b` (indices into the host list).
struct PairSample {
  int a = 0, b = 0;
  LinkSample s;
};

// What a typical host's links do at their best: each host's best pair (its
// highest bandwidth and, apart, its lowest latency), and of those the
// medians. A slow host is in many pairs but is the best pair of no fast
// host, so with 3 hosts or more the reference is the fast hosts' (the median
// pair is not: with 3 hosts the slow one is in 2 of the 3 pairs).
LinkSample typical_best(const std::vector<PairSample>& s);

// The suspects of the first pass: the index of each pair slower than
// typical_best(s).
std::vector<size_t> link_outliers(const std::vector<PairSample>& s, double factor, const LinkSlack& slack = {});

// The hosts slow to every host: each host all of whose measured pairs (two
// or more) are `slow`, while some pair it is not in is not slow (when every
// pair is slow, no host is to blame). Ascending. REQUIRES: slow.size() == s.size().
std::vector<int> slow_hosts(const std::vector<PairSample>& s, const std::vector<bool>& slow);

// A suspect measured again, alone, and right after it a reference pair (a
// typical one), also alone: a machine busy at that moment slows both, a slow
// link only the suspect.
struct Retest {
  LinkSample pair, reference;
};
// A suspect is a finding only when every retest finds it slower than its
// reference in the same way: its bandwidth every time, or its latency
// every time (one retest that does not clears it). A slow link is slow the
// same way each time it is tested; a pair that lost the CPU once during its
// pings and once during its stream (a loaded machine) is no finding. No
// retest: not a finding.
bool confirmed_slow(const std::vector<Retest>& retests, double factor, const LinkSlack& slack = {});

// The first pass of the links judged at once: the reference (typical_best),
// the hosts suspected slow to every host (each of their pairs, two or more,
// slower than it, while some pair without them is not: slow_hosts) and the
// other pairs slower than it. Fewer than 3 pairs: nothing is judged. Each
// suspect is then tested again (retest_partners, confirmed_slow).
struct LinkJudgement {
  LinkSample typical;
  std::vector<int> suspect_hosts;     // ascending
  std::vector<size_t> suspect_pairs;  // indices into the samples, none of a suspect host
};
LinkJudgement judge_links(const std::vector<PairSample>& s, double factor, const LinkSlack& slack = {});

// The suspects of `j` as a flag per sample of `s`: its suspect pairs and
// every pair of a suspect host.
std::vector<bool> suspects_of(const LinkJudgement& j, const std::vector<PairSample>& s);

// The indices of the samples `host` is in.
std::vector<size_t> pairs_of(int host, const std::vector<PairSample>& s);

// The links summary line: "2048 pairs in 4 rounds (a ring and 2 random
// matchings), 3 retests; a typical host's best pair does 1.2 GB/s, round
// trip 35 us"; `matchings` < 0: every pair ("(every pair)").
std::string links_summary(size_t pairs, size_t rounds, int matchings, int retests, const LinkSample& typical);

// Up to `count` hosts to test the suspect `host` with again: first hosts in
// no suspect pair (`suspect[i]` for sample i) that it was not measured with,
// then hosts in no suspect pair, then any host that is not itself in
// `avoid` (the other suspect hosts); by host index. Hosts are those of the
// samples.
std::vector<int> retest_partners(int host, const std::vector<PairSample>& s, const std::vector<bool>& suspect,
                                 const std::vector<int>& avoid, int count);

// The pair that stands for a typical link in retests: of the pairs not
// `suspect` and without a host of `avoid`, the one whose bandwidth is
// nearest typical's; nullopt when there is none.
std::optional<std::pair<int, int>> reference_pair(const std::vector<PairSample>& s, const std::vector<bool>& suspect,
                                                  const std::vector<int>& avoid, const LinkSample& typical);

// Up to `count` such pairs, nearest typical's bandwidth first.
std::vector<std::pair<int, int>> reference_pairs(const std::vector<PairSample>& s, const std::vector<bool>& suspect,
                                                 const std::vector<int>& avoid, const LinkSample& typical, size_t count);

// `pairs` dealt into rounds of disjoint pairs (no host in two pairs of a
// round), greedily in their order, at most `most` pairs a round (0: any
// number); each round's pairs by index into `pairs`.
std::vector<std::vector<size_t>> disjoint_rounds(const std::vector<std::pair<int, int>>& pairs, size_t most = 0);

// The *_SOCKET_IFNAME value that works: the working interface names of every
// host, distinct, comma-separated in host order ("eth0", "ens1,eth0").
std::string ifname_value(const std::vector<std::string>& working_ifname_per_host);

// The bytes of stage 6's all_reduce over `hosts` ranks: 4 MiB up to 8
// hosts, beyond that 4 MiB x (8/hosts)^2, a multiple of 4 and at least 1
// KiB: `dlaunch bench` checks every element of every rank against values
// computed from every rank's seed, work that grows as ranks^2 x elements (4
// MiB at 1,024 ranks would be 10^12 additions; 64 ranks took 20 s on 2 cores).
size_t all_reduce_bytes(int hosts);
// "4 MB", "64 kB", "1 kB": a size of all_reduce_bytes (binary units).
std::string size_text(size_t bytes);

// The time bounds of stage 6's jobs (docs/doctor.md, stage 6). A job starts
// an agent and then a rank on every host, through the launch tree and start
// method the doctor's peers were started with (stage 2), so its bounds grow
// with what starting those peers took on these hosts, `peers_start_s`: each
// start is given twice that. The agents get --agent-timeout max(30 s, twice
// it); the job --timeout 120 s plus what that adds to the agents' 30 s, once
// for the agents and once for the ranks; the doctor kills a job 30 s past
// its --timeout. A start up to 15 s (hosts of their own) leaves dlaunch's
// 30 s and 120 s as they are; on the test bed, whose simulated hosts all
// share this machine's cores, a thousand hosts take most of a minute.
struct JobBounds {
  long agent_timeout_s = 30;
  long timeout_s = 120;
  long kill_after_s = 150;
  double peers_start_s = 0;
};
JobBounds job_bounds(double peers_start_s);
// "120 s", or "220 s (120 s, and 50 s more each for starting the agents and
// the ranks: this run's peers took 40 s to start, each start is given twice
// that)": the bound a job ran past, and why it is what it is.
std::string job_bound_text(const JobBounds& b);
// Whether a stage-6 job over `hosts` is past what this machine can run: on
// the test bed (`sim`), whose simulated hosts all run on this machine, more
// than kMachineHostsPerCore of them a core. 256 simulated hosts on 2 cores
// passed stage 6 in every run here; 1,024 failed it in every run (each
// agent's event loop stalls for seconds at a load of 200 and more, and the
// job loses agents to its heartbeat bound or to --agent-timeout).
inline constexpr int kMachineHostsPerCore = 128;
bool machine_limit(bool sim, int hosts, unsigned cores);

// The hosts stage 6's job runs on: all of `hosts`, but on a test bed past
// machine_limit an even spread that it can run (every k-th, the first
// included: hosts of every subtree of the launch tree), so the stage
// still sends a job through the launcher, the tree, the store and the
// collectives, where one over all of them could only time out.
// `step` is k (1: all of them), for the messages that say so.
struct AllReduceSpread {
  std::vector<int> hosts;
  size_t step = 1;
};
AllReduceSpread all_reduce_hosts(const std::vector<int>& hosts, bool sim, unsigned cores);

// "1.5 GB/s", "850 MB/s", "12.0 ms", "35 us": short forms for the table.
std::string human_rate(double Bps);
std::string human_us(double us);
std::string human_bytes(double bytes);

}  // namespace dl::doctor
