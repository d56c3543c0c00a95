#include "launcher/options/options.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <boost/asio/ip/address.hpp>
#include <boost/program_options.hpp>
#include <sstream>
#include <type_traits>

#include "errors/error.h"
#include "errors/user_file.h"
#include "errors/user_number.h"
#include "hostfiles/hostfile.h"
#include "launcher/output/output_sink.h"
#include "remote/start_method.h"
#include "rendezvous/bootstrap.h"
#include "wire/socket.h"

namespace po = boost::program_options;

namespace dl::launcher {

namespace {
// A bound option value; for the help text (help = true) it also shows the
// default, where one means something: a positive number or a non-empty word
// (0, -1 and "" mean "not set" or "detect" here, said in the description).
// Never for parsing: a default_value would make vm.count() true for every
// option, and several checks ask whether the user gave one.
template <class T>
po::typed_value<T>* val(T* field, bool help) {
  auto* v = po::value(field);
  if (!help) return v;
  if constexpr (std::is_arithmetic_v<T>) {
    if (*field > 0) v->default_value(*field);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!field->empty()) v->default_value(*field);
  }
  return v;
}

// A duration option, read by parse_seconds when the options are stored (from
// the command line, a config file or DLAUNCH_<OPTION>) and written to
// `field`: nan, inf and values past max_s are refused, naming the option.
po::typed_value<std::string>* seconds(double* field, bool help, const char* option, double max_s,
                                      const char* zero_means = nullptr) {
  auto* v = po::value<std::string>()->notifier(
      [=](const std::string& text) { *field = parse_seconds(option, text, max_s, zero_means); });
  if (help && *field > 0) {
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", *field);
    v->default_value(shown);
  }
  return v;
}

po::options_description describe(RunOptions& o, bool help = false) {
  po::options_description d("dlaunch [run] options");
  d.add_options()
    ("help,h", "show this help")
    ("np,n", val(&o.np, help), "number of ranks (-np works too)")
    ("hostfile", val(&o.hostfile, help), "hostfile (OpenMPI, MPICH or DeepSpeed format)")
    ("machinefile", val(&o.hostfile, help), "alias of --hostfile")
    ("host,H", val(&o.hosts, help), "host list: h1:2,h2:2,node[01-04]")
    ("map-by", val(&o.as_written.map_by, help),
     "slot (fill each host; mpirun's core and hwthread too), node (round-robin), ppr:N:node or ppr:N:socket; :PE=N "
     "binds each rank to N cores")
    ("rank-by", val(&o.as_written.rank_by, help), "mpirun's: accepted when it is the order --map-by numbers ranks in "
     "(slot, core or hwthread; node with --map-by node)")
    ("npernode", val(&o.per_node, help), "ranks per node")
    ("ppn", val(&o.per_node, help), "alias of --npernode")
    ("nproc-per-node", po::value<std::string>(), "ranks per node: N, or gpu, cpu or auto (torchrun's name)")
    ("oversubscribe", po::bool_switch(&o.oversubscribe), "allow more ranks and MPI_Comm_spawn children than slots")
    ("dry-run", po::bool_switch(&o.dry_run), "print the rank map and exit")
    ("preflight", po::bool_switch(&o.preflight), "check the job's hosts first (dlaunch doctor --quick): a host that fails stops the job before any rank starts")
    ("display-map", po::bool_switch(&o.display_map), "print the rank map, then run the job (mpirun's; --dry-run only prints)")
    ("x,x", val(&o.exports, help)->composing(), "export VAR, VAR=value or 'PREFIX*' to every rank (-x)")
    ("export-all", po::bool_switch(&o.export_all), "every variable of dlaunch's environment to every rank (-x '*'; srun's default)")
    ("env-file", val(&o.env_file, help), "NAME=value lines for every rank (DeepSpeed's .deepspeed_env); -x wins")
    ("wdir", val(&o.wdir, help), "working directory of the ranks")
    ("gpus-per-node", val(&o.gpus_per_node, help), "GPUs per host (default: detect)")
    ("gpus-per-rank", val(&o.gpus_per_rank, help), "consecutive GPUs each rank gets")
    ("gpu-bind", val(&o.as_written.gpu_bind, help),
     "visible (every rank sees the host's GPUs, LOCAL_RANK indexes them), isolate (each sees only its own), none")
    ("no-gpu-bind", "alias of --gpu-bind none")
    ("gpu-vendor", val(&o.as_written.gpu_vendor, help), "nvidia, amd or intel: whose GPUs to bind on a host with two vendors")
    ("oversubscribe-gpus", po::bool_switch(&o.oversubscribe_gpus), "let more ranks than GPUs share them round-robin")
    ("report-bindings", po::bool_switch(&o.report_bindings), "print each rank's GPUs and CPUs at start-up")
    ("bind-to", val(&o.as_written.bind_to, help), "pin ranks to CPUs: none, core, hwthread, socket or numa (by local rank)")
    ("cpus-per-rank", val(&o.cpus_per_rank, help), "cores (hardware threads) each rank gets with --bind-to core (hwthread)")
    ("use-hwthread-cpus", po::bool_switch(&o.use_hwthread_cpus), "mpirun's: --bind-to core pins hardware threads")
    ("rankfile", val(&o.rankfile, help), "mpirun's: place rank N on a host and CPUs, one line each: rank N=HOST slot=CPUS")
    ("mpi", val(&o.as_written.mpi, help), "pmix, pmi, none or auto (PMI, and PMIx when the agents have libpmix)")
    ("fence-timeout", seconds(&o.fence_timeout_s, help, "--fence-timeout", kMaxWaitSeconds),
     "seconds an MPI fence across hosts may take")
    ("tag-output", po::bool_switch(&o.tag_output), "prefix lines with [rank@host]")
    ("timestamp-output", po::bool_switch(&o.timestamp_output), "prefix lines with the time")
    ("merge-stderr-to-stdout", po::bool_switch(&o.merge_stderr), "the ranks' stderr goes where their stdout goes (mpirun's)")
    ("output-filename", val(&o.output_dir, help), "write DIR/rank.N/{stdout,stderr} instead of the console (OpenMPI writes both)")
    ("stdin", val(&o.as_written.stdin, help), "rank that reads dlaunch's stdin, or none")
    ("torch-store", val(&o.as_written.torch_store, help), "served (dlaunch serves torch's c10d store on MASTER_PORT) or rank0 (rank 0's torch hosts it)")
    ("output-pty", "each rank's stdout is a pseudo-terminal, so print/printf line-buffer (default)")
    ("no-output-pty", "each rank's stdout is a pipe (its stdio may hold output until it exits)")
    ("verbose,v", po::bool_switch(&o.verbose), "say what dlaunch does")
    ("kill-grace", seconds(&o.kill_grace_s, help, "--kill-grace", kMaxWaitSeconds, "SIGKILL at once"),
     "seconds between SIGTERM and SIGKILL on teardown")
    ("timeout", seconds(&o.timeout_s, help, "--timeout", kMaxJobSeconds, "no timeout"),
     "stop the job after this many seconds")
    ("stack-timeout", seconds(&o.stack_timeout_s, help, "--stack-timeout", kMaxWaitSeconds, "collect none"),
     "seconds to collect every rank's stack on --timeout and SIGQUIT (0: collect none)")
    ("report-dir", val(&o.report_dir, help), "where the stack report goes (default: a new temp dir, named and kept)")
    ("report-json", val(&o.report_json, help), "also write the stack report as JSON to this file (for tools), and the job's membership changes at its end")
    ("heartbeat-timeout", seconds(&o.heartbeat_timeout_s, help, "--heartbeat-timeout", kMaxWaitSeconds),
     "seconds of silence before an agent counts as lost")
    ("agent-timeout", seconds(&o.agent_timeout_s, help, "--agent-timeout", kMaxWaitSeconds),
     "seconds to wait for agents to connect")
    ("max-restarts", val(&o.max_restarts, help), "restart the whole job up to N times when a rank fails (torchrun's; MPI jobs too, in a fresh namespace)")
    ("spares", val(&o.spares, help), "the last K hosts hold no ranks: each takes a lost host's ranks at a restart")
    ("min-hosts", val(&o.min_hosts, help), "a lost host without a spare leaves the job, which goes on smaller while N hosts remain")
    ("health-check", val(&o.health_check, help), "a command each host runs before it takes ranks; a host where it fails takes none")
    ("health-timeout", seconds(&o.health_timeout_s, help, "--health-timeout", kMaxWaitSeconds),
     "seconds --health-check may take on a host")
    ("clock-threshold", seconds(&o.clock_threshold_s, help, "--clock-threshold", kMaxWaitSeconds, "clocks not judged"),
     "in the health gate, a host whose clock is further off the launcher's fails")
    ("return-cooldown", seconds(&o.return_cooldown_s, help, "--return-cooldown", kMaxWaitSeconds, "never"),
     "seconds before a lost host is tried again as a spare, doubling with each loss (0: never)")
    ("max-hosts", val(&o.max_hosts, help), "at most N hosts take ranks; the hosts after them are spares (torchrun's --nnodes MIN:MAX)")
    ("prefix", val(&o.prefix, help), "install prefix of dlaunch on remote hosts (DIR/bin/dlaunch-agent)")
    ("control-addr", val(&o.control_addr, help), "address agents connect back to")
    ("ssh-parallel", val(&o.ssh_parallel, help), "ssh sessions opened at once")
    ("fanout", val(&o.fanout, help), "agents started by the launcher and by each agent, over more hosts (0: all from the launcher)")
    ("ssh-accept-new", po::bool_switch(&o.ssh_accept_new), "accept unknown host keys (never changed ones)")
    ("ssh-config", val(&o.ssh_config, help), "ssh client config file (like ssh -F)")
    ("ssh-timeout", seconds(&o.ssh_timeout_s, help, "--ssh-timeout", kMaxWaitSeconds),
     "ssh connect timeout per host, seconds")
    ("launcher", val(&o.as_written.launcher, help), "how agents start: libssh, ssh, slurm (one srun step) or auto (slurm in a Slurm job)")
    ("launcher-exec", val(&o.launcher_exec, help), "the program that starts agents in place of srun or ssh")
    ("nnodes", val(&o.nnodes, help), "per-node mode: number of nodes that meet at --rdzv")
    ("node-rank", val(&o.node_rank, help), "per-node mode: this node's rank (0..nnodes-1)")
    ("rdzv", val(&o.as_written.rdzv, help), "per-node mode: tcp://HOST:PORT, or env (Slurm, mpirun, PMI)")
    ("rdzv-port", val(&o.rdzv_port, help), "the store's port with --rdzv env")
    ("rdzv-id", val(&o.rdzv_id, help), "job name at a shared store (default: SLURM_JOB_ID or 'default')")
    ("rdzv-timeout", seconds(&o.rdzv_timeout_s, help, "--rdzv-timeout", kMaxWaitSeconds),
     "seconds to wait for every node to arrive")
    ("token-file", val(&o.token_file, help), "file holding the job token shared by all nodes")
    ("master-addr", val(&o.master_addr, help), "torchrun's: with --nnodes > 1, node 0's host (--rdzv tcp://ADDR:PORT)")
    ("master-port", val(&o.master_port, help), "torchrun's: the port of --master-addr (default 29500)")
    ("rdzv-endpoint", val(&o.rdzv_endpoint, help), "torchrun's: HOST[:PORT] where the nodes meet (--rdzv tcp://...)")
    ("rdzv-backend", val(&o.rdzv_backend, help), "torchrun's: c10d or static, both served by dlaunch's own store")
    ("standalone", po::bool_switch(&o.standalone), "torchrun's: one node, this machine (the default)")
    ("monitor-interval", po::value<std::string>(), "torchrun's: accepted; dlaunch watches its ranks by their exit, not by polling")
    ("rdzv-conf", po::value<std::string>(), "torchrun's: accepted; dlaunch's store takes no backend settings")
    ("role", val(&o.role, help), "torchrun's: the ranks' ROLE_NAME")
    ("start-method", po::value<std::string>(), "torchrun's: spawn, fork or forkserver; each rank is a new process either way")
    ("run-path", "torchrun's: accepted; a .py PROGRAM runs under the interpreter as a script")
    ("module,m", po::bool_switch(&o.module), "PROGRAM is a Python module: run python3 -m PROGRAM")
    ("no-python", po::bool_switch(&o.no_python), "run PROGRAM as it is, even when it ends in .py")
    ("log-dir", val(&o.log_dir, help), "torchrun's: where -r/-t write DIR/rank.N/{stdout,stderr}")
    ("redirects,r", val(&o.as_written.redirects, help),
     "torchrun's: streams to files only (needs --log-dir): 0 none, 1 stdout, 2 stderr, 3 both, or 0:3,1:2 by local rank")
    ("tee,t", val(&o.as_written.tee, help), "torchrun's: streams to files and the console (needs --log-dir); values as -r")
    ("local-ranks-filter", val(&o.as_written.local_ranks_filter, help), "torchrun's: only these ranks' output on the console: 0,2")
    ("app", val(&o.app_file, help), "MPMD: one app context per line of FILE (-n N [-x V] [--wdir D] PROGRAM ARGS)")
    ("version", "print the version");
  return d;
}

// A "--" word as dlaunch spells it (torchrun's underscores as dashes, the
// habit table's names as dlaunch's), for the messages that name it as typed.
std::string normalize(const std::string& a) { return dlaunch_spelling(a, nullptr); }

// An option's words and what each means.
template <class E>
using Choices = std::vector<std::pair<std::string, E>>;

const Choices<hostfiles::MapBy> kMapBy = {{"slot", hostfiles::MapBy::kSlot}, {"node", hostfiles::MapBy::kNode}};
const Choices<hostfiles::CpuBind>& kBindTo = hostfiles::cpu_bind_words();
const Choices<hostfiles::GpuBind>& kGpuBind = hostfiles::gpu_bind_words();
const Choices<std::string>& kSrunCpuBind = srun_cpu_bind_values();
// srun's --mpi=pmi2 is pmi: dlaunch's PMI server speaks PMI-1 and PMI-2.
const Choices<MpiMode> kMpi = {{"pmix", MpiMode::kPmix}, {"pmi", MpiMode::kPmi}, {"none", MpiMode::kNone},
                               {"auto", MpiMode::kAuto}, {"pmi2", MpiMode::kPmi}};
const Choices<NprocKind> kNproc = {{"gpu", NprocKind::kGpu}, {"cpu", NprocKind::kCpu}, {"auto", NprocKind::kAuto}};
const Choices<TorchStoreMode> kTorchStore = {{"served", TorchStoreMode::kServed}, {"rank0", TorchStoreMode::kRank0}};

std::vector<std::string> gpu_vendor_words() {
  std::vector<std::string> out;
  for (const auto& v : machine::gpu_vendors()) out.push_back(v.word);
  return out;
}

// The words to offer and name: each value's first (pmi2 is pmi's alias).
template <class E>
std::vector<std::string> words_of(const Choices<E>& c) {
  std::vector<std::string> out;
  for (size_t k = 0; k < c.size(); ++k)
    if (std::none_of(c.begin(), c.begin() + static_cast<long>(k), [&](const auto& e) { return e.second == c[k].second; }))
      out.push_back(c[k].first);
  return out;
}

// "a, b or c".
std::string or_list(const std::vector<std::string>& words) {
  std::string out;
  for (size_t k = 0; k < words.size(); ++k)
    out += (k == 0 ? "" : k + 1 == words.size() ? " or " : ", ") + words[k];
  return out;
}

// UsageError unless `value` is one of option_words()'s words of `option`.
void check_words(const std::string& option, const std::string& value) {
  for (const auto& w : option_words())
    if (w.option == option && std::find(w.words.begin(), w.words.end(), value) == w.words.end())
      throw UsageError("--" + option + " takes " + or_list(w.words) + ", got '" + value + "'");
}

// `text`'s meaning for --`option`, or UsageError naming the words it takes.
template <class E>
E choose(const std::string& option, const std::string& text, const Choices<E>& c, const std::string& more = "") {
  for (const auto& [word, value] : c)
    if (word == text) return value;
  std::vector<std::string> words = words_of(c);
  if (!more.empty()) words.push_back(more);
  throw UsageError("--" + option + " takes " + or_list(words) + ", got '" + text + "'");
}

// The modes as written, typed: nothing after the parse compares their words.
// --stdin's value: a rank, or none.
int stdin_rank(const std::string& typed) {
  if (typed == "none") return kNoStdin;
  const bool number = !typed.empty() && typed.size() < 10 && typed.find_first_not_of("0123456789") == std::string::npos;
  if (!number) throw UsageError("--stdin takes a rank number or 'none', got '" + typed + "'");
  return std::stoi(typed);
}

// mpirun's --map-by (its words and modifiers, read_map_by; ppr:N:UNIT) and
// --use-hwthread-cpus as what they mean for dlaunch's modes, beside the
// --bind-to and --map-by the user wrote, which every message quotes.
struct MapByHabit {
  std::string placement;           // read_map_by's word: slot, node, ... (ppr:N:UNIT is kSlot)
  bool per_resource = false;       // ppr:N:UNIT
  std::optional<hostfiles::CpuBind> bind_to;  // where the mapping decides the binding (no --bind-to given)
};

// mpirun's ppr:N:node (N ranks per node, as --npernode N) and ppr:N:socket
// (N per socket: N x the sockets of this machine per node, each rank pinned
// to its socket unless --bind-to says otherwise; a host whose agent reports
// another socket count is refused before any rank starts).
void ranks_per_resource(RunOptions& o, const po::variables_map& vm, const std::string& spec, MapByHabit& h) {
  const size_t colon = spec.find(':', 4);
  const std::string n = spec.substr(4, colon == std::string::npos ? std::string::npos : colon - 4);
  const std::string unit = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (n.empty() || n.size() > 6 || n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) < 1 ||
      (unit != "node" && unit != "socket" && unit != "package"))
    throw UsageError("--map-by " + spec + ": expected ppr:N:node (N ranks per node) or ppr:N:socket (N per socket)");
  if (vm.count("npernode") || vm.count("ppn") || vm.count("nproc-per-node"))
    throw UsageError("give --map-by " + spec + " or --npernode, not both");
  o.per_node = std::stoi(n);
  h.per_resource = true;
  if (unit == "node") return;
  o.per_socket = o.per_node;
  if (!vm.count("bind-to")) h.bind_to = hostfiles::CpuBind::kSocket;
}

