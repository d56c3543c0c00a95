#include "tests/chaos/chaos.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "launcher/launch_tree.h"
#include "tests/multihost/multihost_util.h"

namespace dl::chaos {
namespace {
using dl::cluster::Cluster;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using multihost::contains;

constexpr double kGrace = 1;         // --kill-grace of every job
constexpr double kStackTimeout = 5;  // --stack-timeout of every job (an agent starved on a loaded machine answers late)
constexpr double kStopRankTimeout = 8;  // --timeout of a job whose rank is stopped: only it ends that job
constexpr double kTorchStart = 20;      // 8 ranks' torch imports and gloo group: 12 s on this 2-core VM
constexpr int kDrawnFaults = 11;    // the faults drawn first: every one but partition_half, drawn last
constexpr int kSlots = 2;            // the cluster's hostfile: 2 slots per host
constexpr double kSshTimeout = 10;   // dlaunch's --ssh-timeout default: how long an unreachable host may take
constexpr int kFanout = 2;           // --fanout of a tree job
// A slow start's job: --agent-timeout and --ssh-timeout, so that the
// launcher gives up on the late agent after kSlowAgentTimeout +
// kSlowSshTimeout x the tree's depth (launcher/job.cc, arm_timers).
constexpr double kSlowAgentTimeout = 3, kSlowSshTimeout = 4;
// A returning host's job: --return-cooldown, and how long its new agent may
// take to start over ssh and pass the health gate on a loaded machine.
constexpr double kReturnCooldown = 1, kReturnStart = 15;

// A torch job's --timeout starts before its 12 s of imports.
double stop_rank_timeout(const Case& k) { return kStopRankTimeout + (k.job == JobKind::torch ? kTorchStart : 0); }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A /proc file's text, "" when the process is gone (libstdc++'s filebuf
// throws when read(2) fails with ESRCH).
std::string file_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  try {
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    return "";
  }
}

// "KEY=VALUE" of a process's environment, or "".
std::string env_of(int pid, const std::string& key) {
  std::string env = file_text("/proc/" + std::to_string(pid) + "/environ");
  std::istringstream in(env);
  for (std::string kv; std::getline(in, kv, '\0');)
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  return "";
}

int parent_of(int pid) {
  std::istringstream in(file_text("/proc/" + std::to_string(pid) + "/status"));
  for (std::string l; std::getline(in, l);)
    if (l.rfind("PPid:", 0) == 0) return std::atoi(l.c_str() + 5);
  return 0;
}

std::string comm_of(int pid) {
  std::string s = file_text("/proc/" + std::to_string(pid) + "/comm");
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// ---- the job -------------------------------------------------------------

int ranks_of(const Cluster& c) { return kSlots * c.size(); }

// The hosts that hold ranks at the start: a spare job's last host is its spare.
int seated_hosts(const Cluster& c, const Case& k) { return k.job == JobKind::spare ? c.size() - 1 : c.size(); }
int ranks_of(const Cluster& c, const Case& k) { return kSlots * seated_hosts(c, k); }
int spare_host(const Cluster& c) { return c.size() - 1; }

// The attempts a host-loss job may run: --max-restarts 2 (spare), or the
// budget --nnodes MIN:K gives without it, one per host it may lose
// (elastic); a returning host's elastic job spends one restart on the loss
// and one on the rank killed after the return: --max-restarts 2 at least.
int attempts_of(const Cluster& c, const Case& k) {
  if (k.job == JobKind::spare) return 3;
  const int budget = 1 + c.size() - k.min_hosts;
  return k.fault == Fault::host_return ? std::max(budget, 3) : budget;
}

// The launch tree of a tree job on `hosts` hosts: node i is host hi; h0
// runs the launcher and its local agent, outside the tree.
dl::launcher::LaunchTree tree_of(int hosts) {
  std::vector<int> remote;
  for (int h = 1; h < hosts; ++h) remote.push_back(h);
  return dl::launcher::LaunchTree(remote, static_cast<size_t>(hosts), kFanout);
}

// The hosts beneath `k.host` in a tree job's tree (none for other jobs).
std::vector<int> hosts_beneath(const Cluster& c, const Case& k) {
  return k.job == JobKind::tree ? tree_of(c.size()).beneath(k.host) : std::vector<int>{};
}

// The hosts a half partition cuts off: the upper half, hK/2 .. hK-1 (none for other faults).
std::vector<int> cut_hosts(const Cluster& c, const Case& k) {
  std::vector<int> out;
  if (k.fault == Fault::partition_half)
    for (int h = c.size() / 2; h < c.size(); ++h) out.push_back(h);
  return out;
}

// How long the launcher waits for agents in a slow start's job, and how
// long the slow agent sleeps before it starts: past that, with room.
double slow_wait(const Cluster& c, const Case& k) {
  return kSlowAgentTimeout + kSlowSshTimeout * (k.job == JobKind::tree ? tree_of(c.size()).depth() : 1);
}
double slow_delay(const Cluster& c, const Case& k) { return slow_wait(c, k) + 3; }

// Lines per rank: a per-node job runs past the detection of a silent node,
// so that no other node has finished (and exited 0, as torchrun's agents do) by then.
int lines_of(const Case& k, const Options& o) {
  return k.job == JobKind::rdzv ? std::max(o.lines, static_cast<int>((o.heartbeat_s + 5) * 20)) : o.lines;
}

// A returning host's job: lines per rank of its attempt 2, the one that runs
// after the loss, which must outlast the host's return (its cooldown, a new
// agent, the health gate) for the second fault to find it running. The
// second fault cuts it short: only a late return costs its length.
int return_lines(const Options& o) {
  return std::max(o.lines, static_cast<int>((2 * kReturnCooldown + kReturnStart) * 20));
}

// The attempt that runs longer than o.lines, cut short by its fault: its
// DLAUNCH_RESTART_COUNT and its lines, or none. Host-return's after the
// loss (return_lines); host-sshd's first, 10 s, to outlast `cluster.sh
// stop-sshd` (seconds on a loaded machine) and the fault's time after it,
// so that the kill finds the host's agent still running.
struct LongAttempt {
  int restart_count, lines;
};
std::optional<LongAttempt> long_attempt(const Case& k, const Options& o) {
  if (k.fault == Fault::host_return) return LongAttempt{1, return_lines(o)};
  if (k.fault == Fault::host_sshd) return LongAttempt{0, std::max(o.lines, 200)};
  return std::nullopt;
}

// Each rank prints "chaos RANK I a=ATTEMPT MARK" for I = 0..lines-1, one
// every 50 ms (long_attempt's lines in that attempt).
std::string job_command(const Cluster& c, const Case& k, const Options& o, const std::string& mark,
                        const std::string& report_dir, const std::string& slow_prefix) {
  std::ostringstream cmd;
  cmd << "-n " << ranks_of(c, k) << " --report-dir " << report_dir << " --kill-grace " << kGrace << " --heartbeat-timeout " << o.heartbeat_s
      << " --stack-timeout " << kStackTimeout << " --timeout " << (k.fault == Fault::stop_rank ? stop_rank_timeout(k) : 90)
      << (k.openssh ? " --launcher ssh" : "") << (k.job == JobKind::tree ? " --fanout " + std::to_string(kFanout) : "");
  if (k.fault == Fault::slow_start)
    cmd << " --agent-timeout " << kSlowAgentTimeout << " --ssh-timeout " << kSlowSshTimeout << " --prefix " << slow_prefix;
  if (k.job == JobKind::openmpi || k.job == JobKind::mpich) {
    if (k.job == JobKind::openmpi) cmd << " -x OMPI_ALLOW_RUN_AS_ROOT=1 -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
    cmd << " " << multihost::bin(k.job == JobKind::openmpi ? "chaos_mpi" : "chaos_mpich") << " " << o.lines << " " << mark;
    return cmd.str();
  }
  if (k.job == JobKind::torch) {
    cmd << " /usr/bin/python3 " << DLAUNCH_SOURCE_DIR << "/tests/chaos/chaos_torch.py " << o.lines << " " << mark << " "
        << report_dir;
    return cmd.str();
  }
  if (k.job == JobKind::restart) cmd << " --max-restarts 1";
  if (k.job == JobKind::spare) cmd << " --spares 1 --max-restarts " << attempts_of(c, k) - 1;
  if (k.job == JobKind::elastic) cmd << " --nnodes " << k.min_hosts << ":" << c.size();
  if (k.fault == Fault::host_return)
    cmd << " --return-cooldown " << kReturnCooldown
        << (k.job == JobKind::elastic ? " --max-restarts " + std::to_string(attempts_of(c, k) - 1) : "");
  // A host-loss job's lines say the world they ran in: a shrunk world's must be its own.
  const std::string world = host_loss_kind(k.job) ? " w=$WORLD_SIZE" : "";
  const auto longer = long_attempt(k, o);
  cmd << " sh -c '"
      << (longer ? "n=$0; if [ \"${DLAUNCH_RESTART_COUNT:-0}\" = " + std::to_string(longer->restart_count) + " ]; then n=$2; fi; "
                 : "")
      << "i=0; while [ $i -lt " << (longer ? "$n" : "$0") << " ]; do echo \"chaos $RANK $i a=${DLAUNCH_RESTART_COUNT:-0}"
      << world << " $1\"; i=$((i+1)); sleep 0.05; done' " << lines_of(k, o) << " " << mark;
  if (longer) cmd << " " << longer->lines;
  return cmd.str();
}

// Per-node mode: node `node`'s dlaunch, run inside its host; node 0 hosts the store.
std::string node_command(const Cluster& c, const Case& k, const Options& o, const std::string& mark,
                         const std::string& token_file, int node) {
  std::ostringstream cmd;
  cmd << multihost::bin("dlaunch") << " --nnodes " << c.size() << " --node-rank " << node << " --rdzv tcp://"
      << c.address(0) << ":29400 --token-file " << token_file << " --nproc-per-node " << kSlots
      << " --rdzv-timeout 30 --timeout 90 --kill-grace " << kGrace << " --heartbeat-timeout " << o.heartbeat_s
      << " sh -c 'i=0; while [ $i -lt $0 ]; do echo \"chaos $RANK $i a=0 $1\"; i=$((i+1)); sleep 0.05; done' "
      << lines_of(k, o) << " " << mark << " </dev/null";
  return cmd.str();
}

// Where a host-loss job's dlaunch writes its output while it runs.
std::string live_log(const std::string& report_dir) { return report_dir + "/dlaunch.out"; }

// The job token every node reads (--token-file: never on a command line), made once per cluster.
std::string token_file(const Cluster& c) {
  const std::string path = c.dir() + "/chaos-token";
  if (!std::filesystem::exists(path)) {
    auto r = dl::cluster::run_argv({multihost::bin("dlaunch"), "token"});
    std::ofstream f(path);
    std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    f << r.output.substr(0, r.output.find('\n')) << "\n";
  }
  return path;
}

// Starts the job: one dlaunch in h0, or one per host (rdzv). The result's
// status is that of node `k.host`'s dlaunch for rdzv; `nodes` gets each node's.
std::future<dl::cluster::RunResult> start_job(const Cluster& c, const Case& k, const Options& o, const std::string& mark,
                                              const std::string& report_dir, const std::string& slow_prefix,
                                              std::chrono::milliseconds limit,
                                              std::shared_ptr<std::vector<dl::cluster::RunResult>> nodes) {
  if (host_loss_kind(k.job)) {  // its output in a file as it comes (live_log): a fault may wait for a line
    const std::string log = live_log(report_dir);
    const std::string cmd = multihost::dlaunch_cmd(c, job_command(c, k, o, mark, report_dir, slow_prefix)) +
                            " </dev/null >" + log + " 2>&1; rc=$?; cat " + log + "; exit $rc";
    return std::async(std::launch::async, [&c, cmd, limit] { return c.run_in("h0", cmd, limit); });
  }
  if (k.job != JobKind::rdzv)
    return multihost::start_dlaunch(c, job_command(c, k, o, mark, report_dir, slow_prefix), limit);
  const std::string token = token_file(c);
  return std::async(std::launch::async, [&c, &o, k, mark, token, limit, nodes] {
    const auto start = Clock::now();
    std::vector<std::future<std::pair<dl::cluster::RunResult, double>>> each;
    for (int n = 0; n < c.size(); ++n)
      each.push_back(std::async(std::launch::async, [&, n] {
        auto r = c.run_in(c.host(n), node_command(c, k, o, mark, token, n), limit);
        return std::make_pair(r, seconds_since(start));
      }));
    dl::cluster::RunResult all;
    for (int n = 0; n < c.size(); ++n) {
      auto [r, ended] = each[static_cast<size_t>(n)].get();
      nodes->push_back(r);
      char when[64];
      std::snprintf(when, sizeof when, " (ended %.1f s after the start)\n", ended);
      all.output += "== node " + std::to_string(n) + " exit " + std::to_string(r.status) + when + r.output;
    }
    all.status = (*nodes)[static_cast<size_t>(k.host)].status;
    return all;
  });
}

// ---- what the job must end with -------------------------------------------

struct Expected {
  int status = 0;
  std::vector<std::string> lines;  // each must appear in the output
  double bound_s = 0;              // from the fault to dlaunch's exit
  int complete_attempt = -1;       // the attempt whose every line must be there (-1: none)
  bool no_output = false;          // no rank may have run
  // One of these must appear (a half partition: which cut host is seen first is a race).
  std::vector<std::string> one_of;
  // rdzv: what every other node's dlaunch must end with.
  int others_status = 0;
  std::vector<std::string> others_lines, others_one_of;
  // Host-loss kinds: the job's last attempt (the highest a= printed) must be
  // one of these and hold every line of ranks 0..world-1, each saying
  // w=world, and no other rank's; and the addresses that must each be named
  // lost on some line of dlaunch's.
  std::vector<int> last_attempts;
  int world = 0;
  std::vector<std::string> named_lost;
  std::vector<std::string> absent;  // lines that must not be there
  std::vector<std::string> patterns;  // regexes each of which must match a whole line of dlaunch's
  std::map<int, int> worlds;  // an attempt (a=) whose lines must all say this w= (and be there)
};

bool retried(const Case& k) {
  if (k.job != JobKind::restart) return false;
  switch (k.fault) {
    case Fault::kill_rank:
    case Fault::kill_agent:
    case Fault::kill_ssh:
    case Fault::stop_agent:
    case Fault::link_down:
    case Fault::partition:
    case Fault::partition_half:
      return true;
    default:
      return false;
  }
}

// Seconds a job's lines take once its ranks run, with room for a loaded machine.
double run_time(const Case& k, const Options& o) {
  return lines_of(k, o) * 0.05 * 2 + (k.job == JobKind::torch ? kTorchStart : 4);
}

// Per-node mode (docs/dlaunch.md, "Failing together"): the node hit and
// every other node, which names it ("node 2 (h2): ..."). Lines name hosts by
// host name there.
Expected expected_per_node(const Cluster& c, const Case& k, const Options& o, Expected e) {
  const std::string h = c.host(k.host), node = "node " + std::to_string(k.host) + " (" + h;
  const std::string rank = "rank " + std::to_string(k.rank) + " on " + h;
  const std::string lost = "lost the agent on " + h;
  const double silent = o.heartbeat_s + 2 + kGrace + 2;
  switch (k.fault) {
    case Fault::kill_rank:
      e.lines = {rank}, e.others_status = 128 + SIGKILL, e.others_lines = {node + "): " + rank};
      break;
    case Fault::kill_agent:
    case Fault::stop_agent:
      e.lines = {lost}, e.others_status = 1, e.others_lines = {node + "): " + lost};
      break;
    case Fault::kill_launcher:  // node 0 hosts the store: the others lose it
      e.status = 128 + SIGKILL, e.lines = {}, e.others_status = 1, e.bound_s = silent;
      e.others_lines = {k.host == 0 ? "lost the rendezvous store at " + c.address(0) : node + ", pid "};
      break;
    case Fault::link_down:
    case Fault::partition:
      e.lines = {"lost the rendezvous store at " + c.address(0)}, e.others_status = 1;
      e.others_lines = {node + ", pid ", "sent no heartbeat for"};
      break;
    case Fault::partition_half:  // every node cut off loses the store; the others name one of them
      e.lines = {"lost the rendezvous store at " + c.address(0)}, e.others_status = 1;
      e.others_lines = {"sent no heartbeat for"}, e.one_of.clear();
      for (int h : cut_hosts(c, k)) e.others_one_of.push_back("node " + std::to_string(h) + " (" + c.host(h) + ", pid ");
      break;
    case Fault::slow_net:
      break;
    default:
      e.lines = {"no expectation for this fault in per-node mode"};
  }
  return e;
}

// A tree job: a silent agent started by another is named by that one
// ("lost the agent on ADDR (the agent on P that started it lost it: no
// heartbeat ..."); an agent lost with hosts beneath it is named with them.
void expected_in_tree(const Cluster& c, const Case& k, Expected& e) {
  if (k.fault == Fault::stop_agent && tree_of(c.size()).parent(k.host) >= 0)
    e.lines = {"lost the agent on " + c.address(k.host) + " (the agent on ", "that started it lost it: no heartbeat"};
  const auto beneath = hosts_beneath(c, k);
  if (beneath.empty() || (k.fault != Fault::kill_agent && k.fault != Fault::kill_ssh && k.fault != Fault::stop_agent))
    return;
  std::string hosts;
  for (int b : beneath) hosts += (hosts.empty() ? "" : ", ") + c.address(b);
  e.lines.push_back("the " + std::to_string(beneath.size()) + " host" + (beneath.size() == 1 ? "" : "s") +
                    " beneath it (" + hosts + ") were lost with it");
}

// The spare and elastic kinds: the job completes, as an uninterrupted run
// would (its last attempt every line, in the world that is left), while a
// spare or --nnodes MIN allows; else it ends with the loss's verdict,
// naming the host.
Expected expected_host_loss(const Cluster& c, const Case& k, const Options& o) {
  Expected e;
  const bool spare = k.job == JobKind::spare;
  const std::string a = c.address(k.host), b = k.host2 >= 0 ? c.address(k.host2) : "", sp = c.address(spare_host(c));
  const std::string of = " of " + std::to_string(attempts_of(c, k));
  const double teardown = kGrace + 2, attempt = run_time(k, o) + 3, slack = 5;
  const int seated = seated_hosts(c, k);
  // One host lost: the next attempt runs its seat on the spare, or the world without it.
  auto one_lost = [&](const std::string& lost_line) {
    e.lines = {"attempt 1" + of + " failed: " + lost_line, "attempt 2" + of + ": " + a + " lost (",
               "attempt 2" + of + " succeeded", "the job's hosts changed 1 time: before attempt 2" + of + ": " + a + " lost"};
    if (spare) {
      e.world = kSlots * seated;
      e.lines.push_back("moved to spare " + sp + "; no spare left; " + std::to_string(e.world) + " ranks running again");
    } else {
      e.world = kSlots * (seated - 1);
      e.lines.push_back("the job goes on with " + std::to_string(seated - 1) + " hosts and " + std::to_string(e.world) +
                        " ranks (--min-hosts " + std::to_string(k.min_hosts) + ")");
    }
    e.last_attempts = {1};
    e.named_lost = {a};
  };
  switch (k.fault) {
    case Fault::host_kill:
    case Fault::host_sshd:
      one_lost("lost the agent on " + a);
      e.bound_s = 1 + teardown + attempt + slack;
      break;
    case Fault::host_cable:
    case Fault::host_back:
      one_lost("lost the agent on " + a + " (no heartbeat");
      e.bound_s = o.heartbeat_s + 2 + teardown + attempt + slack;
      break;
    case Fault::spare_lost:
      e.lines = {"spare " + sp + " lost ("};
      if (b.empty()) {  // the job goes on without restarting, one spare fewer
        e.world = kSlots * seated, e.last_attempts = {0};
        e.absent = {"attempt 1" + of + " failed"};
        e.bound_s = attempt + teardown + slack;
        break;
      }
      // Then b's cable is cut: no spare for it, a new agent there cannot connect.
      e.status = 1;
      e.lines.push_back("attempt 1" + of + " failed: lost the agent on " + b + " (no heartbeat");
      e.lines.push_back("cannot restart: ");
      e.named_lost = {b};
      e.bound_s = 0.3 + o.heartbeat_s + 2 + teardown + kSshTimeout + 3 + slack;
      break;
    case Fault::second_loss:
      // Whichever loss the launcher heard of first is the attempt's verdict.
      e.one_of = {" failed: lost the agent on " + a, " failed: lost the agent on " + b};
      e.named_lost = {a, b};
      e.bound_s = k.at2_s + 2 * (1 + teardown + attempt) + kSshTimeout + slack;
      if (spare) {  // one seat to the spare, the other a new agent on its host (which is up)
        e.lines = {"moved to spare " + sp}, e.world = kSlots * seated, e.last_attempts = {1, 2};
        e.named_lost = {};  // a host given a new agent is named only when it was the verdict
      } else if (seated - 2 >= k.min_hosts) {
        e.lines = {"the job goes on with " + std::to_string(seated - 2) + " hosts and " +
                   std::to_string(kSlots * (seated - 2)) + " ranks (--min-hosts " + std::to_string(k.min_hosts) + ")"};
        e.world = kSlots * (seated - 2), e.last_attempts = {1, 2};
      } else {  // below --nnodes MIN, or no restart left for the second loss
        e.status = 1;
      }
      break;
    case Fault::host_return: {
      // a back as a spare after its cooldown (1 s, or doubled by a try that
      // found the cable still out), then b's fault makes the job use it.
      const std::string re_a = std::regex_replace(a, std::regex("\\."), "\\.");
      e.patterns = {"dlaunch: " + re_a + " is back \\(passed the health gate after a \\d+ s cooldown\\); it is a spare now "
                    "\\(1 spare\\)"};
      e.lines = {"attempt 1" + of + " failed: lost the agent on " + a + " (no heartbeat", "attempt 2" + of + ": " + a + " lost (",
                 "attempt 3" + of + " succeeded", "before attempt 2" + of + ": " + a + " lost (",
                 "during attempt 2" + of + ": " + a + " is back ("};
      if (spare) {  // b's seat moves to a
        for (std::string l : {"moved to spare " + sp + "; no spare left", "attempt 2" + of + " failed: lost the agent on " + b,
                              "attempt 3" + of + ": " + b + " lost (",
                              "moved to spare " + a + "; no spare left; " + std::to_string(kSlots * seated) + " ranks running again",
                              "before attempt 3" + of + ": " + b + " lost ("})
          e.lines.push_back(l);
        e.world = kSlots * seated, e.named_lost = {a, b};
        e.worlds = {{0, e.world}, {1, e.world}};
      } else {  // a rank of b's fails: the next attempt takes a in again, with the last ranks
        const std::string grown = "spare " + a + " joins with ranks " + std::to_string(kSlots * (seated - 1)) + "-" +
                                  std::to_string(kSlots * seated - 1) + ": the job grows to " + std::to_string(seated) +
                                  " hosts and " + std::to_string(kSlots * seated) + " ranks";
        for (std::string l : {"the job goes on with " + std::to_string(seated - 1) + " hosts and " +
                                  std::to_string(kSlots * (seated - 1)) + " ranks (--min-hosts " + std::to_string(k.min_hosts) + ")",
                              "attempt 2" + of + " failed: rank ", "attempt 3" + of + ": " + grown, "before attempt 3" + of + ": " + grown})
          e.lines.push_back(l);
        e.world = kSlots * seated, e.named_lost = {a};
        e.worlds = {{0, e.world}, {1, kSlots * (seated - 1)}};
        e.absent = {"the world does not grow"};
      }
      e.last_attempts = {2};
      e.bound_s = o.heartbeat_s + 2 + teardown + 2 * kReturnCooldown + kReturnStart + 1 + teardown + attempt + slack;
      break;
    }
    default:
      e.lines = {"no expectation for this fault in a host-loss job"};
  }
  if (spare && k.fault != Fault::spare_lost) e.absent.push_back("spare " + sp + " lost");
  return e;
}

Expected expected(const Cluster& c, const Case& k, const Options& o) {
  if (host_loss_kind(k.job)) return expected_host_loss(c, k, o);
  Expected e;
  const std::string addr = c.address(k.host);
  const std::string rank = "rank " + std::to_string(k.rank) + " on ";
  const std::string lost = "lost the agent on " + addr;
  const double teardown = kGrace + 2;
  switch (k.fault) {
    case Fault::kill_rank:
      e = {128 + SIGKILL, {rank, "was killed by signal 9"}, 1 + teardown};
      break;
    case Fault::kill_agent:
    case Fault::kill_ssh:
      e = {1, {lost}, 1 + teardown};
      break;
    case Fault::stop_agent:
    case Fault::link_down:
    case Fault::partition:
      e = {1, {lost + " (no heartbeat"}, o.heartbeat_s + 2 + teardown};
      break;
    case Fault::partition_half:  // a cut host named lost on a heartbeat: by the launcher, or (tree) its parent
      e = {1, {"lost the agent on ", "no heartbeat"}, o.heartbeat_s + 2 + teardown};
      for (int h : cut_hosts(c, k))
        for (const char* by : {" (no heartbeat", " (the agent on "}) e.one_of.push_back("lost the agent on " + c.address(h) + by);
      break;
    case Fault::kill_launcher:
      e = {128 + SIGKILL, {}, 1};
      break;
    case Fault::stop_rank:
      e = {124, {"the job ran past --timeout", rank + addr + ": stopped by a signal"},
           stop_rank_timeout(k) + kStackTimeout + teardown};
      break;
    case Fault::refuse_ssh:
      e = {1, {"error: " + addr, "refused"}, kSshTimeout + 2};  // a refusal is at once; a loaded host's start is not
      e.no_output = true;
      break;
    case Fault::slow_start:  // from the launch: the launcher's wait for agents, then its teardown
      e = {1, {addr, "did not connect within " + std::to_string(static_cast<int>(kSlowAgentTimeout)) + " s"},
           slow_wait(c, k) + teardown + 2};
      e.no_output = true;
      break;
    case Fault::slow_net:
      e = {0, {}, 2 * run_time(k, o) + 10};  // no detection to time: the job's own run, slowed (an MPI step is a few round trips)
      e.complete_attempt = 0;
      break;
    case Fault::host_kill:
    case Fault::host_cable:
    case Fault::host_sshd:
    case Fault::spare_lost:
    case Fault::second_loss:
    case Fault::host_back:
    case Fault::host_return:
      break;  // host-loss kinds only: expected_host_loss
  }
  if (k.job == JobKind::rdzv) return expected_per_node(c, k, o, e);
  if (k.job == JobKind::tree) expected_in_tree(c, k, e);
  if (retried(k)) {
    if (!e.lines.empty()) e.lines.front() = "attempt 1 of 2 failed: " + e.lines.front();
    e.lines.push_back("attempt 2 of 2 succeeded");
    e.status = 0;
    e.complete_attempt = 1;
    e.bound_s += run_time(k, o) + 3;  // the second attempt: a new agent (ssh) where one was lost, then every line
  }
  return e;
}

// ---- finding the processes a fault hits ------------------------------------

// The ranks in `host`: processes with `mark` in their argv whose parent is an
// agent (dlaunch's own argv and the shell that runs it hold the mark too).
std::vector<int> rank_pids(const Cluster& c, const std::string& host, const std::string& mark) {
  std::vector<int> out;
  for (int pid : multihost::pids_matching(c, host, mark))
    if (comm_of(parent_of(pid)) == "dlaunch-agent") out.push_back(pid);
  return out;
}

// The pid of `rank` (its environment's RANK), or 0.
int rank_pid(const Cluster& c, const Case& k, const std::string& mark) {
  for (int pid : rank_pids(c, c.host(k.host), mark))
    if (env_of(pid, "RANK") == std::to_string(k.rank)) return pid;
  return 0;
}

// The one process named `comm` in `host`, or 0 (by name: h0's ssh clients
// of --launcher ssh have "dlaunch-agent" in their argv).
int process_named(const Cluster& c, int host, const std::string& comm) {
  std::vector<int> v;
  for (int pid : c.pids_in(c.host(host)))
    if (comm_of(pid) == comm) v.push_back(pid);
  return v.size() == 1 ? v[0] : 0;
}

int agent_pid(const Cluster& c, int host) { return process_named(c, host, "dlaunch-agent"); }

// The process that carries `host`'s agent over ssh: the ssh client on h0
// (--launcher ssh) or the sshd session on the host (libssh), or 0.
int ssh_pid(const Cluster& c, const Case& k) {
  if (k.openssh) {  // on h0, or in a tree on the host of the agent that started it
    const int parent = k.job == JobKind::tree ? std::max(0, tree_of(c.size()).parent(k.host)) : 0;
    for (int pid : multihost::pids_matching(c, c.host(parent), c.address(k.host)))
      if (comm_of(pid) == "ssh") return pid;
    return 0;
  }
  for (int pid = agent_pid(c, k.host); pid > 1; pid = parent_of(pid))
    if (comm_of(pid) == "sshd") return pid;
  return 0;
}

// ---- the job's temp dirs ----------------------------------------------------

// Net namespace inodes of the cluster's hosts.
std::set<ino_t> namespace_inodes(const Cluster& c) {
  std::set<ino_t> out;
  for (auto& h : c.hosts()) {
    struct stat st {};
    if (::stat(("/run/netns/" + c.netns(h)).c_str(), &st) == 0) out.insert(st.st_ino);
  }
  return out;
}

// Pids of every dlaunch-agent running in the cluster, read from /proc.
std::set<int> agents_now(const std::set<ino_t>& inodes) {
  std::set<int> out;
  DIR* d = ::opendir("/proc");
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || comm_of(pid) != "dlaunch-agent") continue;
    struct stat st {};
    if (::stat(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), &st) == 0 && inodes.count(st.st_ino)) out.insert(pid);
  }
  if (d) ::closedir(d);
  return out;
}

