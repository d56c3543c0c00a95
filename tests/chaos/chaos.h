#pragma once
// The chaos run (docs/failures.md, "The chaos run"): real multi-host jobs on
// the namespace cluster, one seeded fault each, every outcome checked.
//
//   dl::cluster::Cluster c(4);
//   dl::chaos::Options o;
//   auto r = dl::chaos::run_case(c, dl::chaos::make_case(7, 3, c.size()), o);
//
// A case is a pure function of (seed, index) and the host count, so
// `--replay S:I` reruns exactly the job and fault that failed.
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cluster/cluster_fixture.h"

namespace dl::chaos {

// tree: the shell job through a launch tree, --fanout 2: at 8 hosts the
// launcher starts h1 and h5; h1 starts h2 (which starts h3) and h4; h5
// starts h6 and h7 (depth 3). At 4 hosts: h1 (starting h2) and h3.
// spare: the shell job with `--spares 1 --max-restarts 2`: the last host
// holds no ranks until a lost host's seat moves to it. elastic: the shell
// job on every host with `--nnodes MIN:K` (MIN = K-2 or K-1), no spare: a
// lost host leaves and the world shrinks. Both only with `host_loss`
// (make_case), each with a host-loss fault.
enum class JobKind { shell, restart, openmpi, mpich, rdzv, torch, tree, spare, elastic };
enum class Fault {
  kill_rank,      // SIGKILL one rank
  kill_agent,     // SIGKILL one host's agent
  kill_launcher,  // SIGKILL dlaunch itself
  kill_ssh,       // SIGKILL the ssh session that carries one host's agent
  stop_agent,     // SIGSTOP one host's agent (a silent host), SIGCONT later
  stop_rank,      // SIGSTOP one rank: nothing but --timeout can see it
  link_down,      // unplug one host's cable, plug it back later
  partition,      // drop TCP between one host and h0 (the launcher's), both ways; the others still reach it
  refuse_ssh,     // one host's sshd is down when the job starts
  slow_net,       // 20 ms delay on one host's packets: the job must succeed
  slow_start,     // one host's agent starts past --agent-timeout (and then starts, late)
  partition_half, // drop TCP both ways between the upper half of the hosts (hK/2..) and the lower half (h0..)
  // Host loss (the spare and elastic kinds only):
  host_kill,      // SIGKILL one host's agent and every rank on it
  host_cable,     // unplug one host's cable until the job has ended
  host_sshd,      // stop one host's sshd, then SIGKILL its agent and ranks: no new agent can start there
  spare_lost,     // SIGKILL the spare's agent while the ranks run; with host2, then host2's cable cut until the end
  second_loss,    // SIGKILL all of one host, then at2_s later all of host2 (around the swap)
  host_back,      // unplug one host's cable; plug it back the moment dlaunch says the host is lost (during the swap)
  // host_back with --return-cooldown: the host comes back as a spare, and
  // once dlaunch says so a second fault makes the job use it: spare, all of
  // host2 SIGKILLed (its seat moves to the host that came back); elastic, a
  // rank of host2 SIGKILLed (the next attempt grows the world back).
  host_return,
};
constexpr int kFaultKinds = 19;
constexpr int kHostLossFaults = 7;  // the last seven: drawn only for the spare and elastic kinds

struct Case {
  uint64_t seed = 0;
  int index = 0;
  JobKind job = JobKind::shell;
  Fault fault = Fault::kill_rank;
  bool openssh = false;  // --launcher ssh instead of libssh (not for rdzv: one dlaunch per host, no ssh)
  int host = 0;          // the host the fault hits (partition_half: the first cut off, hK/2)
  int rank = 0;          // the rank it hits (kill_rank, stop_rank)
  double at_s = 0;       // seconds after every rank runs
  int host2 = -1;        // second_loss, spare_lost, host_return: the second host hit (-1: none)
  double at2_s = 0;      // second_loss: seconds from the first host's kill to the second's
  int min_hosts = 0;     // elastic: --nnodes MIN:K
};

struct Options {
  double heartbeat_s = 3;  // --heartbeat-timeout of every job
  int lines = 40;          // numbered lines per rank (one every 50 ms)
  bool verbose = false;    // print every job's output, not only a failing one's
};

enum class Verdict { correct, wrong_verdict, hung, leftovers, lost_output };

struct Result {
  Verdict verdict = Verdict::correct;
  std::string why;     // what was wrong ("" when correct)
  std::string output;  // dlaunch's output
  double took_s = 0;   // from the fault to dlaunch's exit
};

// `torch`: half the shell jobs become gloo torch jobs (about 12 s of
// imports each here); `host_loss`: a third of the cases become spare and
// elastic jobs with host-loss faults (at 3 hosts or more). Each is drawn
// after every other draw: off, a seed's cases are as they always were, and
// on, the cases it does not turn are too.
Case make_case(uint64_t seed, int index, int hosts, bool torch = false, bool host_loss = false);
bool host_loss_kind(JobKind j);
std::string describe(const Case& c);
// `killed_dirs`: the temp dirs of agents SIGKILLed by earlier cases, which
// the next MPI job's agents must remove (agent/mpi_job.cc); run_case checks
// them after an MPI job and adds its own killed agent's.
Result run_case(const dl::cluster::Cluster& cluster, const Case& c, const Options& o,
                std::vector<std::string>& killed_dirs);
const char* name(Verdict v);
const char* name(JobKind j);
const char* name(Fault f);

// Counts of a run and its last line:
// "chaos faults=N jobs=J correct=C wrong_verdict=W hung=H leftovers=L lost_output=O seed=S".
struct Tally {
  int faults = 0, jobs = 0, correct = 0, wrong_verdict = 0, hung = 0, leftovers = 0, lost_output = 0;
  void add(Verdict v);
  std::string line(uint64_t seed) const;
};

}  // namespace dl::chaos