// --map-by as written: its placement, :PE=N as --bind-to core
// --cpus-per-rank N, :OVERSUBSCRIBE; --rank-by checked beside it.
MapByHabit map_by_meaning(RunOptions& o, const po::variables_map& vm) {
  const auto& w = o.as_written;
  const MapByMeaning m = read_map_by(w.map_by);
  MapByHabit h{m.map_by, false, std::nullopt};
  check_rank_by(w.rank_by, m.map_by);
  if (m.oversubscribe) o.oversubscribe = true;
  if (m.cpus_per_rank != 0) {
    if (vm.count("bind-to") && w.bind_to != "core" && w.bind_to != "hwthread")
      throw UsageError("--map-by " + w.map_by + " binds each rank to " + std::to_string(m.cpus_per_rank) +
                       " cores (:PE=N is --bind-to core --cpus-per-rank N): drop --bind-to " + w.bind_to +
                       ", or drop :PE=");
    if (vm.count("cpus-per-rank") && o.cpus_per_rank != m.cpus_per_rank)
      throw UsageError("--map-by " + w.map_by + " gives each rank " + std::to_string(m.cpus_per_rank) +
                       " cores and --cpus-per-rank " + std::to_string(o.cpus_per_rank) + ": give one of them");
    if (!vm.count("bind-to")) h.bind_to = hostfiles::CpuBind::kCore;
    o.cpus_per_rank = m.cpus_per_rank;
  }
  if (m.map_by.rfind("ppr:", 0) == 0) ranks_per_resource(o, vm, m.map_by, h);
  return h;
}

