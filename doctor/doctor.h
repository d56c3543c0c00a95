#pragma once
// `dlaunch doctor`: checks the hosts of a hostfile stage by stage and names
// every problem with its fix (docs/doctor.md). Stages, each on the hosts that
// passed the ones before:
//   1 hostfile  parses; no host twice under two names; slots add up to -n
//   2 ssh       every host reachable, authenticated, host key known: a peer
//               started on each, through the launch tree (--fanout, --launcher)
//   3 env       dlaunch and dlaunch-agent there and the same version, --program,
//               PATH / LD_LIBRARY_PATH / -x variables, clock, GPUs
//   4 network   every host reaches the others (every other, or those of the
//               sparse plan), on which interface
//   5 links     latency and bandwidth of every pair or of the sparse plan's
//               (a ring and random matchings), in parallel rounds
//   6 all_reduce a real dlaunch job over the healthy hosts: correct, and its busbw;
//                then NCCL over every GPU of the GPU hosts (one rank per GPU)
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "doctor/analysis.h"
#include "doctor/child.h"
#include "doctor/net_probe.h"
#include "doctor/options.h"
#include "doctor/peer_fan.h"
#include "doctor/peer_link.h"
#include "doctor/report.h"
#include "hostfiles/hostfile.h"

namespace dl::doctor {

// The subcommand: parses args, runs the stages, prints the table (or JSON)
// on stdout. Returns 0 healthy, 1 a problem found; throws UsageError /
// ParseError (exit 2) for a bad command line or hostfile.
int run_doctor_command(const std::vector<std::string>& args);

class Doctor {
 public:
  explicit Doctor(DoctorOptions o);
  ~Doctor();
  // Runs every stage (or 1-3 with --quick) and returns the report.
  const Report& run();
  const std::vector<hostfiles::HostEntry>& entries() const { return entries_; }