// Watches the cluster for agents while a job runs (their pids name their
// temp dirs: /tmp/dlaunch-<pid>-..., /dev/shm/dlaunch-<pid>-...).
class AgentWatch {
 public:
  explicit AgentWatch(const Cluster& c) : inodes_(namespace_inodes(c)), thread_([this] { loop(); }) {}
  ~AgentWatch() { stop(); }
  std::set<int> stop() {
    if (thread_.joinable()) {
      done_ = true;
      thread_.join();
    }
    return seen_;
  }

 private:
  void loop() {
    while (!done_) {
      for (int p : agents_now(inodes_)) seen_.insert(p);
      std::this_thread::sleep_for(100ms);
    }
  }
  std::set<ino_t> inodes_;
  std::set<int> seen_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Entries of /tmp and /dev/shm named dlaunch-<pid>-... for a pid in `pids`.
std::vector<std::string> dirs_of(const std::set<int>& pids) {
  std::vector<std::string> out;
  for (const char* base : {"/tmp", "/dev/shm"}) {
    DIR* d = ::opendir(base);
    while (dirent* e = d ? ::readdir(d) : nullptr) {
      const std::string n = e->d_name;
      if (n.rfind("dlaunch-", 0) != 0) continue;
      const int pid = std::atoi(n.c_str() + 8);
      if (pids.count(pid)) out.push_back(std::string(base) + "/" + n);
    }
    if (d) ::closedir(d);
  }
  return out;
}

// The addresses of the hosts beneath the fault's in a tree job, or of those
// a half partition cut off, or the second host a host-loss fault hits.
std::vector<std::string> lost_with(const Cluster& c, const Case& k) {
  std::vector<std::string> out;
  if (k.host2 >= 0) out.push_back(c.address(k.host2));
  for (int b : hosts_beneath(c, k)) out.push_back(c.address(b));
  for (int b : cut_hosts(c, k)) out.push_back(c.address(b));
  return out;
}

// ---- checking the output ----------------------------------------------------

// "" when every rank's numbered lines of every attempt are 0..k with no hole,
// repeat or splice, and the complete attempt has all of them (a host-loss
// job: the last attempt, in its world); else what is wrong.
std::string check_lines(const std::string& out, const std::string& mark, int ranks, const Expected& e, int lines) {
  const std::regex line_re("^chaos (\\d+) (\\d+) a=(\\d+)(?: w=(\\d+))? " +
                           std::regex_replace(mark, std::regex("\\."), "\\.") + "\\r?$");
  std::map<std::pair<int, int>, std::vector<int>> seen;  // (attempt, rank) -> numbers in order
  std::map<int, std::set<int>> worlds;                   // attempt -> the w= its lines said
  std::istringstream in(out);
  int count = 0;
  for (std::string l; std::getline(in, l);) {
    if (!contains(l, mark) || l.rfind("dlaunch", 0) == 0) continue;
    std::smatch m;
    if (!std::regex_match(l, m, line_re)) return "a spliced line: '" + l + "'";
    seen[{std::stoi(m[3]), std::stoi(m[1])}].push_back(std::stoi(m[2]));
    if (m[4].matched) worlds[std::stoi(m[3])].insert(std::stoi(m[4]));
    ++count;
  }
  if (!e.last_attempts.empty()) {
    const int last = seen.empty() ? -1 : seen.rbegin()->first.first;
    if (std::count(e.last_attempts.begin(), e.last_attempts.end(), last) == 0)
      return "the last attempt with lines is a=" + std::to_string(last) + ", not one the faults allow";
    if (worlds[last] != std::set<int>{e.world})
      return "attempt " + std::to_string(last) + "'s lines do not all say w=" + std::to_string(e.world);
    for (auto [attempt, world] : e.worlds)
      if (worlds[attempt] != std::set<int>{world})
        return "attempt " + std::to_string(attempt) + "'s lines do not all say w=" + std::to_string(world) +
               (worlds[attempt].empty() ? " (it has none)" : "");
    for (auto& [key, nums] : seen)
      if (key.first == last && key.second >= e.world)
        return "attempt " + std::to_string(last) + " ran rank " + std::to_string(key.second) + " in a world of " +
               std::to_string(e.world);
    Expected at_last = e;
    at_last.complete_attempt = last, at_last.last_attempts.clear();
    return check_lines(out, mark, e.world, at_last, lines);
  }
  if (e.no_output && count > 0) return std::to_string(count) + " lines of ranks that should not have run";
  for (auto& [key, nums] : seen)
    for (size_t i = 0; i < nums.size(); ++i)
      if (nums[i] != static_cast<int>(i))
        return "attempt " + std::to_string(key.first) + " rank " + std::to_string(key.second) + ": line " +
               std::to_string(i) + " is number " + std::to_string(nums[i]) + " (lost or repeated lines)";
  if (e.complete_attempt >= 0)
    for (int r = 0; r < ranks; ++r)
      if (static_cast<int>(seen[{e.complete_attempt, r}].size()) != lines)
        return "attempt " + std::to_string(e.complete_attempt) + " rank " + std::to_string(r) + " printed " +
               std::to_string(seen[{e.complete_attempt, r}].size()) + " of " + std::to_string(lines) + " lines";
  return "";
}

// The exit code, the expected lines, and: a killed rank named with its host
// (`who`: its address, or its name in per-node mode) and pid, no host but
// the fault's and those in `lost_with` (beneath it in a launch tree) named as lost.
std::string check_verdict(const dl::cluster::RunResult& r, int status, const std::vector<std::string>& lines,
                          int killed_rank, const std::string& who, int rank,
                          const std::vector<std::string>& lost_with = {}) {
  if (r.status != status) return "exit " + std::to_string(r.status) + ", expected " + std::to_string(status);
  for (auto& l : lines)
    if (!contains(r.output, l)) return "no '" + l + "' in the output";
  if (killed_rank > 0) {
    const std::string named = "rank " + std::to_string(rank) + " on " + who + " (pid " + std::to_string(killed_rank) +
                              ") was killed by signal 9";
    if (!contains(r.output, named)) return "no '" + named + "' in the output";
  }
  // "lost the agent on A (..." or, for agents that never connected, "lost the agent on A, B (...".
  auto touched = [&](const std::string& l, size_t at) {
    const auto names = [&](const std::string& h) {
      return l.compare(at, h.size(), h) == 0 && at + h.size() < l.size() &&
             (l[at + h.size()] == ' ' || l[at + h.size()] == ',');
    };
    return names(who) || std::any_of(lost_with.begin(), lost_with.end(), names);
  };
  std::istringstream in(r.output);
  for (std::string l; std::getline(in, l);)
    if (auto at = l.find("lost the agent on "); at != std::string::npos && !touched(l, at + 18))
      return "a host the fault did not touch is named lost: '" + l + "'";
  return "";
}

// Whether one of dlaunch's lines in `out` names `addr` lost: "ADDR lost",
// "lost the agent on ADDR", or ADDR in a "hosts lost: ..." list (ADDR as a
// whole: not followed by a digit).
bool named_lost(const std::string& out, const std::string& addr) {
  auto whole = [&](const std::string& l, size_t at) {
    return at + addr.size() == l.size() || !std::isdigit(static_cast<unsigned char>(l[at + addr.size()]));
  };
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("dlaunch", 0) != 0) continue;
    const size_t list = l.find("hosts lost: ");
    for (size_t at = l.find(addr); at != std::string::npos; at = l.find(addr, at + 1)) {
      if (!whole(l, at)) continue;
      if (l.compare(at + addr.size(), 5, " lost") == 0 || (at >= 18 && l.compare(at - 18, 18, "lost the agent on ") == 0) ||
          (list != std::string::npos && at > list))
        return true;
    }
  }
  return false;
}