// The modes, typed from what was written and what mpirun's habits mean
// (`map_by`): nothing after the parse compares their words.
void type_modes(RunOptions& o, const po::variables_map& vm, const MapByHabit& map_by) {
  const auto& w = o.as_written;
  o.map_by = map_by.per_resource ? hostfiles::MapBy::kSlot
                                 : choose("map-by", map_by.placement, kMapBy, "ppr:N:node or ppr:N:socket");
  o.mpi = choose("mpi", w.mpi, kMpi);
  o.gpu_bind_mode = vm.count("no-gpu-bind") ? hostfiles::GpuBind::kNone : choose("gpu-bind", w.gpu_bind, kGpuBind);
  o.bind_to = map_by.bind_to ? *map_by.bind_to : choose("bind-to", w.bind_to, kBindTo);
  // --use-hwthread-cpus: a hardware thread is what a core was.
  if (o.use_hwthread_cpus && o.bind_to == hostfiles::CpuBind::kCore) o.bind_to = hostfiles::CpuBind::kHwthread;
  o.torch_store = choose("torch-store", w.torch_store, kTorchStore);
  o.stdin_rank = stdin_rank(w.stdin);
  if (!w.gpu_vendor.empty()) o.gpu_vendor = machine::parse_gpu_vendor(w.gpu_vendor, "--gpu-vendor");
}

