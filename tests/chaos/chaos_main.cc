// dlaunch-chaos: the chaos run's driver (bench/chaos/run.sh; docs/failures.md,
// "The chaos run"). Brings up a namespace cluster, runs N jobs with one
// seeded fault each, prints one line per case and, last, the tally.
#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/chaos/chaos.h"

namespace {
using dl::chaos::JobKind;

struct Args {
  int faults = 40;
  uint64_t seed = 1;
  int hosts = 4;
  int replay = -1;  // a job index to rerun alone
  int from = 0;     // the first case index considered (a long run in parts: --from where the last part ended)
  std::string pause_while;  // between cases, wait while this file exists (a quiet machine for a benchmark)
  bool torch = false;
  bool host_loss = false;  // spare and elastic jobs with host-loss faults among the others
  bool list = false;  // print the cases, run none
  std::string kind;   // run only the seed's cases of this job kind
  std::string fault;  // run only the seed's cases of this fault
  dl::chaos::Options options;
};

const char* kUsage =
    "usage: dlaunch-chaos [--faults N] [--seed S] [--hosts K] [--replay S:I] [--from I] [--pause-while FILE] [--heartbeat-timeout S] [--lines N] [--kind K] [--fault F] [--torch] [--host-loss] [--list] [-v]\n"
    "  --kind K: only the seed's cases of job kind K (shell restart openmpi mpich rdzv torch tree spare elastic), N of them\n"
    "  --fault F: only the seed's cases of fault F (kill-rank ... partition-half, host-kill ... host-return, as the cases print it), N of them\n"
    "  --from I: the seed's cases from index I on (a long run in parts; each case line names its index)\n"
    "  --pause-while FILE: before each case, wait while FILE exists (another benchmark wants the machine quiet)\n"
    "  --host-loss: a third of the cases become spare and elastic jobs with host-loss faults (implied by --kind spare|elastic\n"
    "    and by --fault of a host-loss fault); the other cases stay as they were without it\n";

bool number(const std::string& s, auto& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// Parses argv; prints why and returns false on bad input.
bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    if (opt == "-v" || opt == "--torch" || opt == "--list" || opt == "--host-loss") {
      (opt == "-v" ? a.options.verbose : opt == "--torch" ? a.torch : opt == "--list" ? a.list : a.host_loss) = true;
      continue;
    }
    if (opt == "-h" || opt == "--help") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::cerr << "dlaunch-chaos: " << opt << " needs a value\n" << kUsage;
      return false;
    }
    const std::string v = argv[++i];
    bool ok = false;
    if (opt == "--faults") ok = number(v, a.faults) && a.faults > 0;
    else if (opt == "--seed") ok = number(v, a.seed);
    else if (opt == "--from") ok = number(v, a.from) && a.from >= 0;
    else if (opt == "--pause-while") ok = !v.empty(), a.pause_while = v;
    else if (opt == "--kind") {
      a.kind = v;
      for (auto j : {JobKind::shell, JobKind::restart, JobKind::openmpi, JobKind::mpich, JobKind::rdzv, JobKind::torch,
                     JobKind::tree, JobKind::spare, JobKind::elastic}) {
        ok = ok || v == dl::chaos::name(j);
        if (v == dl::chaos::name(j) && dl::chaos::host_loss_kind(j)) a.host_loss = true;
      }
    }
    else if (opt == "--fault") {
      a.fault = v;
      for (int f = 0; f < dl::chaos::kFaultKinds; ++f) {
        ok = ok || v == dl::chaos::name(static_cast<dl::chaos::Fault>(f));
        if (v == dl::chaos::name(static_cast<dl::chaos::Fault>(f)) && f >= dl::chaos::kFaultKinds - dl::chaos::kHostLossFaults)
          a.host_loss = true;
      }
    } else if (opt == "--hosts") ok = number(v, a.hosts) && a.hosts >= 2 && a.hosts <= 64;
    else if (opt == "--lines") ok = number(v, a.options.lines) && a.options.lines > 0 && a.options.lines <= 10000;
    else if (opt == "--heartbeat-timeout") ok = number(v, a.options.heartbeat_s) && a.options.heartbeat_s > 0;
    else if (opt == "--replay") {
      auto colon = v.find(':');
      ok = colon != std::string::npos && number(v.substr(0, colon), a.seed) && number(v.substr(colon + 1), a.replay) &&
           a.replay >= 0;
    } else {
      std::cerr << "dlaunch-chaos: unknown option " << opt << "\n" << kUsage;
      return false;
    }
    if (!ok) {
      std::cerr << "dlaunch-chaos: bad value for " << opt << ": '" << v << "'\n" << kUsage;
      return false;
    }
  }
  return true;
}
// Ctrl-C or SIGTERM: take the cluster down (every job in it with it) and
// leave. A handler that writes to a pipe, not a blocked mask: the jobs
// inherit a mask, but handlers end at exec.
int signal_pipe[2] = {-1, -1};