// A host-loss job, beyond its exit code and lines: each host that must be
// is named lost, and no other (a spare's "spare ADDR lost" aside, which
// `absent` rules out where it must not be); nothing of `absent`; a job that
// completes says which attempt succeeded, and it is the last with lines.
std::string check_host_loss(const Cluster& c, const Case& k, const std::string& out, const Expected& e) {
  for (auto& a : e.named_lost)
    if (!named_lost(out, a)) return "no line of dlaunch's names " + a + " lost";
  for (auto& l : e.absent)
    if (contains(out, l)) return "'" + l + "' in the output";
  for (auto& p : e.patterns) {
    const std::regex re(p);
    std::istringstream in(out);
    bool found = false;
    for (std::string l; !found && std::getline(in, l);) found = std::regex_match(l, re);
    if (!found) return "no line of dlaunch's matches '" + p + "'";
  }
  std::vector<std::string> may{c.address(k.host)};
  if (k.host2 >= 0) may.push_back(c.address(k.host2));
  if (k.fault == Fault::spare_lost) may.push_back(c.address(spare_host(c)));
  for (int h = 0; h < c.size(); ++h)
    if (std::count(may.begin(), may.end(), c.address(h)) == 0 && named_lost(out, c.address(h)))
      return "a host the faults did not touch, " + c.address(h) + ", is named lost";
  if (e.status != 0 || e.last_attempts.empty() || e.last_attempts == std::vector<int>{0}) return "";
  const std::regex succeeded("attempt (\\d+) of " + std::to_string(attempts_of(c, k)) + " succeeded");
  std::smatch m;
  if (!std::regex_search(out, m, succeeded)) return "no 'attempt N of " + std::to_string(attempts_of(c, k)) + " succeeded'";
  const int n = std::stoi(m[1]) - 1;
  if (std::count(e.last_attempts.begin(), e.last_attempts.end(), n) == 0)
    return "attempt " + std::to_string(n + 1) + " succeeded, not one the faults allow";
  return "";
}