// --rankfile places and pins every rank: what else would place or pin them is refused.
void rankfile_rules(RunOptions& o, const po::variables_map& vm) {
  for (const char* other : {"npernode", "ppn", "nproc-per-node", "map-by", "bind-to", "cpus-per-rank"})
    if (vm.count(other))
      throw UsageError(std::string("give --rankfile or --") + other + ", not both: the rankfile places every rank "
                       "on its host and its CPUs (rank N=HOST slot=CPUS)");
  if (vm.count("rdzv") || vm.count("nnodes"))
    throw UsageError("--rankfile places the ranks of one launch; per-node mode (--rdzv, --nnodes) places each node's "
                     "own");
}

// mpirun's and srun's values of dlaunch options: those with a dlaunch
// meaning become it (typed with the modes: type_modes), the rest are
// refused naming the nearest option.
MapByHabit mpirun_values(RunOptions& o, const po::variables_map& vm) {
  const MapByHabit map_by = map_by_meaning(o, vm);
  if (!o.rankfile.empty()) rankfile_rules(o, vm);
  if (vm.count("start-method")) {
    const auto m = vm["start-method"].as<std::string>();
    check_words("start-method", m);
  }
  // mpirun's and mpiexec.hydra's job bound, below --timeout (a given or default one).
  const char* env_timeout = std::getenv("MPIEXEC_TIMEOUT");
  if (env_timeout && *env_timeout && !vm.count("timeout")) {
    o.timeout_s = parse_seconds("MPIEXEC_TIMEOUT", env_timeout, kMaxJobSeconds, "no timeout");
    o.timeout_from = "MPIEXEC_TIMEOUT";
  }
  return map_by;
}

// Whether the user spelt `option` (its dash form) with underscores, as torchrun's.
bool typed_with_underscores(const std::string& option, const std::vector<std::string>& raw) {
  for (const auto& word : raw) {
    const std::string typed = word.substr(0, word.find('='));
    if (typed.find('_') != std::string::npos && normalize(typed) == option) return true;
  }
  return false;
}

// torchrun's ways of naming where the nodes meet, as --rdzv tcp://HOST:PORT:
// --rdzv-endpoint HOST[:PORT] (c10d's port 29400 when none), else
// --master-addr/--master-port (static's 127.0.0.1:29500). One node needs no
// meeting: it runs as a plain local job.
void torchrun_rendezvous(RunOptions& o, bool master_port_given) {
  if (!o.rdzv_backend.empty() && o.rdzv_backend != "c10d" && o.rdzv_backend != "static")
    throw UsageError("--rdzv-backend takes c10d or static (dlaunch's own store serves either), got '" +
                     o.rdzv_backend + "'");
  if (o.master_port < 0 || o.master_port > 65535) throw UsageError("--master-port takes a port number");
  const bool named = !o.rdzv_endpoint.empty() || !o.master_addr.empty() || master_port_given;
  if (!named || o.nnodes <= 1) return;
  if (!o.as_written.rdzv.empty()) throw UsageError("give --rdzv or torchrun's --rdzv-endpoint/--master-addr, not both");
  if (!o.rdzv_endpoint.empty()) {
    std::string ep = o.rdzv_endpoint.rfind("tcp://", 0) == 0 ? o.rdzv_endpoint.substr(6) : o.rdzv_endpoint;
    // [v6]:PORT or host:PORT; a bare IPv6 address needs its brackets, as with torchrun.
    const bool has_port = ep.rfind('[', 0) == 0 ? ep.find("]:") != std::string::npos
                                                : std::count(ep.begin(), ep.end(), ':') == 1;
    o.as_written.rdzv = "tcp://" + ep + (has_port ? "" : ":29400");
  } else {
    o.as_written.rdzv = "tcp://" + (o.master_addr.empty() ? std::string("127.0.0.1") : o.master_addr) + ":" +
             std::to_string(o.master_port > 0 ? o.master_port : 29500);
  }
  if (o.node_rank < 0)
    throw UsageError("--nnodes " + std::to_string(o.nnodes) + " with " + o.as_written.rdzv.substr(6) +
                     " needs --node-rank K on each node (torchrun's c10d hands node ranks out on arrival; dlaunch's "
                     "nodes claim theirs)");
}

// --rdzv's value, checked to be env or tcp://..., as the mode, host and port.
void type_rdzv(RunOptions& o) {
  const std::string& w = o.as_written.rdzv;
  if (w == "env") {
    o.rdzv = RdzvMode::kEnv;
    return;
  }
  auto [host, port] = wire::split_host_port(std::string_view(w).substr(6), "--rdzv");
  if (host.empty() || port == 0) throw UsageError("--rdzv needs tcp://HOST:PORT with a host and a port, got '" + w + "'");
  o.rdzv = RdzvMode::kTcp, o.rdzv_host = host, o.rdzv_port = port;
}

// Per-node mode: --rdzv names it; the hostfile options do not mix with it.
// --spares K: hosts of a hostfile launch held back for lost ones; a spare
// takes over only at a restart, so K restarts are allowed when
// --max-restarts was not given.
void check_spares(RunOptions& o, bool restarts_given) {
  if (o.min_hosts < 0) throw UsageError("--min-hosts takes a number of hosts, 1 or more, got " + std::to_string(o.min_hosts));
  if (o.max_hosts < 0) throw UsageError("--max-hosts takes a number of hosts, 1 or more, got " + std::to_string(o.max_hosts));
  if (o.max_hosts > 0 && o.min_hosts > o.max_hosts)
    throw UsageError("--nnodes " + std::to_string(o.min_hosts) + ":" + std::to_string(o.max_hosts) +
                     " (--min-hosts:--max-hosts): the minimum is above the maximum");
  if ((o.min_hosts > 0 || o.max_hosts > 0) && (!o.as_written.rdzv.empty() || o.nnodes > 1))
    throw UsageError("elastic sizes (--nnodes MIN:MAX, --min-hosts, --max-hosts) are for a launch from one dlaunch "
                     "(--hostfile, -H or an allocation), which can move and drop hosts; per-node mode (--rdzv) has a "
                     "fixed world: give --nnodes N");
  if ((o.min_hosts > 0 || o.max_hosts > 0) && o.apps.size() > 1)
    throw UsageError("--min-hosts/--max-hosts with several app contexts (':'): each context's -n is fixed, so the world cannot "
                     "shrink; drop --min-hosts");
  if ((o.min_hosts > 0 || o.max_hosts > 0) && !o.rankfile.empty())
    throw UsageError("--min-hosts/--max-hosts with --rankfile: the rankfile places every rank itself; drop one of them");
  o.restarts_given = restarts_given;  // else --spares and --min-hosts allow one restart per host they can lose (run.cc)
  if (o.spares == 0) return;
  if (o.spares < 0) throw UsageError("--spares takes a number of hosts, 0 or more, got " + std::to_string(o.spares));
  if (!o.as_written.rdzv.empty() || o.nnodes > 1)
    throw UsageError("--spares is for a launch from one dlaunch (--hostfile, -H or an allocation); per-node mode "
                     "(--rdzv, --nnodes) starts one dlaunch per node and has no hosts to hold back");
  if (!o.rankfile.empty())
    throw UsageError("--spares with --rankfile: the rankfile places every rank itself; drop one of them");
  if (!restarts_given) o.max_restarts = o.spares;
  if (restarts_given && o.max_restarts == 0)
    throw UsageError("--spares " + std::to_string(o.spares) + " with --max-restarts 0: a spare takes over only at a "
                     "restart; drop --max-restarts 0 (K spares allow K restarts) or give more");
}

