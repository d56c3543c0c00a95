#include "launcher/launch_plan.h"

#include <algorithm>
#include <map>

#include "control/env_names.h"
#include "hostfiles/binding.h"
#include "hostfiles/rankfile.h"
#include "launcher/options/unsent_env.h"
#include "machine/gpu_report.h"

namespace dl::launcher {

namespace msg = control::msg;

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// "-H entries 'a' and 'b' are the same machine ...; list it once with the
// slots added, e.g. -H a:4" (hostfile lines: named with their file:line).
std::string same_machine(const hostfiles::HostEntry& a, const hostfiles::HostEntry& b, const std::string& host) {
  const bool by_h = a.origin == "-H" && b.origin == "-H";
  const std::string name = hostfiles::describe(a), slots = std::to_string(a.slots + b.slots);
  const std::string which = by_h ? "-H entries '" + name + "' and '" + hostfiles::describe(b) + "'"
                                 : "hosts '" + name + "' (" + a.origin + ") and '" + hostfiles::describe(b) + "' (" +
                                       b.origin + ")";
  return which + " are the same machine: their agents report one machine-id, boot id and network namespace (host "
         "name '" + host + "'), so its ranks would share its GPUs with LOCAL_RANK counted twice from 0; list it once "
         "with the slots added, e.g. " + (by_h ? "-H " + name + ":" + slots : "'" + name + " slots=" + slots + "'");
}

// Two of the job's entries whose agents report one machine
// (machine/identity.h) are refused, naming both: the placement (NODE_RANK,
// each host's ranks, the output files) was fixed before the agents started.
// Entries under this machine's own names were merged then (hostfiles::merge_local).
bool check_machines(const PlanInput& in, LaunchPlan& plan) {
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    const PlanNode& n = in.nodes[i];
    if (n.external || !n.hello || n.hello->machine.empty()) continue;
    auto [it, fresh] = first.emplace(n.hello->machine, i);
    if (fresh) continue;
    plan.refusal = LaunchPlan::Refusal::kBadRequest;
    const auto& nodes = in.placement->nodes;
    plan.why = same_machine(nodes.at(it->second), nodes.at(i), in.nodes[it->second].hello->host);
    return false;
  }
  return true;
}

// --mpi: which wire-ups the agents serve. pmix needs every agent to serve
// PMIx; pmi needs nothing of them; auto serves PMI always and PMIx too when
// every agent can, so that one command line runs OpenMPI and MPICH programs
// alike (docs/mpi.md). Per-node mode never serves (no fences between
// nodes): "refuse", so that a rank that calls MPI_Init ends the job rather
// than run as a singleton. A restarted job is served in every attempt, each
// in a namespace of its own (mpi_nspace).
bool decide_mpi(const PlanInput& in, LaunchPlan& plan) {
  const MpiMode mode = in.opts->mpi;
  if (mode == MpiMode::kNone) return true;
  if (in.shared) {
    plan.mpi = true;
    plan.serve = control::MpiServe::kRefuse;
    return true;
  }
  std::vector<std::string> without;
  for (const auto& n : in.nodes)
    if (!n.external && !n.hello->pmix) without.push_back(n.host);
  if (mode == MpiMode::kPmix && !without.empty()) {
    plan.refusal = LaunchPlan::Refusal::kNoPmix;
    plan.hosts = join(without);
    plan.why = "--mpi pmix: the dlaunch-agent on " + plan.hosts +
               " was built without libpmix; install libpmix-dev and rebuild, or use --mpi pmi (MPICH, Intel MPI) "
               "or --mpi none";
    return false;
  }
  plan.mpi = true;
  plan.serve = mode == MpiMode::kPmix                          ? control::MpiServe::kPmix
               : mode == MpiMode::kPmi || !without.empty() ? control::MpiServe::kPmi
                                                           : control::MpiServe::kPmixAndPmi;
  return true;
}