void take_down_on_signal(const dl::cluster::Cluster& cluster) {
  if (::pipe(signal_pipe) != 0) return;
  struct sigaction sa {};
  sa.sa_handler = [](int sig) {
    const unsigned char b = static_cast<unsigned char>(sig);
    (void)!::write(signal_pipe[1], &b, 1);
  };
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  std::thread([&cluster] {
    unsigned char sig = 0;
    if (::read(signal_pipe[0], &sig, 1) != 1) return;
    std::fprintf(stderr, "dlaunch-chaos: %s: taking cluster %s down\n", sigabbrev_np(sig), cluster.id().c_str());
    dl::cluster::run_argv({dl::cluster::Cluster::script_path(), "down", cluster.id()});
    ::_exit(128 + sig);
  }).detach();
}

// The indices of the cases to run: the replayed one, or the first `faults`
// from index `from` on (of job kind `kind` and fault `fault` only, when given).
std::vector<int> cases_to_run(const Args& a) {
  if (a.replay >= 0) return {a.replay};
  std::vector<int> out;
  for (int i = a.from; static_cast<int>(out.size()) < a.faults && i < a.from + a.faults * 1000; ++i) {
    const auto k = dl::chaos::make_case(a.seed, i, a.hosts, a.torch, a.host_loss);
    if ((a.kind.empty() || a.kind == dl::chaos::name(k.job)) && (a.fault.empty() || a.fault == dl::chaos::name(k.fault)))
      out.push_back(i);
  }
  return out;
}
// Between cases (never during one: a case's timing is its verdict), while
// `file` exists: a long run shares the machine with benchmarks that need it quiet.
void wait_while(const std::string& file) {
  if (file.empty() || ::access(file.c_str(), F_OK) != 0) return;
  std::printf("# paused while %s exists\n", file.c_str());
  std::fflush(stdout);
  while (::access(file.c_str(), F_OK) == 0) std::this_thread::sleep_for(std::chrono::seconds(2));
}
}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, a)) return 2;
  if (a.host_loss && a.hosts < 3) {  // a spare job needs two hosts with ranks and the spare
    std::cerr << "dlaunch-chaos: the host-loss kinds need --hosts 3 or more (--hosts " << a.hosts << ")\n" << kUsage;
    return 2;
  }
  if (a.list) {
    for (int i : cases_to_run(a))
      std::printf("case %s\n", dl::chaos::describe(dl::chaos::make_case(a.seed, i, a.hosts, a.torch, a.host_loss)).c_str());
    return 0;
  }
  try {
    dl::cluster::Cluster cluster(a.hosts);
    take_down_on_signal(cluster);
    dl::chaos::Tally tally;
    std::vector<std::string> killed_dirs;
    for (int i : cases_to_run(a)) {
      wait_while(a.pause_while);
      const auto k = dl::chaos::make_case(a.seed, i, a.hosts, a.torch, a.host_loss);
      const auto r = dl::chaos::run_case(cluster, k, a.options, killed_dirs);
      tally.add(r.verdict);
      std::printf("case %s: %s (%.1f s after the fault)%s%s\n", dl::chaos::describe(k).c_str(),
                  dl::chaos::name(r.verdict), r.took_s, r.why.empty() ? "" : ": ", r.why.c_str());
      if (r.verdict != dl::chaos::Verdict::correct || a.options.verbose)
        std::printf("--- dlaunch's output:\n%s---\n", r.output.c_str());
      if (r.verdict != dl::chaos::Verdict::correct)
        std::printf("replay: bench/chaos/run.sh --hosts %d --heartbeat-timeout %g --lines %d%s%s --replay %llu:%d\n", a.hosts,
                    a.options.heartbeat_s, a.options.lines, a.torch ? " --torch" : "", a.host_loss ? " --host-loss" : "",
                    static_cast<unsigned long long>(a.seed), i);
      std::fflush(stdout);
    }
    std::printf("%s\n", tally.line(a.seed).c_str());
    return tally.correct == tally.faults ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlaunch-chaos: %s\n", e.what());
    return 1;
  }
}