void validate_per_node(RunOptions& o, bool per_node_flags) {
  if (o.display_map && !o.as_written.rdzv.empty())
    throw UsageError("--display-map with --rdzv: each node knows the whole map only once all have met; --dry-run "
                     "prints it (and starts nothing), -v names each node's ranks");
  if (o.as_written.rdzv.empty()) {
    if (per_node_flags) throw UsageError("--nnodes and --node-rank need --rdzv tcp://HOST:PORT (or --rdzv env)");
    return;
  }
  if (!o.hostfile.empty() || !o.hosts.empty())
    throw UsageError("--rdzv starts the ranks of this node only: drop --hostfile/-H (or drop --rdzv and let dlaunch "
                     "start every host over ssh)");
  if (o.np > 0) throw UsageError("with --rdzv give --nproc-per-node P, not -n (the world is nnodes x P)");
  if (o.per_node <= 0) o.per_node = 1;
  if (o.as_written.rdzv == "env") {
    if (o.nnodes < 0 || o.node_rank < -1) throw UsageError("--nnodes and --node-rank cannot be negative");
  } else {
    if (o.as_written.rdzv.rfind("tcp://", 0) != 0)
      throw UsageError("--rdzv takes tcp://HOST:PORT or env, got '" + o.as_written.rdzv + "'");
    if (o.nnodes < 1) throw UsageError("--rdzv " + o.as_written.rdzv + " needs --nnodes N (the number of nodes that meet)");
    if (o.node_rank < 0 || o.node_rank >= o.nnodes)
      throw UsageError("--node-rank must be in 0.." + std::to_string(o.nnodes - 1) + " for --nnodes " +
                       std::to_string(o.nnodes) + ", got " + std::to_string(o.node_rank));
  }
  if (o.rdzv_port <= 0 || o.rdzv_port > 65535) throw UsageError("--rdzv-port takes a port number");
  type_rdzv(o);
}

// torchrun's -r/-t/--log-dir/--local-ranks-filter. torchrun without --log-dir
// writes its files under a fresh mkdtemp directory that it names only in an
// INFO log; dlaunch asks for the directory rather than hide the output there.
void validate_torchrun_output(RunOptions& o) {
  const auto& w = o.as_written;
  o.redirects = parse_std_spec(w.redirects, "-r/--redirects"), o.tee = parse_std_spec(w.tee, "-t/--tee");
  o.console_ranks = parse_rank_list(w.local_ranks_filter, "--local-ranks-filter");
  if (o.log_dir.empty() && (o.redirects.any() || o.tee.any()))
    throw UsageError(std::string(o.redirects.any() ? "-r/--redirects " + w.redirects : "-t/--tee " + w.tee) +
                     " writes files: give --log-dir DIR (dlaunch writes each rank's stdout and stderr in a directory of the run's "
                     "own there)");
  if (!o.log_dir.empty() && !o.output_dir.empty())
    throw UsageError("give --output-filename or torchrun's --log-dir, not both");
}

// Whether a socket can bind to `a` on this host; true too when the check
// itself cannot be made (only "not this host's address" is false).
bool binds_here(const boost::asio::ip::address& a) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(sockaddr_in);
  if (a.is_v4()) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    v4->sin_family = AF_INET, v4->sin_addr.s_addr = htonl(a.to_v4().to_uint());
  } else {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    const auto bytes = a.to_v6().to_bytes();
    v6->sin6_family = AF_INET6, v6->sin6_scope_id = a.to_v6().scope_id(), len = sizeof *v6;
    std::memcpy(&v6->sin6_addr, bytes.data(), bytes.size());
  }
  const int fd = ::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0 || errno != EADDRNOTAVAIL;
  ::close(fd);
  return bound;
}

// --control-addr: an IP address of this host, which the control port binds
// to (make_address's syntax, as control/acceptor.cc reads it).
void check_control_addr(const std::string& addr) {
  if (addr.empty()) return;
  boost::system::error_code ec;
  const auto a = boost::asio::ip::make_address(addr, ec);
  if (ec)
    throw UsageError("--control-addr '" + addr + "': expected an IP address of this host that the agents can reach "
                     "(10.0.0.5, fd00::5)");
  if (!binds_here(a))
    throw UsageError("--control-addr " + addr + ": not an address of this host; give one that `ip addr` lists, "
                     "which the agents can reach");
}

// Values that an option's type takes but the job cannot use: each is refused
// by name, where it would otherwise be ignored or found out only later.
void check_given_values(const RunOptions& o, const po::variables_map& vm) {
  if (vm.count("host") && o.hosts.empty()) hostfiles::parse_host_list(o.hosts);  // throws: what -H takes
  if ((vm.count("hostfile") || vm.count("machinefile")) && o.hostfile.empty())
    throw UsageError("--hostfile needs a file name, got ''");
  if ((vm.count("npernode") || vm.count("ppn")) && o.per_node < 1)
    throw UsageError("--npernode needs at least 1 rank per node, got " + std::to_string(o.per_node));
  if (vm.count("gpus-per-node") && o.gpus_per_node < 0)
    throw UsageError("--gpus-per-node takes a number of GPUs, 0 or more (leave it out to detect them), got " +
                     std::to_string(o.gpus_per_node));
  for (const auto& x : o.exports) check_export(x, "-x");
  if (!o.apps.empty())
    for (const auto& x : o.apps[0].exports) check_export(x, "-x");  // the first context's, before its ':'
  if (!o.ssh_config.empty()) read_user_file(o.ssh_config, "--ssh-config", "give an ssh client config file (ssh -F)");
  // The job's size is known here only with -n; run.cc checks again after placement.
  check_stdin_rank(o.stdin_rank, o.np > 0 ? o.np : std::numeric_limits<int>::max());
  check_control_addr(o.control_addr);
}

// MPMD: the contexts of the command line (the first is the options' -n and
// program) or of --app FILE, checked; np becomes their sum.
void gather_app_contexts(RunOptions& o, std::vector<AppContext> more, bool np_given, const IsLongOption& is_long) {
  if (!o.app_file.empty()) {
    if (!o.command.empty())
      throw UsageError("--app " + o.app_file + " names the programs: drop '" + o.command[0] + "' from the command line");
    if (np_given) throw UsageError("with --app FILE give -n on each line of FILE, not on the command line");
    o.apps = read_app_file(o.app_file, is_long);
  } else if (!more.empty()) {
    // As mpirun and mpiexec.hydra: a -x before the first ':' belongs to the
    // first context only (--env-file, read later, stays for every rank).
    o.apps.push_back(AppContext{o.np, o.command, std::move(o.exports), ""});
    o.exports.clear();
    for (auto& c : more) o.apps.push_back(std::move(c));
  }
  if (o.apps.empty()) return;
  check_app_contexts(o.apps);
  if (!o.as_written.rdzv.empty() || o.nnodes > 1)
    throw UsageError("several app contexts (':' or --app) need one dlaunch for the whole job: drop --rdzv/--nnodes");
  o.command = o.apps[0].command;
  o.np = 0;
  for (const auto& c : o.apps) o.np += c.np;
}