// --map-by ppr:N:socket planned every host with this machine's sockets:
// one with another count would get too many or too few ranks per socket.
void check_sockets(const RunOptions& o, const hostfiles::CpuTopology& topo, const std::string& host) {
  if (o.per_socket <= 0 || static_cast<int>(topo.packages.size()) == o.sockets_per_node) return;
  throw std::runtime_error("--map-by ppr:" + std::to_string(o.per_socket) + ":socket: " + host + " has " +
                           std::to_string(topo.packages.size()) + " usable socket(s), but the ranks per node were "
                           "planned for " + std::to_string(o.sockets_per_node) + " (this machine's); run on hosts "
                           "alike, or give --npernode and --bind-to socket");
}

// --bind-to: every rank's CPUs, from what its agent reported, by local rank;
// `gpu_numa` (rank -> the NUMA node of its first GPU) lets numa follow the GPU.
bool plan_cpus(const PlanInput& in, LaunchPlan& plan, std::map<int, std::vector<int>>& cpus,
               const std::map<int, int>& gpu_numa) {
  if (!pins_cpus(*in.opts)) return true;
  for (const auto& n : in.nodes) {
    if (n.external) continue;
    hostfiles::CpuTopology topo;
    if (n.hello->cpu) {
      topo.cores = n.hello->cpu->cores, topo.numa = n.hello->cpu->numa;
      topo.numa_ids = n.hello->cpu->numa_ids;
      topo.packages = n.hello->cpu->packages;
    }
    std::vector<int> by_local(n.ranks.size(), -1);
    for (int r : n.ranks)
      if (auto g = gpu_numa.find(r); g != gpu_numa.end())
        by_local.at(static_cast<size_t>(in.placement->ranks.at(static_cast<size_t>(r)).local_rank)) = g->second;
    try {
      check_sockets(*in.opts, topo, n.host);
      if (!in.opts->rankfile.empty()) {
        for (int r : n.ranks)
          if (const auto& place = in.placement->ranks.at(static_cast<size_t>(r)); !place.cpus.empty())
            cpus[r] = hostfiles::rankfile_cpus(place.cpus, topo, n.host,
                                               in.opts->rankfile + " (rank " + std::to_string(r) + ")");
        continue;
      }
      auto per_local = hostfiles::plan_cpus(in.opts->bind_to, topo, static_cast<int>(n.ranks.size()),
                                            in.opts->cpus_per_rank, n.host, by_local);
      for (int r : n.ranks)
        cpus[r] = per_local.at(static_cast<size_t>(in.placement->ranks.at(static_cast<size_t>(r)).local_rank));
    } catch (const std::exception& e) {
      plan.refusal = LaunchPlan::Refusal::kBadRequest;
      plan.why = e.what();
      return false;
    }
  }
  return true;
}

// --gpu-bind: every rank's GPU variables (its vendor's visibility variable
// and DLAUNCH_GPUS) from the GPUs its agent reported, by local rank, and the
// NUMA node of each rank's first GPU where its agent knew it (for --bind-to numa).
bool plan_gpus(const PlanInput& in, LaunchPlan& plan, std::map<int, EnvMap>& gpu_env, std::map<int, int>& gpu_numa) {
  const RunOptions& o = *in.opts;
  if (o.gpu_bind_mode == hostfiles::GpuBind::kNone) return true;
  for (const auto& n : in.nodes) {
    if (n.external) continue;
    try {
      const auto gpus = machine::pick_gpus(machine::reported_gpus(*n.hello), o.gpu_vendor, n.host);
      if (!gpus) continue;  // a host without GPUs: nothing to set, nothing wrong
      const int local_world = static_cast<int>(n.ranks.size());
      const auto per_local = hostfiles::plan_gpus(o.gpu_bind_mode, gpus->ids(), local_world, o.gpus_per_rank,
                                                  o.oversubscribe_gpus, n.host);
      plan.warnings += hostfiles::gpu_sharing_warning(o.gpu_bind_mode, static_cast<int>(gpus->gpus.size()), local_world,
                                                      o.gpus_per_rank, o.oversubscribe_gpus, n.host, o.per_node_flag);
      const std::string var = machine::visibility_variable(gpus->vendor);
      for (int r : n.ranks) {
        const auto& a = per_local.at(static_cast<size_t>(in.placement->ranks.at(static_cast<size_t>(r)).local_rank));
        gpu_env[r] = {{var, a.visible}, {hostfiles::kDlaunchGpus, a.devices}};
        if (!a.positions.empty() && static_cast<size_t>(a.positions[0]) < gpus->gpus.size())
          gpu_numa[r] = gpus->gpus[static_cast<size_t>(a.positions[0])].numa;
      }
    } catch (const std::exception& e) {
      plan.refusal = LaunchPlan::Refusal::kBadRequest;
      plan.why = e.what();
      return false;
    }
  }
  return true;
}