 private:
  void stage_hostfile();
  TreeNode tree_node(int h, int below) const;
  void stage_ssh();
  void stage_environment();
  void judge_host(int h, const HostFacts& facts, long long clock_offset_ns);
  void judge_dlaunch(int h, const HostFacts& facts);
  void judge_clock(int h, long long clock_offset_ns);
  void judge_host_gpus(int h, const HostFacts& facts);
  void check_env(const std::vector<HostFacts>& facts);
  void stage_network();
  // One problem line: the hosts `from` cannot reach b's data address `at`, for `why`.
  void report_unreachable(int b, const std::vector<int>& from, const std::string& at, const std::string& why);
  void stage_links();
  // One link test of (a, b), latency and bandwidth, with nothing else running.
  LinkResult measure_alone(int a, int b);
  // Link tests of `pairs` (disjoint), at most `at_once` at a time (0: all
  // of them): the latency pass (pings) or the bandwidth pass. Errors in
  // each pair's `error`.
  struct PairTest {
    int a = 0, b = 0;
    LinkResult r;
    std::string error;
    double seconds = 0;
  };
  void measure_pairs(std::vector<PairTest*>& pairs, bool bandwidth, long at_once);
  // The first pass's suspect hosts tested again with fresh partners;
  // returns those slow every time, with their problem lines said.
  std::vector<int> confirm_slow_hosts(const LinkJudgement& j, const std::vector<PairSample>& s, std::vector<bool>& suspect);
  // The pairs stages 4 and 5 test among `hosts` (indices into it).
  std::vector<std::vector<std::pair<int, int>>> plan_pairs(size_t hosts) const;
  int link_tests_ = 0;
  // Stage 5's steps (stage_links) share one LinkRun: the plan, its tests,
  // what they measured and the pairs found bad.
  struct LinkRun {
    std::vector<int> hosts;                                 // the hosts tested (alive())
    std::vector<std::vector<std::pair<int, int>>> rounds;   // plan_pairs, by index into hosts
    std::vector<PairTest> tests;                            // every planned pair, round by round
    std::vector<PairSample> samples;                        // the pairs measured without error
    std::vector<size_t> measured;                           // samples[k] is tests[measured[k]]
    std::vector<LinkNote> matrix;                           // the JSON's links, one per test
    std::vector<std::pair<int, int>> bad;                   // failed, slow, or of a slow host
  };
  // The plan's pairs among `hosts`, not yet measured.
  LinkRun plan_links(std::vector<int> hosts) const;
  // The first pass: every round's latency, then every round's bandwidth.
  void measure_plan(LinkRun& run);
  // The samples and the matrix of the first pass; a pair that failed is bad
  // and a problem line.
  void collect_samples(LinkRun& run);
  // The suspect pairs (`suspect`, by sample; none of `slow_hosts`) retested
  // beside reference pairs; returns those slow every time (indices into
  // the samples), bad now, with their retests in the matrix.
  std::vector<size_t> confirm_slow_pairs(LinkRun& run, const std::vector<bool>& suspect, const std::vector<int>& slow_hosts,
                                         const LinkSample& typical);
  // The stage's notes: plan, rounds, tests, the summary line, the matrix.
  void note_links(LinkRun& run, int retests, const LinkSample& typical);
  // Each host's links cell, and the hosts to drop for the bad pairs.
  void mark_links(const LinkRun& run);
  // Tests the suspect (a, b) again, alone, then `reference` (nullptr, or a
  // reference that fails: `typical` stands in), up to kLinkRetests times,
  // stopping at the first retest that clears it; folds the suspect's best
  // numbers into `best`.
  std::vector<Retest> retest(int a, int b, const std::pair<int, int>* reference, const LinkSample& typical,
                             LinkResult& best);
  // One problem line per host slow to every host (slow_hosts of the pairs
  // found `slow`); returns those hosts.
  void report_slow_host(int h, const std::vector<PairSample>& s, const std::vector<Retest>& tries, const LinkSample& typical);
  // The slow pairs' lines (`slow`: indices into run.samples): one each up
  // to 3, else one naming their hosts.
  void report_slow_pairs(const LinkRun& run, const std::vector<size_t>& slow, const LinkSample& typical);
  static constexpr int kLinkRetests = 2;
  // More suspects than this are tested again together, in rounds of
  // disjoint pairs with a reference pair in each, not one at a time.
  static constexpr size_t kAloneRetests = 4;
  static constexpr int kBatchRetests = 3;
  static constexpr size_t kBatchReferences = 3;
  // Retests of `suspects` (indices into tests), alone or in rounds as
  // kAloneRetests says; each pair's tries, and its best numbers folded into tests.
  std::vector<std::vector<Retest>> retest_all(const std::vector<size_t>& suspects, std::vector<PairTest>& tests,
                                              const std::vector<std::pair<int, int>>& references, const LinkSample& typical);
  void stage_all_reduce();
  void stage_nccl();
  // Runs a dlaunch job: `slots` (host, ranks there), launcher `options`,
  // then the `program` argv; within job_bounds(). `what` names it in errors.
  ChildResult run_job(const std::vector<std::pair<int, int>>& slots, const std::vector<std::string>& options,
                      const std::vector<std::string>& program, const std::string& what);
  // Stage 6's jobs' bounds, from what starting the peers took (stage 2).
  JobBounds job_bounds() const { return doctor::job_bounds(peers_start_s_); }
  double peers_start_s_ = 0;  // stage 2's start of every peer, in seconds
  // dlaunch-nccl-check beside the dlaunch that hosts run.
  std::string nccl_helper() const;

  std::vector<int> alive() const;
  // Marks `host` failed on `c` (dropping it from later stages) with a problem line.
  void fail(int host, Check c, const std::string& cell, const std::string& what, const std::string& fix = "");
  // The peer of `h` failed `c` with `error` (a Outcome's): `fail` it.
  void lost(int h, Check c, const std::string& error) { fail(h, c, "", error); }
  void progress(const std::string& text) const;
  const std::string& name(int h) const { return report_->hosts()[static_cast<size_t>(h)]; }

  DoctorOptions o_;
  std::vector<hostfiles::HostEntry> entries_;
  std::unique_ptr<Report> report_;
  std::unique_ptr<PeerFan> fan_;    // the peers, the launch tree's roots and this host's
  std::string method_;              // the start method, resolved
  bool sim_ = false;                // the test bed's simulated hosts
  int link_parallel_ = 0;           // 0: every pair of a round at once
  int ping_parallel_ = 0;           // the same for the first pass's latency tests
  uint64_t seed_ = 0;               // the sparse plan's random matchings
  std::vector<bool> dropped_;
  std::vector<std::vector<Endpoint>> endpoints_;
  std::vector<std::optional<Endpoint>> data_endpoint_;
  std::vector<int> usable_gpus_;  // per host, from stage 3 (GPUs one NCCL rank each can use)
  std::string token_, self_exe_, remote_exe_, ifname_;
  bool tty_ = false;
};

}  // namespace dl::doctor