// Stores the defaults below what the command line gave: a group of options
// the command line touched takes none of them (option_group). Returns those
// stored; a bad value names where it came from.
std::vector<const OptionSetting*> store_defaults(const po::options_description& desc, po::variables_map& vm,
                                                 const OptionDefaults& defaults) {
  std::vector<const OptionSetting*> stored;
  std::vector<std::string> given;  // on the command line
  for (const auto& [name, value] : vm)
    if (!value.defaulted()) given.push_back(name);
  for (const auto& s : defaults.settings) {
    const auto group = option_group(s.name);
    if (std::find_first_of(group.begin(), group.end(), given.begin(), given.end()) != group.end()) continue;
    po::parsed_options one(&desc);
    const bool takes_value = desc.find(s.name, false).semantic()->max_tokens() > 0;
    one.options.emplace_back(s.name, takes_value ? std::vector<std::string>{s.value} : std::vector<std::string>{});
    try {
      po::store(one, vm);
    } catch (const po::error& e) {
      throw UsageError(s.origin + ": " + s.name + " = " + s.value + ": " + e.what());
    }
    stored.push_back(&s);
  }
  return stored;
}

std::vector<std::string> long_names(const po::options_description& d) {
  std::vector<std::string> out;
  for (const auto& opt : d.options()) out.push_back("--" + opt->long_name());
  return out;
}
}  // namespace

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  // A near miss is a slip of a word long enough to be recognised: one edit
  // in four letters (a swap of two letters counts two), and none for names
  // of one or two letters (-c, -N: another tool's option, not a typo).
  const size_t letters = word.size() - std::min(word.find_first_not_of('-'), word.size());
  if (letters <= 2) return "";
  std::string best;
  size_t best_d = std::max<size_t>(1, letters / 4) + 1;  // that many edits or more is no near miss
  for (const auto& c : candidates) {
    std::vector<size_t> prev(c.size() + 1), cur(c.size() + 1);
    for (size_t j = 0; j <= c.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= word.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= c.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (word[i - 1] == c[j - 1] ? 0 : 1)});
      std::swap(prev, cur);
    }
    if (prev[c.size()] < best_d) best_d = prev[c.size()], best = c;
  }
  return best;
}

namespace {
// The option table (names, short names, whether they take a value) of a description.
std::vector<OptionSpec> table_of(const po::options_description& desc) {
  std::vector<OptionSpec> out;
  for (const auto& od : desc.options()) {
    std::string shortname = od->canonical_display_name(po::command_line_style::allow_dash_for_short);
    if (shortname.size() != 2 || shortname[0] != '-') shortname.clear();
    out.push_back({od->long_name(), shortname, od->semantic()->max_tokens() > 0});
  }
  return out;
}

RunOptions parse_with(RunOptions& o, const po::options_description& desc, const std::vector<std::string>& raw,
                      bool* help, const OptionDefaults& defaults);
}  // namespace

RunOptions parse_run_options(const std::vector<std::string>& raw, bool* help) {
  // One description serves the defaults' table and the parse (building it
  // is most of the launcher's option handling: docs/benchmarks.md).
  RunOptions o;
  const auto desc = describe(o);
  return parse_with(o, desc, raw, help, load_option_defaults(table_of(desc), rdzv::process_environment()));
}