// Where the ranks meet: MASTER_ADDR/PORT on node 0, the job's store here.
JobEnv job_env(const PlanInput& in) {
  JobEnv je;
  je.placement = in.placement;
  je.cross = std::make_shared<const CrossRanks>(*in.placement);
  je.job_id = in.job_id;
  je.token = in.token;
  je.slurm = in.launcher_env.count(env::kSlurmJobId) > 0;
  je.restart_count = in.restart_count;
  je.max_restarts = in.opts->max_restarts;
  je.role = in.opts->role;
  if (in.shared) {
    je.master_addr = in.shared->master_addr;
    je.master_port = in.shared->master_port;
    je.store_addr = in.shared->store_addr;
    je.agent_store = in.shared->agent_store;
    return je;
  }
  const bool all_local = std::all_of(in.nodes.begin(), in.nodes.end(), [](const PlanNode& n) { return n.local; });
  const PlanNode& n0 = in.nodes.at(0);
  je.master_addr = all_local ? "127.0.0.1" : (n0.local ? in.control_host : n0.reach_addr);
  je.master_port = in.master_port ? in.master_port : n0.hello ? n0.hello->free_port : 29500;
  je.store_addr = (all_local ? std::string("127.0.0.1") : in.control_host) + ":" + std::to_string(in.store_port);
  if (in.torch_store_port) {
    // torch's store is ours, beside dlaunch's: every rank's torch is its client.
    je.master_addr = all_local ? std::string("127.0.0.1") : in.control_host;
    je.master_port = in.torch_store_port;
    je.agent_store = true;
  }
  return je;
}
// A rank's app context (MPMD) is its program and arguments, MPI_APPNUM and
// PMIX_APPNUM, the context's own -x (over the global ones) and --wdir. One
// app: every rank runs o.command as app 0, said once for the job.

// The app context every rank of `n` runs, or -1 (one app, a host of one
// rank, or several contexts on the host): that context is then said once in
// the host's launch rather than with each rank.
int host_app(const RunOptions& o, const PlanNode& n) {
  if (o.apps.empty() || n.ranks.size() < 2) return -1;
  const int app = app_of_rank(o.apps, n.ranks.front());
  for (int r : n.ranks)
    if (app_of_rank(o.apps, r) != app) return -1;
  return app;
}

// App context `app`'s variables: MPI_APPNUM, PMIX_APPNUM and its -x.
EnvMap app_env(const PlanInput& in, int app) {
  EnvMap e;
  e[env::kMpiAppnum] = e[env::kPmixAppnum] = std::to_string(app);
  for (auto& [k, v] : resolve_exports(in.opts->apps.at(static_cast<size_t>(app)).exports, in.launcher_env))
    e[k] = std::move(v);
  return e;
}

// App context `app` said in `m` (the host's launch) or in `spec` (one
// rank's); `gpu_names`: the GPU variables the host's launch sets, which the
// binding decides over any -x of the app.
template <class Target>
void say_app(const PlanInput& in, int app, Target& t, const EnvMap& host_gpus = {}) {
  const AppContext& c = in.opts->apps.at(static_cast<size_t>(app));
  t.argv = c.command;
  for (auto& [k, v] : app_env(in, app))
    if (!host_gpus.count(k)) t.env[k] = std::move(v);
  if (!c.wdir.empty()) t.wdir = c.wdir;
}