// "" when `out` holds one of `lines` (or there are none).
std::string check_one_of(const std::string& out, const std::vector<std::string>& lines) {
  if (lines.empty() || std::any_of(lines.begin(), lines.end(), [&](auto& l) { return contains(out, l); })) return "";
  std::string all;
  for (auto& l : lines) all += (all.empty() ? "'" : ", '") + l + "'";
  return "none of " + all + " in the output";
}

// The same for every node of a per-node job: node `k.host` (and every node
// a half partition cut off) as the fault's, the others as told.
std::string check_nodes(const std::vector<dl::cluster::RunResult>& nodes, const Expected& e, const Case& k,
                        int killed_rank, const std::string& who, const std::vector<int>& cut) {
  for (size_t n = 0; n < nodes.size(); ++n) {
    const bool hit = static_cast<int>(n) == k.host || std::count(cut.begin(), cut.end(), static_cast<int>(n));
    std::string why = check_verdict(nodes[n], hit ? e.status : e.others_status, hit ? e.lines : e.others_lines,
                                    killed_rank, who, k.rank);
    if (why.empty()) why = check_one_of(nodes[n].output, hit ? e.one_of : e.others_one_of);
    if (!why.empty()) return "node " + std::to_string(n) + ": " + why;
  }
  return "";
}