namespace {
// A single-dash word that is a slip of a long option (-tag-outpt) is refused
// as one, not read as a short option with the rest as its value (-t
// ag-outpt). Never for -x and -H, whose values are free (-xNP, -Hnode1).
void refuse_near_long(const std::string& a, const po::options_description& desc) {
  const std::string typed = a.substr(0, a.find('='));
  if (typed.size() < 5 || typed[1] == 'x' || typed[1] == 'H') return;
  const std::string hint = did_you_mean("-" + typed, long_names(desc));
  if (!hint.empty()) throw UsageError("unknown option '" + typed + "'; did you mean '" + hint + "'?");
}

// The command line cut in three: dlaunch's own words (`options`, each
// habit translated into dlaunch's spelling), the program and its arguments
// (`command`), and the MPMD app contexts after the first ':' (`more`).
struct CommandLine {
  std::vector<std::string> options, command;
  std::vector<AppContext> more;
};

// Options end at "--" or at the first word that is neither an option nor
// an option's value: that word is the program, the rest are its arguments.
CommandLine split_command_line(const std::vector<std::string>& raw, const po::options_description& desc,
                               const IsLongOption& is_long) {
  CommandLine cl;
  auto& mine = cl.options;
  size_t i = 0;
  bool verbatim = false;  // a "--" ended the options: the rest is the program's, ':' included
  for (; i < raw.size(); ++i) {
    // A single-dash word that names a long option is that option (mpirun's
    // -tag-output, -np=2), before any short option is read from it.
    std::string a = dlaunch_spelling(raw[i], is_long);
    if (a == "--") { ++i, verbatim = true; break; }
    if (a.size() < 2 || a[0] != '-') break;
    if (translate_habit(a, raw, i, mine)) continue;
    if (a[1] != '-') refuse_near_long(a, desc);
    mine.push_back(a);
    std::string name = a.substr(a.find_first_not_of('-'));
    if (name.find('=') != std::string::npos) continue;
    if (a[1] != '-' && a.size() > 2) continue;  // -n4: value attached
    // Short options are looked up as "-n", long ones by their bare name.
    const po::option_description* od = desc.find_nothrow(a[1] == '-' ? name : a, false);
    if (od && od->semantic()->max_tokens() > 0 && i + 1 < raw.size()) mine.push_back(raw[++i]);
  }
  // MPMD: an argument that is exactly ':' starts the next app context.
  size_t end = i;
  while (end < raw.size() && (verbatim || raw[end] != kAppSeparator)) ++end;
  cl.command.assign(raw.begin() + static_cast<long>(i), raw.begin() + static_cast<long>(end));
  if (end < raw.size()) {
    if (cl.command.empty())
      throw UsageError("app context 1: expected a program before ':' (write: dlaunch -n 1 ./server : -n 4 ./worker)");
    if (end + 1 == raw.size())
      throw UsageError("expected an app context after the last ':' (write: ... : -n 2 ./worker ARGS), got the end of "
                       "the command line");
    cl.more = parse_app_contexts(raw, end + 1, 2, /*one_context=*/false, is_long);
  }
  return cl;
}

// The options into `o` (through `desc`), with the defaults of config files
// and variables below them (`stored`: those that took effect).
po::variables_map store_options(RunOptions& o, const po::options_description& desc,
                                const std::vector<std::string>& options, const std::vector<std::string>& raw,
                                const OptionDefaults& defaults, std::vector<const OptionSetting*>& stored) {
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(options).options(desc).style(po::command_line_style::unix_style).run(), vm);
    stored = store_defaults(desc, vm, defaults);
    for (const auto* s : stored) if (s->name == "hostfile") o.hostfile_origin = s->origin;
    po::notify(vm);
  } catch (const po::unknown_option& e) {
    std::string hint = did_you_mean(e.get_option_name(), long_names(desc));
    if (typed_with_underscores(e.get_option_name(), raw))
      std::replace(hint.begin() + std::min<size_t>(2, hint.size()), hint.end(), '-', '_');
    throw UsageError("unknown option '" + e.get_option_name() + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return vm;
}

// Flags that switch a mode off: each refused beside its opposite.
void negated_flags(RunOptions& o, const po::variables_map& vm) {
  if (vm.count("no-gpu-bind") && vm.count("gpu-bind") && o.as_written.gpu_bind != "none")
    throw UsageError("--no-gpu-bind contradicts --gpu-bind " + o.as_written.gpu_bind + "; give one of them");
}

void output_flags(RunOptions& o, const po::variables_map& vm) {
  if (vm.count("output-pty") && vm.count("no-output-pty"))
    throw UsageError("give --output-pty or --no-output-pty, not both");
  if (vm.count("no-output-pty")) o.output_pty = false;
}

// The program and the job's size.
void check_program(const RunOptions& o, const po::variables_map& vm) {
  if (o.command.empty() && !o.dry_run) throw UsageError("no program given; try: dlaunch -n 4 ./app");
  if (vm.count("np") && o.np < 1) throw UsageError("-n needs a positive number of ranks, got " + std::to_string(o.np));
}

// Counts of resources and helpers, and the start method's name.
void check_counts(const RunOptions& o) {
  if (o.gpus_per_rank < 1) throw UsageError("--gpus-per-rank needs at least 1");
  if (o.cpus_per_rank < 1) throw UsageError("--cpus-per-rank needs at least 1");
  // The method itself (auto, slurm) is resolved where the environment is read (run.cc).
  if (const auto names = remote::start_method_names(); std::find(names.begin(), names.end(), o.as_written.launcher) == names.end())
    remote::resolve_start_method(o.as_written.launcher, "");  // throws, naming every method
  if (o.ssh_parallel < 1) throw UsageError("--ssh-parallel needs at least 1");
  if (o.fanout < 0 || o.fanout == 1)
    throw UsageError("--fanout " + std::to_string(o.fanout) +
                     ": give 0 (every agent started by dlaunch) or at least 2 (agents the launcher and each agent start)");
  if (o.cpus_per_rank != 1 && o.bind_to != hostfiles::CpuBind::kCore && o.bind_to != hostfiles::CpuBind::kHwthread)
    throw UsageError("--cpus-per-rank needs --bind-to core or hwthread");
}

// The ranks per node: --npernode/--ppn (mpirun's, Hydra's) or torchrun's
// --nproc-per-node N|gpu|cpu|auto; which of them was given names the fix in
// later messages.
void ranks_per_node(RunOptions& o, const po::variables_map& vm) {
  if (vm.count("npernode") || vm.count("ppn")) o.per_node_flag = vm.count("ppn") ? "--ppn" : "--npernode";
  if (!vm.count("nproc-per-node")) return;
  o.per_node_flag = "--nproc-per-node";
  const std::string v = vm["nproc-per-node"].as<std::string>();
  if (auto kind = std::find_if(kNproc.begin(), kNproc.end(), [&](const auto& c) { return c.first == v; });
      kind != kNproc.end())
    o.nproc_per_node_kind = kind->second;
  else if (!v.empty() && v.size() < 7 && v.find_first_not_of("0123456789") == std::string::npos && std::stoi(v) > 0)
    o.per_node = std::stoi(v);
  else throw UsageError("--nproc-per-node takes a number of ranks, or gpu, cpu or auto, got '" + v + "'");
}

// torchrun's program options and --standalone.
void torchrun_program(RunOptions& o) {
  if (o.module && o.no_python) throw UsageError("give --module or --no-python, not both");
  validate_torchrun_output(o);
  if (o.standalone && (!o.as_written.rdzv.empty() || !o.hostfile.empty() || !o.hosts.empty() || o.nnodes > 1))
    throw UsageError("--standalone runs one node on this machine: drop --rdzv, --hostfile/-H and --nnodes");
}

// Every rank's exports in the order they apply: --env-file's lines, then
// the command line's -x (which win over them); --export-all's '*' first,
// below every named value, whatever ':' says.
void gather_exports(RunOptions& o) {
  if (!o.env_file.empty()) {
    auto lines = read_env_file(o.env_file);
    lines.insert(lines.end(), o.exports.begin(), o.exports.end());
    o.exports = std::move(lines);
  }
  if (o.export_all) o.exports.insert(o.exports.begin(), "*");
}

// Per-node mode: --rdzv, or torchrun's spelling of it; it serves no MPI.
void per_node_mode(RunOptions& o, const po::variables_map& vm) {
  torchrun_rendezvous(o, vm.count("master-port") > 0);
  // --nnodes 1 (torchrun's default, often written out) needs no rendezvous.
  validate_per_node(o, (vm.count("nnodes") > 0 && o.nnodes != 1) || (vm.count("node-rank") > 0 && o.node_rank != 0));
  if (o.rdzv != RdzvMode::kNone && (o.mpi == MpiMode::kPmix || o.mpi == MpiMode::kPmi))
    throw UsageError(std::string("--mpi ") + to_string(o.mpi) + " with --rdzv: per-node mode serves no MPI (its nodes meet at a store, with "
                     "no MPI fences between them); start an MPI program from one dlaunch with --hostfile or -H (or "
                     "inside a Slurm allocation), or use --mpi none for programs that do not call MPI_Init");
}

// Parses into `o`, which `desc` (describe(o)) writes to: the command line
// cut into dlaunch's words and the program's, stored over the defaults,
// then each group of options checked and typed in turn. What the user
// wrote stays in o.as_written for the messages.
RunOptions parse_over(RunOptions& o, const po::options_description& desc, const std::vector<std::string>& raw,
                      bool* help, const OptionDefaults& defaults, std::vector<const OptionSetting*>& stored) {
  const IsLongOption is_long = [&](const std::string& name) { return desc.find_nothrow(name, false) != nullptr; };
  CommandLine cl = split_command_line(raw, desc, is_long);
  o.command = std::move(cl.command);
  const po::variables_map vm = store_options(o, desc, cl.options, raw, defaults, stored);
  *help = vm.count("help") > 0;
  negated_flags(o, vm);
  o.version = vm.count("version") > 0;
  if (o.version) return o;
  output_flags(o, vm);
  if (*help) return o;
  gather_app_contexts(o, std::move(cl.more), vm.count("np") > 0, is_long);
  check_program(o, vm);
  type_modes(o, vm, mpirun_values(o, vm));
  if (o.max_restarts < 0) throw UsageError("--max-restarts takes a number of restarts, 0 or more");
  check_spares(o, vm.count("max-restarts") > 0);
  check_given_values(o, vm);
  check_counts(o);
  ranks_per_node(o, vm);
  torchrun_program(o);
  gather_exports(o);
  per_node_mode(o, vm);
  return o;
}
}  // namespace