// The GPU variables every rank of `n` gets alike (under --gpu-bind visible,
// the host's whole list), taken out of each rank's: the host's launch says
// them once. None for a host of one rank.
EnvMap host_gpu_env(const PlanNode& n, std::map<int, EnvMap>& gpu_env) {
  EnvMap alike;
  const auto first = n.ranks.empty() ? gpu_env.end() : gpu_env.find(n.ranks.front());
  if (n.ranks.size() < 2 || first == gpu_env.end()) return alike;
  for (const auto& [k, v] : first->second) {
    const bool everywhere = std::all_of(n.ranks.begin(), n.ranks.end(), [&, &k = k, &v = v](int r) {
      const auto g = gpu_env.find(r);
      if (g == gpu_env.end()) return false;
      const auto it = g->second.find(k);
      return it != g->second.end() && it->second == v;
    });
    if (everywhere) alike[k] = v;
  }
  for (int r : n.ranks)
    for (const auto& [k, v] : alike) gpu_env[r].erase(k);
  return alike;
}
}  // namespace

std::string mpi_nspace(const std::string& job_id, int restart_count) {
  return restart_count == 0 ? job_id : job_id + ".a" + std::to_string(restart_count);
}

LaunchPlan plan_launch(const PlanInput& in) {
  LaunchPlan plan;
  plan.launches.resize(in.nodes.size());
  std::map<int, std::vector<int>> cpus;
  std::map<int, EnvMap> gpu_env;
  std::map<int, int> gpu_numa;
  // GPUs first: with --bind-to numa a rank's CPUs follow its GPU.
  if (!check_machines(in, plan) || !decide_mpi(in, plan) || !plan_gpus(in, plan, gpu_env, gpu_numa) ||
      !plan_cpus(in, plan, cpus, gpu_numa))
    return plan;
  const RunOptions& o = *in.opts;
  const JobEnv je = job_env(in);
  // As torchrun: ranks sharing a host would each start a thread per core
  // and oversubscribe it, unless the user chose (here or with -x).
  const bool omp_chosen = in.launcher_env.count(env::kOmpNumThreads) || in.exports.count(env::kOmpNumThreads);
  // What every host shares goes once, ahead of the launches (msg::LaunchEnv):
  // the job's own variables over the -x exports, as a rank's own would be.
  plan.shared.env = in.exports;
  if (o.output_pty && !in.output_terminal && !in.exports.count(env::kTerm)) plan.shared.env[env::kTerm] = "dumb";
  for (auto& [k, v] : shared_env(je)) plan.shared.env[k] = std::move(v);
  if (o.apps.empty()) plan.shared.env[env::kMpiAppnum] = plan.shared.env[env::kPmixAppnum] = "0";
  for (size_t i = 0; i < in.nodes.size(); ++i) {
    const PlanNode& n = in.nodes[i];
    if (n.external) continue;
    msg::Launch m;
    m.wdir = in.wdir;
    m.hb_ms = heartbeat_interval_ms(o.heartbeat_timeout_s);
    m.hb_timeout_ms = static_cast<int>(o.heartbeat_timeout_s * 1000);
    m.stdout_pty = o.output_pty;
    if (!omp_chosen && n.ranks.size() > 1) {
      m.env[env::kOmpNumThreads] = "1";
      plan.notice = "dlaunch: setting OMP_NUM_THREADS=1 for each rank, as torchrun does, since several ranks share a "
                    "host; set OMP_NUM_THREADS (or -x OMP_NUM_THREADS=N) to choose another value\n";
    }
    // What every rank of the host has alike goes once, in the launch
    // (launcher/rank_env.h, stage 2); the rest with each rank (stage 3).
    const int app = host_app(o, n);
    if (o.apps.empty()) m.argv = o.command;
    else if (app >= 0) say_app(in, app, m);
    const EnvMap host_gpus = host_gpu_env(n, gpu_env);
    for (const auto& [k, v] : host_gpus) m.env[k] = v;
    // Each rank's identity and its host's are the agent's to write
    // (control/rank_identity.h): the launch says only what the agent cannot
    // know, its node index and Horovod's cross ranks.
    msg::RankIdentity identity;
    identity.slurm = je.slurm;
    identity.node = static_cast<int>(i);
    m.ranks.reserve(n.ranks.size());
    for (int r : n.ranks) {
      msg::RankSpec spec;
      spec.rank = r;
      const control::RankPlace place = rank_place(je, r);
      identity.cross_rank.push_back(place.cross_rank), identity.cross_size.push_back(place.cross_size);
      // A rank whose local rank is not its place in the launch (never, for
      // the placements dlaunch makes) says its own.
      if (place.local_rank != static_cast<int>(m.ranks.size())) control::add_rank_identity(spec.env, place);
      if (!o.apps.empty() && app < 0) say_app(in, app_of_rank(o.apps, r), spec, host_gpus);
      if (auto g = gpu_env.find(r); g != gpu_env.end())
        for (const auto& [k, v] : g->second) spec.env[k] = v;
      spec.stdin_open = r == o.stdin_rank;
      if (auto c = cpus.find(r); c != cpus.end()) spec.cpus = c->second;
      m.ranks.push_back(std::move(spec));
    }
    m.identity = std::move(identity);
    if (plan.mpi) {
      msg::MpiSection s;
      s.nspace = mpi_nspace(in.job_id, in.restart_count);
      s.world_size = s.universe_size = static_cast<int>(in.placement->ranks.size());
      s.node_rank = static_cast<int>(i);
      if (!plan.mpi_map) {
        plan.mpi_map.emplace();
        for (const auto& x : in.nodes) plan.mpi_map->node_hosts.push_back(x.host), plan.mpi_map->node_ranks.push_back(x.ranks);
      }
      if (o.apps.size() > 1) {
        s.app_sizes.emplace();
        for (const auto& a : o.apps) s.app_sizes->push_back(a.np);
      }
      s.serve = control::serve_word(plan.serve);
      m.mpi = std::move(s);
    }
    plan.launches[i] = std::move(m);
  }
  plan.warnings += unsent_env_warning(in);
  return plan;
}