// ---- injecting the fault ----------------------------------------------------

bool send(int pid, int sig) { return pid > 0 && ::kill(pid, sig) == 0; }

struct Injected {
  bool ok = true;
  std::string why;
  int stopped = 0;       // a pid to SIGCONT later
  int killed_agent = 0;  // the agent SIGKILLed
  int killed_rank = 0;   // the rank SIGKILLed
  int killed_agent2 = 0;  // second_loss, host_return (spare): the second host's agent
  bool back = false;      // host_back, host_return: the cable is plugged back
  bool second = false;    // host_return: the second fault came (the host was back)
  std::string said;       // host_return (elastic): the line that must name the rank killed
};

// SIGKILL to `host`'s agent and every rank on it, as a host that dies
// takes them all: the ranks are found first (through their parent, the
// agent), the agent is killed first (so that it reports no rank's death).
// Returns the agent's pid, 0 when there was none.
int kill_host(const Cluster& c, int host, const std::string& mark) {
  const auto ranks = rank_pids(c, c.host(host), mark);
  const int agent = agent_pid(c, host);
  if (!send(agent, SIGKILL)) return 0;
  for (int pid : ranks) ::kill(pid, SIGKILL);
  return agent;
}

Injected inject(const Cluster& c, const Case& k, const std::string& mark) {
  const std::string h = c.host(k.host);
  switch (k.fault) {
    case Fault::host_sshd:  // its sshd was stopped before the fault's time (run_case)
    case Fault::host_kill: {
      const int agent = kill_host(c, k.host, mark);
      return {agent > 0, "no agent on " + h, 0, agent};
    }
    case Fault::host_cable:
    case Fault::host_back:
    case Fault::host_return:
      return {c.script({"link", c.id(), h, "down"}).status == 0, "cluster.sh link down failed"};
    case Fault::spare_lost: {
      const int agent = agent_pid(c, k.host);
      if (!send(agent, SIGKILL)) return {false, "no spare agent on " + h};
      if (k.host2 < 0) return {true, "", 0, agent};
      std::this_thread::sleep_for(300ms);  // the launcher has heard of the spare first
      return {c.script({"link", c.id(), c.host(k.host2), "down"}).status == 0, "cluster.sh link down failed", 0, agent};
    }
    case Fault::second_loss: {
      Injected in{true, "", 0, kill_host(c, k.host, mark)};
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(k.at2_s * 1000)));
      in.killed_agent2 = kill_host(c, k.host2, mark);
      in.ok = in.killed_agent > 0 && in.killed_agent2 > 0;
      in.why = "no agent on " + std::string(in.killed_agent ? c.host(k.host2) : h);
      return in;
    }
    case Fault::kill_rank: {
      int pid = rank_pid(c, k, mark);
      return {send(pid, SIGKILL), "rank " + std::to_string(k.rank) + " not found on " + h, 0, 0, pid};
    }
    case Fault::stop_rank: {
      int pid = rank_pid(c, k, mark);
      return {send(pid, SIGSTOP), "rank " + std::to_string(k.rank) + " not found on " + h, pid};
    }
    case Fault::kill_agent: {
      int pid = agent_pid(c, k.host);
      return {send(pid, SIGKILL), "no agent on " + h, 0, pid};
    }
    case Fault::stop_agent: {
      int pid = agent_pid(c, k.host);
      return {send(pid, SIGSTOP), "no agent on " + h, pid};
    }
    case Fault::kill_launcher:
      return {send(k.job == JobKind::rdzv ? process_named(c, k.host, "dlaunch") : multihost::launcher_pid(mark), SIGKILL),
              "no dlaunch process"};
    case Fault::kill_ssh:
      return {send(ssh_pid(c, k), SIGKILL), "no ssh session for " + h};
    case Fault::link_down:
      return {c.script({"link", c.id(), h, "down"}).status == 0, "cluster.sh link down failed"};
    case Fault::partition: {
      const bool ok = c.script({"block", c.id(), "h0", h, "any"}).status == 0 &&
                      c.script({"block", c.id(), h, "h0", "any"}).status == 0;
      return {ok, "cluster.sh block failed"};
    }
    case Fault::partition_half: {
      std::vector<std::string> argv{"partition", c.id()};
      for (int cut : cut_hosts(c, k)) argv.push_back(c.host(cut));
      auto r = c.script(argv);
      return {r.status == 0, "cluster.sh partition failed: " + r.output};
    }
    case Fault::slow_net: {
      auto r = c.script({"slow", c.id(), h, "20ms"});
      if (r.status == 4) r = c.script({"slow", c.id(), h, "0", "1mbit"});  // no sch_netem: rate only
      return {r.status == 0, "cluster.sh slow failed: " + r.output};
    }
    case Fault::refuse_ssh:
    case Fault::slow_start:
      return {};  // done before the launch
  }
  return {};
}