namespace {
// `message` with each option the user spelt with underscores (torchrun's
// --max_restarts) spelt so again where it names the dash form.
std::string as_typed(std::string message, const std::vector<std::string>& raw) {
  for (const auto& word : raw) {
    if (word == "--") break;
    const std::string typed = word.substr(0, word.find('='));
    if (typed.rfind("--", 0) != 0 || typed.find('_') == std::string::npos) continue;
    const std::string dashed = normalize(typed);
    for (size_t at = message.find(dashed); at != std::string::npos; at = message.find(dashed, at + typed.size())) {
      const size_t after = at + dashed.size();
      if (after < message.size() && (std::isalnum(static_cast<unsigned char>(message[after])) || message[after] == '-'))
        continue;
      message.replace(at, dashed.size(), typed);
    }
  }
  return message;
}

RunOptions parse_with(RunOptions& o, const po::options_description& desc, const std::vector<std::string>& raw,
                      bool* help, const OptionDefaults& defaults) {
  std::vector<const OptionSetting*> stored;
  try {
    try {
      return parse_over(o, desc, raw, help, defaults, stored);
    } catch (const UsageError& e) {
      throw UsageError(as_typed(e.what(), raw));
    }
  } catch (const UsageError& e) {
    if (stored.empty()) throw;
    std::string note = " (option defaults in effect:";
    for (const auto* s : stored) note += " " + s->name + " = " + s->value + " from " + s->origin + ";";
    note.back() = ')';
    throw UsageError(e.what() + note);
  }
}
}  // namespace

RunOptions parse_run_options(const std::vector<std::string>& raw, bool* help, const OptionDefaults& defaults) {
  RunOptions o;
  const auto desc = describe(o);
  return parse_with(o, desc, raw, help, defaults);
}

std::vector<std::string> program_argv(const RunOptions& o, const std::string& python) {
  return program_argv(o, o.command, python);
}

std::vector<std::string> program_argv(const RunOptions& o, const std::vector<std::string>& command,
                                      const std::string& python) {
  std::vector<std::string> argv = command;
  if (argv.empty() || o.no_python) return argv;
  auto ends_py = [](const std::string& p) { return p.size() > 3 && p.compare(p.size() - 3, 3, ".py") == 0; };
  if (o.module) argv.insert(argv.begin(), {python, "-m"});
  else if (ends_py(argv[0])) argv.insert(argv.begin(), python);
  return argv;
}

int resolve_nproc_per_node(NprocKind kind, int gpus, int cores) {
  if (kind == NprocKind::kGpu) {
    if (gpus < 1)
      throw UsageError("--nproc-per-node gpu: this host has no GPUs (none in CUDA_VISIBLE_DEVICES nor from the "
                       "driver); give a number, or cpu");
    return gpus;
  }
  if (kind == NprocKind::kCpu) return cores > 0 ? cores : 1;
  return gpus > 0 ? gpus : 1;  // auto (a number never comes here)
}

void check_stdin_rank(int rank, int world_size) {
  if (rank >= world_size)
    throw UsageError("--stdin " + std::to_string(rank) + ": the job has ranks 0 to " + std::to_string(world_size - 1) +
                     "; give one of them, or none");
}

void check_console_ranks(const std::vector<int>& ranks, const std::string& typed, int world_size) {
  for (int r : ranks)
    if (r >= world_size)
      throw UsageError("--local-ranks-filter " + typed + ": rank " + std::to_string(r) + " is not in the job, which " +
                       "has ranks 0 to " + std::to_string(world_size - 1) +
                       " (the filter takes global ranks); give some of them, or leave the option out");
}

bool is_env_name(std::string_view name) {
  auto name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  return !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
         std::all_of(name.begin(), name.end(), name_char);
}

void check_export(const std::string& entry, const std::string& where) {
  const size_t eq = entry.find('=');
  std::string_view name(entry.data(), eq == std::string::npos ? entry.size() : eq);
  if (eq == std::string::npos && !name.empty() && name.back() == '*') name.remove_suffix(1);  // PREFIX*
  const bool prefix_only = eq == std::string::npos && entry.size() > name.size();
  if (is_env_name(name) || (prefix_only && name.empty())) return;
  throw UsageError(where + ": expected VAR, VAR=value or 'PREFIX*', VAR of letters, digits and _ not starting with "
                   "a digit, got '" + entry.substr(0, 80) + "'");
}

std::vector<std::string> read_env_file(const std::string& path) {
  const std::string text = read_user_file(path, "--env-file", "give a file of NAME=value lines").text;
  std::vector<std::string> out;
  std::istringstream f(text);
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    line = line.substr(first);
    const size_t eq = line.find('=');
    if (eq == std::string::npos || !is_env_name(std::string_view(line).substr(0, eq)))
      throw UsageError(path + ":" + std::to_string(n) + ": expected NAME=value (NAME of letters, digits and _), got '" +
                       line.substr(0, 80) + "'");
    out.push_back(line);
  }
  return out;
}

std::string run_options_help() {
  try {
    return run_options_help(load_option_defaults(run_option_table(), rdzv::process_environment()));
  } catch (const Error& e) {
    return run_options_help(OptionDefaults{}) + "  error: " + e.what() + "\n";
  }
}

std::string run_options_help(const OptionDefaults& defaults) {
  RunOptions o;
  std::string bad;
  try {  // the defaults into o, so that each option shows its value
    auto desc = describe(o);
    po::variables_map vm;
    store_defaults(desc, vm, defaults);
    po::notify(vm);
  } catch (const std::exception& e) {
    o = RunOptions{};
    bad = std::string("  error: ") + e.what() + "\n";
  }
  std::ostringstream s;
  s << "usage: dlaunch [run] [options] PROGRAM [ARGS...]\n"
       "       dlaunch [run] [options] -n N PROGRAM [ARGS...] : -n N [-x VAR] [--wdir DIR] PROGRAM [ARGS...]  (MPMD)\n\n"
    << describe(o, /*help=*/true)
    << describe_defaults(defaults) << bad;
  return s.str();
}

const std::vector<OptionWords>& option_words() {
  static const std::vector<OptionWords> table = {
      {"mpi", words_of(kMpi)},
      {"bind-to", words_of(kBindTo)},
      {"gpu-bind", words_of(kGpuBind)},
      {"gpu-vendor", gpu_vendor_words()},
      {"map-by", {"slot", "node", "core", "hwthread", "ppr:"}},  // ppr:N:node, ppr:N:socket (checked where they are read)
      {"nproc-per-node", words_of(kNproc)},
      {"stdin", {"0", "none"}},  // or any rank
      {"start-method", {"spawn", "fork", "forkserver"}},
      {"rdzv-backend", {"c10d", "static"}},
      {"torch-store", words_of(kTorchStore)},
      {"cpu-bind", words_of(kSrunCpuBind)},
  };
  return table;
}

const char* to_string(MpiMode mode) {
  for (const auto& [word, value] : kMpi)
    if (value == mode) return word.c_str();
  return "?";
}

std::vector<OptionSpec> run_option_table() {
  RunOptions o;
  return table_of(describe(o));
}

}  // namespace dl::launcher
