#include "launcher/run.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <string_view>
#include <thread>

#include "errors/error.h"
#include "hostfiles/allocation.h"
#include "hostfiles/hostfile.h"
#include "hostfiles/placement.h"
#include "hostfiles/rankfile.h"
#include "hostfiles/usable_cpus.h"
#include "launcher/dry_run.h"
#include "launcher/dry_run_program.h"
#include "launcher/job.h"
#include "launcher/options/local_limits.h"
#include "launcher/node_group.h"
#include "launcher/options/options.h"
#include "launcher/output/output_sink.h"
#include "machine/cpus.h"
#include "machine/gpus.h"
#include "remote/agent_starter.h"
#include "remote/early_agent.h"
#include "remote/start_method.h"
#include "wire/host.h"

namespace dl::launcher {

namespace {
// --hostfile's hosts; an error names the setting when a config file or
// DLAUNCH_HOSTFILE gave it (the user typed no hostfile).
std::vector<hostfiles::HostEntry> read_hostfile(const RunOptions& o) {
  try {
    return hostfiles::parse_hostfile(o.hostfile);
  } catch (const Error& e) {
    if (o.hostfile_origin.empty()) throw;
    throw Error(e.kind(), std::string(e.what()) + " (hostfile = " + o.hostfile + " from " + o.hostfile_origin +
                              "; pass --hostfile or -H to use another)");
  }
}

// The job's hosts: --hostfile or -H (inside an allocation, only its hosts),
// else the allocation dlaunch runs in, else none (this machine: plan() says
// so). -v and --dry-run say which.
std::vector<hostfiles::HostEntry> job_hosts(const RunOptions& o) {
  if (!o.hostfile.empty() && !o.hosts.empty())
    throw UsageError("give either --hostfile or -H, not both");
  const auto alloc = hostfiles::detect_allocation();
  const bool say = o.verbose || o.dry_run;
  const std::string inside = alloc ? " inside " + alloc->scheduler + " job " + alloc->job_id : "";
  std::vector<hostfiles::HostEntry> hosts;
  if (!o.hostfile.empty() || !o.hosts.empty()) {
    const std::string origin = o.hostfile.empty() ? "-H" : "hostfile '" + o.hostfile + "'";
    hosts = o.hostfile.empty() ? hostfiles::parse_host_list(o.hosts) : read_hostfile(o);
    if (alloc) hostfiles::check_within_allocation(hosts, origin, *alloc);
    if (say) write_fully(2, "dlaunch: hosts from " + origin + inside + "\n");
  } else if (alloc) {
    hosts = alloc->hosts;
    if (say) write_fully(2, "dlaunch: hosts from the allocation of " + alloc->scheduler + " job " + alloc->job_id +
                                ": " + alloc->source + "\n");
  }
  return hosts;
}

// Checks what the ranks placed here take from this host's limits, and that
// --stdin and --local-ranks-filter name ranks of the job.
void check_placed(const RunOptions& o, long local_ranks, long world) {
  check_stdin_rank(o.stdin_rank, static_cast<int>(world));
  check_console_ranks(o.console_ranks, o.as_written.local_ranks_filter, static_cast<int>(world));
  check_local_limits({local_ranks, world, !o.output_dir.empty() || !o.log_dir.empty()});
}

// How many of the placed ranks run on this machine.
long local_ranks(const hostfiles::Placement& p) {
  long local = 0;
  for (size_t n = 0; n < p.nodes.size(); ++n)
    if (wire::is_local_host(p.nodes[n].host)) local += p.local_size[n];
  return local;
}

// Entries that are this machine under several names become one host (the
// slots added) before anything is placed; said on a terminal, with -v and
// --dry-run, and in a placement error (the user counted two hosts there).
// Two names for one other machine are caught by the agents' hellos
// (launch_plan.h), before any rank starts.
std::vector<hostfiles::HostEntry> merge_this_machine(std::vector<hostfiles::HostEntry> hosts, const RunOptions& o,
                                                     std::string& note) {
  std::vector<std::string> merged;
  hosts = hostfiles::merge_local(std::move(hosts), wire::is_local_host, &merged);
  for (const auto& m : merged) note += (note.empty() ? "merged " : ", ") + m;
  if (!note.empty()) note = "hosts: " + note + ": this machine under several names is one host, the slots added";
  if (!note.empty() && (o.verbose || o.dry_run || ::isatty(2) == 1)) write_fully(2, "dlaunch: " + note + "\n");
  return hosts;
}

// --wdir (the job's, and each app context's) where every rank runs on this
// machine: a directory here, or a usage error before any agent starts (the
// agent would refuse each rank with exit 126).
void check_local_wdirs(const RunOptions& o) {
  std::vector<std::string> dirs = {o.wdir};
  for (const auto& app : o.apps) dirs.push_back(app.wdir);
  for (const auto& d : dirs) {
    if (d.empty()) continue;
    struct stat st {};
    std::string problem;
    if (::stat(d.c_str(), &st) != 0) problem = std::strerror(errno);
    else if (!S_ISDIR(st.st_mode)) problem = "not a directory";
    else if (::access(d.c_str(), X_OK) != 0) problem = std::strerror(errno);
    if (!problem.empty())
      throw UsageError("--wdir " + d + ": " + problem + " (every rank runs on this machine); give a directory that "
                       "exists here");
  }
}

bool all_local(const hostfiles::Placement& p) {
  return std::all_of(p.nodes.begin(), p.nodes.end(), [](const auto& n) { return wire::is_local_host(n.host); });
}

hostfiles::Placement plan(const RunOptions& o) {
  std::string merged;
  std::vector<hostfiles::HostEntry> hosts = merge_this_machine(job_hosts(o), o, merged);
  if (!o.rankfile.empty()) {
    hostfiles::Placement p = hostfiles::place_by_rankfile(hostfiles::read_rankfile(o.rankfile), hosts, o.np);
    check_placed(o, local_ranks(p), static_cast<long>(p.ranks.size()));
    return p;
  }
  if (hosts.empty() && o.spares > 0)
    throw UsageError("--spares " + std::to_string(o.spares) + " needs the job's hosts (--hostfile, -H or a scheduler "
                     "allocation): the spares are the last of them; without hosts every rank runs on this machine");
  const std::string source = !o.hostfile.empty() ? "the hostfile '" + o.hostfile + "'"
                             : !o.hosts.empty() ? std::string("-H") : std::string("the allocation");
  // --max-hosts: the hosts after the first N (and before --spares' own) wait as spares too.
  int held = o.spares;
  if (o.max_hosts > 0 && static_cast<int>(hosts.size()) - o.spares > o.max_hosts)
    held = static_cast<int>(hosts.size()) - o.max_hosts;
  std::vector<hostfiles::HostEntry> spares = hostfiles::take_spares(hosts, held, source);
  if (hosts.empty()) {
    const int np = o.np > 0 ? o.np : (o.per_node > 0 ? o.per_node : 1);
    check_placed(o, np, np);  // before the placement of a million ranks is built
    // As mpirun: the CPUs dlaunch may use are the slots, the room that
    // MPI_Comm_spawn has beside the ranks (the ranks themselves are not limited).
    const int slots = hostfiles::usable_cpus();
    if (o.verbose || o.dry_run)
      write_fully(2, "dlaunch: hosts: this machine only (no --hostfile, -H or scheduler allocation), " +
                         std::to_string(slots) + (slots == 1 ? " slot" : " slots") +
                         " for MPI_Comm_spawn (the CPUs dlaunch may use)\n");
    return hostfiles::place_local(np, slots);
  }
  hostfiles::PlacementOptions po;
  po.np = o.np;
  po.map_by = o.map_by;
  po.per_node = o.per_node;
  po.oversubscribe = o.oversubscribe;
  hostfiles::Placement p;
  try {
    p = hostfiles::place(hosts, po);
  } catch (const UsageError& e) {
    if (merged.empty()) throw;
    throw UsageError(std::string(e.what()) + " (" + merged + ")");
  }
  check_placed(o, local_ranks(p), static_cast<long>(p.ranks.size()));
  // A host that got no ranks (-n below the slots) is not held back: only the
  // named spares are.
  p.spares = std::move(spares);
  if (o.min_hosts > static_cast<int>(p.nodes.size()))
    throw UsageError("--min-hosts " + std::to_string(o.min_hosts) + ": the job's ranks run on " +
                     std::to_string(p.nodes.size()) + (p.nodes.size() == 1 ? " host" : " hosts") +
                     (p.spares.empty() ? "" : " (besides " + std::to_string(p.spares.size()) + " spare" +
                                                  (p.spares.size() == 1 ? ")" : "s)")) +
                     "; give at most that many");
  return p;
}

// torchrun's --nproc-per-node gpu|cpu|auto, counted on this host: the GPUs
// as an agent here would detect them (--gpus-per-node, CUDA_VISIBLE_DEVICES,
// the driver), the CPUs as the OS counts them.
void resolve_torchrun_words(RunOptions& o) {
  if (o.per_socket > 0) {  // --map-by ppr:N:socket, with this machine's sockets for every host
    const auto sockets = machine::read_cpu_topology(machine::own_allowed_cpus()).packages.size();
    o.sockets_per_node = static_cast<int>(std::max<size_t>(sockets, 1));
    o.per_node = o.per_socket * o.sockets_per_node;
  }
  if (o.nproc_per_node_kind != NprocKind::kNumber) {
    int gpus = 0;
    if (o.nproc_per_node_kind != NprocKind::kCpu) {
      const auto found = machine::detect_gpus(o.gpus_per_node);
      if (!found.empty()) gpus = static_cast<int>(found.front().gpus.size());
    }
    o.per_node = resolve_nproc_per_node(o.nproc_per_node_kind, gpus, static_cast<int>(std::thread::hardware_concurrency()));
  }
  // A .py program runs under Python, as with torchrun; $PYTHON names another
  // interpreter than the python3 on the ranks' PATH.
  const char* py = std::getenv("PYTHON");
  const std::string python = py && *py ? py : "python3";
  const std::vector<std::string> typed = o.command;
  o.command = program_argv(o, python);
  if (o.apps.empty() && o.command != typed) o.interpreter = python;
  if (o.verbose && !o.interpreter.empty()) write_fully(2, interpreter_note(o, python, typed));
  for (auto& app : o.apps) app.command = program_argv(o, app.command, py && *py ? py : "python3");
}
// True if the options (the words before the program or "--") hold one of `names`.
bool asks_for(const std::vector<std::string>& args, std::initializer_list<std::string_view> names) {
  for (const auto& a : args) {
    if (a == "--" || a.empty() || a[0] != '-') return false;
    for (auto n : names)
      if (a == n) return true;
  }
  return false;
}
}  // namespace

int run_command(const std::vector<std::string>& args, std::map<std::string, std::string> preflight_failed) {
  bool help = false;
  RunOptions o;
  try {
    o = parse_run_options(args, &help);
  } catch (const Error&) {
    // A bad line in a config file or a DLAUNCH_ variable must not hide
    // --help (which names that error at its end) or --version.
    if (asks_for(args, {"--help", "-h"})) {
      std::cout << run_options_help();
      return 0;
    }
    if (!asks_for(args, {"--version"})) throw;
    std::cout << "dlaunch " DLAUNCH_VERSION "\n";
    return 0;
  }
  if (help) {
    std::cout << run_options_help();
    return 0;
  }
  if (o.version) {
    std::cout << "dlaunch " DLAUNCH_VERSION "\n";
    return 0;
  }
  resolve_torchrun_words(o);
  o.preflight_failed = std::move(preflight_failed);
  const char* slurm_job = std::getenv("SLURM_JOB_ID");
  const std::string& asked = o.as_written.launcher;
  o.launcher = remote::resolve_start_method(asked, slurm_job ? slurm_job : "",
                                            remote::split_launcher_exec(o.launcher_exec));
  if (o.verbose)
    write_fully(2, std::string("dlaunch: agents on other hosts start by --launcher ") + remote::word(o.launcher) +
                       (asked == "auto" ? std::string(slurm_job ? " (auto: inside Slurm job " + std::string(slurm_job) + ")"
                                                                : " (auto: not inside a Slurm job)")
                                        : "") +
                       "\n");
  if (o.rdzv != RdzvMode::kNone) {
    const long world = static_cast<long>(o.per_node) * std::max(o.nnodes, 1);
    check_local_limits({o.per_node, world, !o.output_dir.empty() || !o.log_dir.empty()});
    check_console_ranks(o.console_ranks, o.as_written.local_ranks_filter, static_cast<int>(world));
    check_local_wdirs(o);  // this node's ranks all run here
    return run_per_node(std::move(o));
  }
  hostfiles::Placement p = plan(o);
  // A spare takes over, and a host leaves (--min-hosts), at a restart: one
  // each, unless --max-restarts said how many.
  if (!o.restarts_given && (o.min_hosts > 0 || !p.spares.empty()))
    o.max_restarts = static_cast<int>(p.spares.size()) +
                     (o.min_hosts > 0 ? std::max(0, static_cast<int>(p.nodes.size()) - o.min_hosts) : 0);
  if (all_local(p)) check_local_wdirs(o);
  if (o.dry_run) {
    const ProgramCheck programs = check_programs(p, o);
    if (programs.code != 0) {  // as the launch would fail: same message, same exit code
      write_fully(2, "dlaunch: " + programs.message + "\n");
      return programs.code;
    }
    std::cout << rank_map_table(p, o) << programs.resolved;
    return 0;
  }
  if (o.display_map) std::cout << rank_map_table(p, o) << std::flush;
  // The local agent is forked now, before the Job's event loop, signal
  // handlers and threads exist, and waits for its command line: its start
  // then needs no exec (remote/early_agent.h). Only where a local node is
  // started by fork (not by srun).
  std::unique_ptr<remote::EarlyAgent> early;
  if (remote::forks_local_agent(o.launcher))
    for (size_t n = 0; n < p.nodes.size(); ++n)
      if (wire::is_local_host(p.nodes[n].host)) {
        remote::AgentHint hint;
        for (const auto& r : p.ranks) hint.ranks += r.node == static_cast<int>(n);
        early = remote::EarlyAgent::fork_now(hint);
        break;
      }
  Job job(std::move(o), std::move(p));
  if (early) job.use_early_agent(std::move(early));
  return job.run();
}

}  // namespace dl::launcher