// Undoes what the fault left in the cluster (a cable, a stopped process, netem).
void heal(const Cluster& c, const Case& k, const Injected& in) {
  const std::string h = c.host(k.host);
  if (k.fault == Fault::link_down) c.script({"link", c.id(), h, "up"});
  if (k.fault == Fault::partition) c.script({"unblock", c.id(), h}), c.script({"unblock", c.id(), "h0"});
  if (k.fault == Fault::partition_half)
    for (auto& each : c.hosts()) c.script({"unblock", c.id(), each});
  if (k.fault == Fault::slow_net) c.script({"unslow", c.id(), h});
  if (k.fault == Fault::refuse_ssh) c.script({"start-sshd", c.id(), h});
  if (k.fault == Fault::stop_agent && in.stopped) ::kill(in.stopped, SIGCONT);
  if (k.fault == Fault::host_cable || ((k.fault == Fault::host_back || k.fault == Fault::host_return) && !in.back))
    c.script({"link", c.id(), h, "up"});
  if (k.fault == Fault::spare_lost && k.host2 >= 0) c.script({"link", c.id(), c.host(k.host2), "up"});
  if (k.fault == Fault::host_sshd) c.script({"start-sshd", c.id(), h});
}

// host_back, host_return: once dlaunch has said the host is lost (its
// restart begins), its cable is plugged back, while the seat moves or the
// world shrinks.
void plug_back_when_lost(const Cluster& c, const Case& k, Injected& in, const std::string& log) {
  if ((k.fault != Fault::host_back && k.fault != Fault::host_return) || in.back || !in.ok) return;
  if (!contains(file_text(log), "failed: lost the agent on " + c.address(k.host) + " ")) return;
  in.back = c.script({"link", c.id(), c.host(k.host), "up"}).status == 0;
}

// host_return: once dlaunch has said the host is back as a spare, the
// second fault, which the job must meet with that spare: all of host2
// (spare: its seat moves to the host that came back), or one rank of the
// running attempt on host2 (elastic: the next attempt grows the world back).
void second_fault_when_back(const Cluster& c, const Case& k, Injected& in, const std::string& log, const std::string& mark) {
  if (k.fault != Fault::host_return || !in.back || in.second || !in.ok) return;
  if (!contains(file_text(log), "dlaunch: " + c.address(k.host) + " is back (")) return;
  in.second = true;
  const std::string h2 = c.host(k.host2);
  if (k.job == JobKind::spare) {
    in.killed_agent2 = kill_host(c, k.host2, mark);
    if (in.killed_agent2 == 0) in.ok = false, in.why = "no agent on " + h2 + " once " + c.host(k.host) + " was back";
    return;
  }
  for (int pid : rank_pids(c, h2, mark)) {
    const std::string rank = env_of(pid, "RANK");
    if (env_of(pid, "DLAUNCH_RESTART_COUNT") != "1" || !send(pid, SIGKILL)) continue;
    in.said = "rank " + rank + " on " + c.address(k.host2) + " (pid " + std::to_string(pid) + ") was killed by signal 9";
    return;
  }
  in.ok = false, in.why = "no rank of attempt 2 on " + h2 + " once " + c.host(k.host) + " was back";
}

// How long after the fault the cluster heals while the job still runs: a
// frozen host or cut cable comes back once the launcher should have given
// it up (so a restart can reach it); -1: only after the job.
// A tree's interior agent stopped stays stopped until its subtree is
// checked gone (a frozen host does not come back to end it): -2.
double heal_after(const Cluster& c, const Case& k, const Options& o) {
  if (k.fault == Fault::stop_agent && !hosts_beneath(c, k).empty()) return -2;
  if (k.fault == Fault::stop_agent || k.fault == Fault::link_down || k.fault == Fault::partition ||
      k.fault == Fault::partition_half)
    return o.heartbeat_s + 1;
  return -1;
}

// Waits for the job, healing the cluster at `heal_at` while it runs when
// `early`, else once it has ended unless `later` (the caller heals).
dl::cluster::RunResult wait_job(std::future<dl::cluster::RunResult>& f, const Cluster& c, const Case& k,
                               Injected& in, Clock::time_point heal_at, bool early, bool later, const std::string& log,
                               const std::string& mark) {
  bool healed = later;
  while (f.wait_for(20ms) != std::future_status::ready) {
    plug_back_when_lost(c, k, in, log);
    second_fault_when_back(c, k, in, log, mark);
    if (early && !healed && Clock::now() >= heal_at) {
      heal(c, k, in);
      healed = true;
    }
  }
  auto r = f.get();
  if (!healed) heal(c, k, in);
  return r;
}

// "hX pid P" for each agent (or slow start's agent wrapper) running on one of `hosts`.
std::string agents_on(const Cluster& c, const std::vector<int>& hosts) {
  std::string out;
  for (int h : hosts)
    for (int pid : c.pids_in(c.host(h)))
      if (comm_of(pid) == "dlaunch-agent") out += c.host(h) + " pid " + std::to_string(pid) + "\n";
  return out;
}

// Waits until no agent runs on `hosts`: "" or the ones left at `deadline` (SIGKILLed then).
std::string wait_agents_gone(const Cluster& c, const std::vector<int>& hosts, Clock::time_point deadline) {
  for (;; std::this_thread::sleep_for(100ms)) {
    std::string left = agents_on(c, hosts);
    if (left.empty()) return "";
    if (Clock::now() < deadline) continue;
    for (int h : hosts)
      for (int pid : c.pids_in(c.host(h)))
        if (comm_of(pid) == "dlaunch-agent") ::kill(pid, SIGKILL);
    return left;
  }
}

// A torch job's ranks each make `dir`/ready.RANK once their process group is
// up (chaos_torch.py): waits for all of them (60 s at most) or the job's end.
void wait_torch_ready(const Cluster& c, const std::string& dir, std::future<dl::cluster::RunResult>& f) {
  auto all_ready = [&] {
    for (int r = 0; r < ranks_of(c); ++r)
      if (!std::filesystem::exists(dir + "/ready." + std::to_string(r))) return false;
    return true;
  };
  for (const auto end = Clock::now() + 60s; Clock::now() < end && !all_ready();)
    if (f.wait_for(100ms) == std::future_status::ready) return;
}

// Waits until every host that holds ranks runs kSlots processes with `mark`, or the job ended.
bool wait_running(const Cluster& c, const Case& k, const std::string& mark, std::future<dl::cluster::RunResult>& f) {
  auto all_running = [&] {
    for (int h = 0; h < seated_hosts(c, k); ++h)
      if (static_cast<int>(rank_pids(c, c.host(h), mark).size()) < kSlots) return false;
    return true;
  };
  for (const auto end = Clock::now() + 30s; Clock::now() < end;) {
    if (all_running()) return true;
    if (f.wait_for(100ms) == std::future_status::ready) return false;
  }
  return false;
}