EnvMap resolve_exports(const std::vector<std::string>& exports, const EnvMap& env) {
  EnvMap out;
  for (const auto& x : exports) {
    const auto eq = x.find('=');
    if (eq != std::string::npos) {
      out[x.substr(0, eq)] = x.substr(eq + 1);
    } else if (!x.empty() && x.back() == '*') {
      // -x 'NCCL_*': every variable of the launcher's that starts so; never
      // an outer launcher's wire-up (-x '*' inside srun), unless named.
      const std::string prefix = x.substr(0, x.size() - 1);
      for (auto it = env.lower_bound(prefix); it != env.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
        if (!env::is_foreign_identity_var(it->first)) out[it->first] = it->second;
    } else if (auto it = env.find(x); it != env.end()) {
      out[x] = it->second;
    }
  }
  return out;
}

EnvMap chosen_env(const PlanInput& in) {
  EnvMap out = in.exports;
  for (const auto& c : in.opts->apps)
    for (auto& [k, v] : resolve_exports(c.exports, in.launcher_env)) out[k] = std::move(v);
  return out;
}

std::string inherited_identity_warning(const msg::Launch& launch, const EnvMap& inherited_in, const EnvMap& chosen,
                                       const EnvMap& shared) {
  if (launch.ranks.empty()) return "";
  // The first rank as its agent will start it.
  msg::Launch first;
  first.env = launch.env;
  first.ranks = {launch.ranks[0]};
  first.identity = launch.identity;
  control::complete_launch(first, shared);
  EnvMap ours = first.env;
  for (const auto& [k, v] : first.ranks[0].env) ours[k] = v;
  EnvMap inherited = inherited_in;
  // Binding a host's GPUs contradicts nothing: not even a GPU list the launcher inherited.
  for (const auto& v : machine::gpu_vendors()) ours.erase(v.visibility_variable), inherited.erase(v.visibility_variable);
  ours.erase(hostfiles::kDlaunchGpus), inherited.erase(hostfiles::kDlaunchGpus);
  inherited.erase(env::kTerm);  // TERM=dumb for output that reaches no terminal
  for (const auto& [k, v] : chosen) inherited.erase(k);
  const auto names = contradicted_vars(inherited, ours);
  if (names.empty()) return "";
  return "dlaunch: warning: the ranks get dlaunch's own values instead of the inherited " + join(names) +
         " (is dlaunch running inside srun or mpirun?)\n";
}

}  // namespace dl::launcher
