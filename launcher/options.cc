#include "launcher/options.h"

#include <boost/program_options.hpp>
#include <sstream>

#include "errors/error.h"

namespace po = boost::program_options;

namespace dl::launcher {

namespace {
po::options_description describe(RunOptions& o) {
  po::options_description d("dlaunch [run] options");
  d.add_options()
    ("help,h", "show this help")
    ("np,n", po::value(&o.np), "number of ranks (-np works too)")
    ("hostfile", po::value(&o.hostfile), "hostfile (OpenMPI, MPICH or DeepSpeed format)")
    ("machinefile", po::value(&o.hostfile), "alias of --hostfile")
    ("host,H", po::value(&o.hosts), "host list: h1:2,h2:2,node[01-04]")
    ("map-by", po::value(&o.map_by), "slot (fill each host) or node (round-robin)")
    ("npernode", po::value(&o.per_node), "ranks per node")
    ("ppn", po::value(&o.per_node), "alias of --npernode")
    ("nproc-per-node", po::value(&o.per_node), "alias of --npernode (torchrun's name)")
    ("oversubscribe", po::bool_switch(&o.oversubscribe), "allow more ranks than slots")
    ("dry-run", po::bool_switch(&o.dry_run), "print the rank map and exit")
    ("display-map", "alias of --dry-run")  // a second bool_switch on dry_run would reset it
    ("x,x", po::value(&o.exports)->composing(), "export VAR (or VAR=value) to every rank (-x)")
    ("wdir", po::value(&o.wdir), "working directory of the ranks")
    ("gpus-per-node", po::value(&o.gpus_per_node), "GPUs per host (default: detect)")
    ("gpus-per-rank", po::value(&o.gpus_per_rank), "consecutive GPUs each rank gets")
    ("no-gpu-bind", "do not set CUDA_VISIBLE_DEVICES")
    ("bind-to", po::value(&o.bind_to), "pin ranks to CPUs: none, core or numa (by local rank)")
    ("cpus-per-rank", po::value(&o.cpus_per_rank), "cores each rank gets with --bind-to core")
    ("mpi", po::value(&o.mpi), "pmix, none or auto (pmix when the agents have libpmix)")
    ("fence-timeout", po::value(&o.fence_timeout_s), "seconds an MPI fence across hosts may take")
    ("tag-output", po::bool_switch(&o.tag_output), "prefix lines with [rank@host]")
    ("timestamp-output", po::bool_switch(&o.timestamp_output), "prefix lines with the time")
    ("output-filename", po::value(&o.output_dir), "write DIR/rank.N/{stdout,stderr}")
    ("stdin", po::value(&o.stdin_target), "rank that reads dlaunch's stdin, or none")
    ("verbose,v", po::bool_switch(&o.verbose), "say what dlaunch does")
    ("kill-grace", po::value(&o.kill_grace_s), "seconds between SIGTERM and SIGKILL on teardown")
    ("timeout", po::value(&o.timeout_s), "stop the job after this many seconds")
    ("heartbeat-timeout", po::value(&o.heartbeat_timeout_s), "seconds of silence before an agent counts as lost")
    ("agent-timeout", po::value(&o.agent_timeout_s), "seconds to wait for agents to connect")
    ("prefix", po::value(&o.prefix), "install prefix of dlaunch on remote hosts (DIR/bin/dlaunch-agent)")
    ("control-addr", po::value(&o.control_addr), "address agents connect back to")
    ("ssh-parallel", po::value(&o.ssh_parallel), "ssh sessions opened at once")
    ("ssh-accept-new", po::bool_switch(&o.ssh_accept_new), "accept unknown host keys (never changed ones)")
    ("ssh-config", po::value(&o.ssh_config), "ssh client config file (like ssh -F)")
    ("ssh-timeout", po::value(&o.ssh_timeout_s), "ssh connect timeout per host, seconds")
    ("nnodes", po::value(&o.nnodes), "per-node mode: number of nodes that meet at --rdzv")
    ("node-rank", po::value(&o.node_rank), "per-node mode: this node's rank (0..nnodes-1)")
    ("rdzv", po::value(&o.rdzv), "per-node mode: tcp://HOST:PORT, or env (Slurm, mpirun, PMI)")
    ("rdzv-port", po::value(&o.rdzv_port), "the store's port with --rdzv env")
    ("rdzv-id", po::value(&o.rdzv_id), "job name at a shared store (default: SLURM_JOB_ID or 'default')")
    ("rdzv-timeout", po::value(&o.rdzv_timeout_s), "seconds to wait for every node to arrive")
    ("token-file", po::value(&o.token_file), "file holding the job token shared by all nodes");
  return d;
}

// mpirun spellings that Program_options would not take as they are.
std::string normalize(const std::string& a) {
  if (a == "-np" || a == "-npernode" || a == "-ppn" || a == "-hostfile" || a == "-machinefile" || a == "-host" ||
      a == "-wdir" || a == "-oversubscribe")
    return "-" + a;
  return a;
}

// Per-node mode: --rdzv names it; the hostfile options do not mix with it.
void validate_per_node(RunOptions& o, bool per_node_flags) {
  if (o.rdzv.empty()) {
    if (per_node_flags) throw UsageError("--nnodes and --node-rank need --rdzv tcp://HOST:PORT (or --rdzv env)");
    return;
  }
  if (!o.hostfile.empty() || !o.hosts.empty())
    throw UsageError("--rdzv starts the ranks of this node only: drop --hostfile/-H (or drop --rdzv and let dlaunch "
                     "start every host over ssh)");
  if (o.np > 0) throw UsageError("with --rdzv give --nproc-per-node P, not -n (the world is nnodes x P)");
  if (o.per_node <= 0) o.per_node = 1;
  if (o.rdzv == "env") {
    if (o.nnodes < 0 || o.node_rank < -1) throw UsageError("--nnodes and --node-rank cannot be negative");
  } else {
    if (o.rdzv.rfind("tcp://", 0) != 0)
      throw UsageError("--rdzv takes tcp://HOST:PORT or env, got '" + o.rdzv + "'");
    if (o.nnodes < 1) throw UsageError("--rdzv " + o.rdzv + " needs --nnodes N (the number of nodes that meet)");
    if (o.node_rank < 0 || o.node_rank >= o.nnodes)
      throw UsageError("--node-rank must be in 0.." + std::to_string(o.nnodes - 1) + " for --nnodes " +
                       std::to_string(o.nnodes) + ", got " + std::to_string(o.node_rank));
  }
  if (o.rdzv_timeout_s <= 0) throw UsageError("--rdzv-timeout takes positive seconds");
  if (o.rdzv_port <= 0 || o.rdzv_port > 65535) throw UsageError("--rdzv-port takes a port number");
}

std::vector<std::string> long_names(const po::options_description& d) {
  std::vector<std::string> out;
  for (const auto& opt : d.options()) out.push_back("--" + opt->long_name());
  return out;
}
}  // namespace

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = 3;  // more than 2 edits away is no near miss
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

RunOptions parse_run_options(const std::vector<std::string>& raw, bool* help) {
  RunOptions o;
  auto desc = describe(o);
  // Options end at "--" or at the first word that is neither an option nor
  // an option's value: that word is the program, the rest are its arguments.
  std::vector<std::string> mine;
  size_t i = 0;
  for (; i < raw.size(); ++i) {
    std::string a = normalize(raw[i]);
    if (a == "--") { ++i; break; }
    if (a.size() < 2 || a[0] != '-') break;
    mine.push_back(a);
    std::string name = a.substr(a.find_first_not_of('-'));
    if (name.find('=') != std::string::npos) continue;
    if (a[1] != '-' && a.size() > 2) continue;  // -n4: value attached
    // Short options are looked up as "-n", long ones by their bare name.
    const po::option_description* od = desc.find_nothrow(a[1] == '-' ? name : a, false);
    if (od && od->semantic()->max_tokens() > 0 && i + 1 < raw.size()) mine.push_back(raw[++i]);
  }
  o.command.assign(raw.begin() + static_cast<long>(i), raw.end());
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(mine).options(desc).style(po::command_line_style::unix_style).run(), vm);
    po::notify(vm);
  } catch (const po::unknown_option& e) {
    std::string hint = did_you_mean(e.get_option_name(), long_names(desc));
    throw UsageError("unknown option '" + e.get_option_name() + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  *help = vm.count("help") > 0;
  if (vm.count("no-gpu-bind")) o.gpu_bind = false;
  if (vm.count("display-map")) o.dry_run = true;
  if (*help) return o;
  if (o.command.empty() && !o.dry_run) throw UsageError("no program given; try: dlaunch -n 4 ./app");
  if (vm.count("np") && o.np < 1) throw UsageError("-n needs a positive number of ranks, got " + std::to_string(o.np));
  if (o.map_by != "slot" && o.map_by != "node") throw UsageError("--map-by takes 'slot' or 'node', got '" + o.map_by + "'");
  if (o.mpi != "auto" && o.mpi != "pmix" && o.mpi != "none") throw UsageError("--mpi takes pmix, none or auto, got '" + o.mpi + "'");
  if (o.stdin_target != "none" && o.stdin_target.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError("--stdin takes a rank number or 'none', got '" + o.stdin_target + "'");
  if (o.kill_grace_s < 0 || o.timeout_s < 0 || o.heartbeat_timeout_s <= 0 || o.agent_timeout_s <= 0 ||
      o.fence_timeout_s <= 0)
    throw UsageError("--kill-grace, --timeout, --heartbeat-timeout, --agent-timeout and --fence-timeout take positive seconds");
  if (o.gpus_per_rank < 1) throw UsageError("--gpus-per-rank needs at least 1");
  if (o.bind_to != "none" && o.bind_to != "core" && o.bind_to != "numa")
    throw UsageError("--bind-to takes none, core or numa, got '" + o.bind_to + "'");
  if (o.cpus_per_rank < 1) throw UsageError("--cpus-per-rank needs at least 1");
  if (o.cpus_per_rank != 1 && o.bind_to != "core") throw UsageError("--cpus-per-rank needs --bind-to core");
  validate_per_node(o, vm.count("nnodes") > 0 || vm.count("node-rank") > 0);
  return o;
}

std::string run_options_help() {
  RunOptions o;
  std::ostringstream s;
  s << "usage: dlaunch [run] [options] PROGRAM [ARGS...]\n\n" << describe(o);
  return s.str();
}

}  // namespace dl::launcher