// Temp dirs: a live or cleanly ended agent's must be gone; a SIGKILLed
// agent's cannot be removed by it, and the next MPI job's agents remove them
// (agent/mpi_job.cc): checked once such a job has run.
template <class Fail>
void check_dirs(const Case& k, std::set<int> seen, std::set<int> killed, std::vector<std::string>& killed_dirs, Fail fail) {
  std::string list;
  if ((k.job == JobKind::openmpi || k.job == JobKind::mpich) && k.fault != Fault::refuse_ssh &&
      k.fault != Fault::slow_start) {  // a job that never launched has not cleaned them
    for (auto& d : killed_dirs)
      if (std::filesystem::exists(d)) list += d + " (of an agent SIGKILLed before this job)\n";
    killed_dirs.clear();
  }
  killed.erase(0);
  for (int pid : killed) seen.erase(pid);
  for (auto& d : dirs_of(seen)) list += d + "\n";
  if (!list.empty()) fail(Verdict::leftovers, "temp dirs left:\n" + list);
  for (auto& d : dirs_of(killed)) killed_dirs.push_back(d);
}

}  // namespace

const char* name(Verdict v) {
  switch (v) {
    case Verdict::correct: return "correct";
    case Verdict::wrong_verdict: return "wrong_verdict";
    case Verdict::hung: return "hung";
    case Verdict::leftovers: return "leftovers";
    case Verdict::lost_output: return "lost_output";
  }
  return "?";
}

const char* name(JobKind j) {
  switch (j) {
    case JobKind::shell: return "shell";
    case JobKind::restart: return "restart";
    case JobKind::openmpi: return "openmpi";
    case JobKind::mpich: return "mpich";
    case JobKind::rdzv: return "rdzv";
    case JobKind::torch: return "torch";
    case JobKind::tree: return "tree";
    case JobKind::spare: return "spare";
    case JobKind::elastic: return "elastic";
  }
  return "?";
}

const char* name(Fault f) {
  switch (f) {
    case Fault::kill_rank: return "kill-rank";
    case Fault::kill_agent: return "kill-agent";
    case Fault::kill_launcher: return "kill-launcher";
    case Fault::kill_ssh: return "kill-ssh";
    case Fault::stop_agent: return "stop-agent";
    case Fault::stop_rank: return "stop-rank";
    case Fault::link_down: return "link-down";
    case Fault::partition: return "partition";
    case Fault::refuse_ssh: return "refuse-ssh";
    case Fault::slow_net: return "slow-net";
    case Fault::slow_start: return "slow-start";
    case Fault::partition_half: return "partition-half";
    case Fault::host_kill: return "host-kill";
    case Fault::host_cable: return "host-cable";
    case Fault::host_sshd: return "host-sshd";
    case Fault::spare_lost: return "spare-lost";
    case Fault::second_loss: return "second-loss";
    case Fault::host_back: return "host-back";
    case Fault::host_return: return "host-return";
  }
  return "?";
}

// Makes a shell case a tree job's: its fault one that matters in a tree
// (a cable or a partition to h0 is another fault there: a host's link is
// to its parent), an agent's fault on an interior host one time in two, a
// rank killed on a leaf.
template <class Pick>
void into_tree(Case& k, int hosts, Pick& pick) {
  k.job = JobKind::tree;
  if (k.fault == Fault::link_down || k.fault == Fault::partition) {
    constexpr Fault in_tree[] = {Fault::kill_agent, Fault::stop_agent, Fault::kill_launcher, Fault::slow_start};
    k.fault = in_tree[pick(std::size(in_tree))];
  }
  const auto tree = tree_of(hosts);
  std::vector<int> interior, leaves;
  for (int h = 1; h < hosts; ++h) (tree.has_children(h) ? interior : leaves).push_back(h);
  auto any_of = [&](const std::vector<int>& v) { return v[static_cast<size_t>(pick(static_cast<int>(v.size())))]; };
  if (k.fault == Fault::kill_rank && !leaves.empty()) k.host = any_of(leaves);
  const bool agent_fault = k.fault == Fault::kill_agent || k.fault == Fault::stop_agent || k.fault == Fault::kill_ssh ||
                           k.fault == Fault::refuse_ssh || k.fault == Fault::slow_start;
  if (agent_fault && !interior.empty() && pick(2) == 0) k.host = any_of(interior);
  k.rank = k.host * kSlots + pick(kSlots);
}

bool host_loss_kind(JobKind j) { return j == JobKind::spare || j == JobKind::elastic; }

// Makes a case a spare or elastic job's with a host-loss fault. A fault of
// a host's network or sshd hits a remote host that holds ranks (h0 holds
// the launcher); a kill hits any that does, h0's agent too (its seat,
// node rank 0 with MASTER_ADDR, moves or leaves).
template <class Pick>
void into_host_loss(Case& k, int hosts, Pick& pick) {
  k.job = pick(2) == 0 ? JobKind::spare : JobKind::elastic;
  const int seated = k.job == JobKind::spare ? hosts - 1 : hosts;
  constexpr Fault faults[] = {Fault::host_kill, Fault::host_cable, Fault::host_sshd,
                              Fault::second_loss, Fault::host_back, Fault::spare_lost};
  // An elastic job has no spare to lose.
  k.fault = faults[pick(static_cast<int>(std::size(faults)) - (k.job == JobKind::elastic ? 1 : 0))];
  const bool remote = k.fault == Fault::host_cable || k.fault == Fault::host_sshd || k.fault == Fault::host_back;
  k.host = remote ? 1 + pick(seated - 1) : pick(seated);
  k.rank = k.host * kSlots;
  if (k.fault == Fault::spare_lost) {  // one time in two, a remote host's cable is cut after it
    k.host2 = pick(2) == 0 ? 1 + pick(seated - 1) : -1;
    k.host = hosts - 1;
  }
  if (k.fault == Fault::second_loss) {
    k.host2 = (k.host + 1 + pick(seated - 1)) % seated;
    k.at2_s = pick(400) / 1000.0;
  }
  if (k.job == JobKind::elastic) k.min_hosts = hosts - 1 - pick(2);
  // Last, so that every other host-loss case stays as it was: half the
  // host-back cases give the job --return-cooldown, and a second fault on
  // any other host makes it use the host that came back.
  if (k.fault == Fault::host_back && pick(2) == 0) {
    k.fault = Fault::host_return;
    k.host2 = (k.host + 1 + pick(hosts - 1)) % hosts;
  }
}

Case make_case(uint64_t seed, int index, int hosts, bool torch, bool host_loss) {
  // One generator per case, seeded from (seed, index) alone: a case replays
  // without the ones before it.
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(index)};
  std::mt19937_64 rng(seq);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  Case k;
  k.seed = seed;
  k.index = index;
  const int j = pick(10);  // shell, restart, OpenMPI, rdzv 2/10 each, MPICH 1/10
  k.job = j < 3 ? JobKind::shell : j < 5 ? JobKind::restart : j < 7 ? JobKind::openmpi : j < 8 ? JobKind::mpich : JobKind::rdzv;
  k.fault = static_cast<Fault>(pick(kDrawnFaults));
  const bool drawn_partition = k.fault == Fault::partition;
  k.openssh = pick(2) == 1;
  if (k.job == JobKind::rdzv) {
    // One dlaunch per host: no ssh, and no --timeout to see a stopped rank.
    constexpr Fault per_node[] = {Fault::kill_rank, Fault::kill_agent, Fault::kill_launcher, Fault::stop_agent,
                                  Fault::link_down, Fault::partition, Fault::slow_net};
    if (k.fault == Fault::kill_ssh || k.fault == Fault::refuse_ssh || k.fault == Fault::stop_rank ||
        k.fault == Fault::slow_start)
      k.fault = per_node[pick(std::size(per_node))];
    k.openssh = false;
  }
  // h0 runs the launcher and its agent without ssh: faults of a remote
  // host's network or ssh hit h1.., the others any host.
  const bool remote = k.fault == Fault::kill_ssh || k.fault == Fault::link_down || k.fault == Fault::partition ||
                      k.fault == Fault::refuse_ssh || k.fault == Fault::slow_net || k.fault == Fault::slow_start;
  k.host = remote ? 1 + pick(hosts - 1) : pick(hosts);
  k.rank = k.host * kSlots + pick(kSlots);
  k.at_s = pick(1500) / 1000.0;
  if (k.job == JobKind::shell && pick(2) == 0) into_tree(k, hosts, pick);  // after the other draws: they stay
  if (torch && k.job == JobKind::shell && pick(2) == 0) k.job = JobKind::torch;  // after the others: they stay
  // Last, so that every other seed's case stays as it was: half the
  // partitions drawn (tree jobs' too, which drew another fault for one) cut
  // the upper half of the hosts off instead of one host.
  if (drawn_partition && pick(2) == 0) {
    k.fault = Fault::partition_half;
    k.host = hosts / 2;
    k.rank = k.host * kSlots;
  }
  // Last of all, so that with host_loss the cases it does not turn stay as they were.
  if (host_loss && hosts >= 3 && pick(3) == 0) into_host_loss(k, hosts, pick);
  return k;
}

std::string describe(const Case& k) {
  std::ostringstream s;
  s << "seed=" << k.seed << " job=" << k.index << " kind=" << name(k.job) << (k.openssh ? "(--launcher ssh)" : "")
    << " fault=" << name(k.fault) << " host=h" << k.host;
  if (k.fault == Fault::kill_rank || k.fault == Fault::stop_rank) s << " rank=" << k.rank;
  if (k.job == JobKind::elastic) s << " min-hosts=" << k.min_hosts;
  if (k.host2 >= 0) s << " host2=h" << k.host2;
  s << " at=" << k.at_s << "s";
  if (k.fault == Fault::second_loss) s << " at2=" << k.at2_s << "s";
  return s.str();
}

Result run_case(const Cluster& c, const Case& k, const Options& o, std::vector<std::string>& killed_dirs) {
  Result res;
  const std::string mark = multihost::unique_marker();
  const Expected e = expected(c, k, o);
  auto fail = [&](Verdict v, std::string why) {
    if (res.verdict == Verdict::correct) {
      res.verdict = v;
      res.why = std::move(why);
    }
  };
  const bool at_launch = k.fault == Fault::refuse_ssh || k.fault == Fault::slow_start;  // no ranks to wait for
  if (k.fault == Fault::refuse_ssh && c.script({"stop-sshd", c.id(), c.host(k.host)}).status != 0) {
    fail(Verdict::wrong_verdict, "cluster.sh stop-sshd failed");
    return res;
  }
  AgentWatch agents(c);
  const double limit = 20 + e.bound_s + run_time(k, o) + stop_rank_timeout(k);
  // --timeout's stacks go where the run removes them (dlaunch leaves its report dir to the user).
  const std::string report_dir = c.dir() + "/report-" + mark;
  struct RemoveDir {
    std::string path;
    ~RemoveDir() { std::filesystem::remove_all(path); }
  } remove_report{report_dir};
  std::filesystem::create_directory(report_dir);  // a torch job's ranks say there that they are up
  std::filesystem::permissions(report_dir, std::filesystem::perms::owner_all);
  const std::string slow_prefix = c.dir() + "/slow-" + mark;
  RemoveDir remove_prefix{slow_prefix};
  if (k.fault == Fault::slow_start) multihost::write_slow_agent(slow_prefix, c.host(k.host), slow_delay(c, k));
  auto nodes = std::make_shared<std::vector<dl::cluster::RunResult>>();
  auto f = start_job(c, k, o, mark, report_dir, slow_prefix, std::chrono::milliseconds(static_cast<int>(limit * 1000)),
                     nodes);
  Injected in;
  auto fault_at = Clock::now();
  if (!at_launch) {
    if (!wait_running(c, k, mark, f)) {
      auto r = f.get();
      heal(c, k, in);
      res.output = r.output;
      fail(Verdict::wrong_verdict, "the ranks did not start on every host within 30 s (exit " +
                                       std::to_string(r.status) + ")");
      return res;
    }
    if (k.job == JobKind::torch) wait_torch_ready(c, report_dir, f);
    // host-sshd: the listener goes first, while the ranks run (the agents'
    // sessions stay), so the kill lands at its time: cluster.sh takes
    // seconds on a loaded machine, longer than a short job has left.
    if (k.fault == Fault::host_sshd && c.script({"stop-sshd", c.id(), c.host(k.host)}).status != 0)
      fail(Verdict::wrong_verdict, "cluster.sh stop-sshd failed");
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(k.at_s * 1000)));
    const auto before = Clock::now();
    in = inject(c, k, mark);
    // A signal acts at once; a fault of the network is in place when
    // cluster.sh has written its last nft rule or unplugged the cable (a
    // loaded host takes a while: a partition cut short is detected late).
    const bool network = k.fault == Fault::link_down || k.fault == Fault::partition ||
                         k.fault == Fault::partition_half || k.fault == Fault::slow_net;
    fault_at = network ? Clock::now() : before;
    if (!in.ok) fail(Verdict::wrong_verdict, "could not inject the fault: " + in.why);
  }
  const double heal_s = heal_after(c, k, o);
  auto r = wait_job(f, c, k, in, fault_at + std::chrono::milliseconds(static_cast<int>(heal_s * 1000)), heal_s >= 0,
                    heal_s == -2, live_log(report_dir), mark);
  res.took_s = seconds_since(fault_at);
  res.output = r.output;
  if (k.fault == Fault::host_return && in.ok && !in.second)
    fail(Verdict::wrong_verdict, c.host(k.host) + " was not back before the job ended (no 'dlaunch: " + c.address(k.host) +
                                     " is back (' line): the second fault never came");
  else if (!in.ok && in.second)
    fail(Verdict::wrong_verdict, "could not inject the second fault: " + in.why);
  // A stopped rank stays stopped after its job: SIGKILL has ended it (or it is left).
  if (in.ok) {
    if (r.status == 124 && e.status != 124)
      fail(Verdict::hung, "dlaunch did not end within " + std::to_string(static_cast<int>(limit)) + " s");
    else if (res.took_s > e.bound_s)
      fail(Verdict::hung, "dlaunch ended " + std::to_string(res.took_s) + " s after the fault; the bound is " +
                              std::to_string(e.bound_s) + " s");
    std::string why = k.job == JobKind::rdzv
                          ? check_nodes(*nodes, e, k, in.killed_rank, c.host(k.host), cut_hosts(c, k))
                          : check_verdict(r, e.status, e.lines, in.killed_rank, c.address(k.host), k.rank,
                                          lost_with(c, k));
    if (why.empty() && k.job != JobKind::rdzv) why = check_one_of(r.output, e.one_of);
    if (why.empty() && !in.said.empty() && !contains(r.output, in.said)) why = "no '" + in.said + "' in the output";
    if (why.empty() && host_loss_kind(k.job)) why = check_host_loss(c, k, r.output, e);
    if (!why.empty()) fail(Verdict::wrong_verdict, why);
  }
  // What is left: processes (the teardown of a lost launcher takes its
  // agents' heartbeat timeout; a slow start's agent starts late, then must end).
  auto cleanup_end = Clock::now() + std::chrono::milliseconds(static_cast<int>((o.heartbeat_s + kGrace + 3) * 1000));
  if (k.fault == Fault::slow_start)
    cleanup_end = std::max(cleanup_end, fault_at + std::chrono::milliseconds(static_cast<int>((slow_delay(c, k) + 4) * 1000)));
  if (heal_s == -2) {  // the stopped agent's subtree must end without it
    if (auto left = wait_agents_gone(c, hosts_beneath(c, k), cleanup_end); !left.empty())
      fail(Verdict::leftovers, "agents beneath the stopped one on " + c.host(k.host) + " left running:\n" + left);
    heal(c, k, in);
  }
  const auto cleanup = std::chrono::duration_cast<std::chrono::milliseconds>(cleanup_end - Clock::now()) + 1s;
  if (auto left = multihost::wait_clean(c, mark, cleanup); !left.empty()) {
    fail(Verdict::leftovers, "left running:\n" + left);
    for (auto& h : c.hosts())  // so that the next case starts clean
      for (int pid : multihost::pids_matching(c, h, mark)) ::kill(pid, SIGKILL);
  }
  check_dirs(k, agents.stop(), {in.killed_agent, in.killed_agent2}, killed_dirs, fail);
  if (auto why = check_lines(r.output, mark, ranks_of(c, k), e, lines_of(k, o)); !why.empty()) fail(Verdict::lost_output, why);
  return res;
}

void Tally::add(Verdict v) {
  ++faults;
  ++jobs;
  switch (v) {
    case Verdict::correct: ++correct; break;
    case Verdict::wrong_verdict: ++wrong_verdict; break;
    case Verdict::hung: ++hung; break;
    case Verdict::leftovers: ++leftovers; break;
    case Verdict::lost_output: ++lost_output; break;
  }
}

std::string Tally::line(uint64_t seed) const {
  std::ostringstream s;
  s << "chaos faults=" << faults << " jobs=" << jobs << " correct=" << correct << " wrong_verdict=" << wrong_verdict
    << " hung=" << hung << " leftovers=" << leftovers << " lost_output=" << lost_output << " seed=" << seed;
  return s.str();
}

}  // namespace dl::chaos
