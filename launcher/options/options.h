#pragma once
// The `dlaunch [run]` command line, parsed once into RunOptions. Nothing else
// reads argv. Every default is written here.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostfiles/binding.h"
#include "hostfiles/placement.h"
#include "launcher/options/app_context.h"
#include "launcher/options/habits.h"
#include "launcher/options/option_sources.h"
#include "launcher/options/std_spec.h"
#include "machine/gpu_vendor.h"
#include "remote/start_method.h"

namespace dl::launcher {

// --mpi: auto = PMI, and PMIx when every agent has libpmix (docs/mpi.md).
enum class MpiMode { kAuto, kPmix, kPmi, kNone };
// --torch-store: the launcher serves torch's c10d store, or rank 0's torch hosts it.
enum class TorchStoreMode { kServed, kRank0 };
// --nproc-per-node's words (a number is per_node): counted on this host (run.cc).
enum class NprocKind { kNumber, kGpu, kCpu, kAuto };
const char* to_string(MpiMode mode);

// Per-node mode (launcher/node_group.h): where the nodes meet, if they do.
enum class RdzvMode { kNone, kTcp, kEnv };

// --stdin none: no rank reads dlaunch's stdin.
inline constexpr int kNoStdin = -1;

struct RunOptions {
  // Placement.
  int np = 0;                    // -n/-np; 0 = one rank per slot (or 1 with no hostfile)
  std::string hostfile;          // --hostfile/--machinefile
  std::string hostfile_origin;   // where a hostfile default came from ("env DLAUNCH_HOSTFILE"); "" = the command line
  std::string hosts;             // -H/--host list
  hostfiles::MapBy map_by = hostfiles::MapBy::kSlot;  // --map-by slot|node (ppr:N:... set per_node)
  int per_node = 0;              // --npernode/--ppn/--nproc-per-node
  std::string per_node_flag = "-n";  // the one of those the user typed, for hints ("-n" when none)
  bool oversubscribe = false;    // --oversubscribe
  bool dry_run = false;          // --dry-run: print the rank map and exit
  bool display_map = false;      // --display-map (mpirun's): print the rank map, then run the job
  // Environment.
  std::vector<std::string> exports;  // -x VAR, -x VAR=value or -x 'PREFIX*'; --env-file lines come first; --export-all is '*'
  bool export_all = false;           // --export-all: -x '*' for every rank (below --env-file and -x)
  std::string env_file;              // --env-file FILE: NAME=value lines for every rank
  std::string wdir;                  // --wdir; "" = the launcher's cwd
  int gpus_per_node = -1;            // --gpus-per-node; -1 = detect per host
  int gpus_per_rank = 1;             // --gpus-per-rank
  hostfiles::CpuBind bind_to = hostfiles::CpuBind::kNone;  // --bind-to; none with --rankfile (the rankfile pins)
  int per_socket = 0;                // --map-by ppr:N:socket: N (per_node is N x this machine's sockets)
  int sockets_per_node = 0;          // with per_socket: the sockets every host must have (this machine's)
  bool use_hwthread_cpus = false;    // mpirun's --use-hwthread-cpus: --bind-to core pins hardware threads
  bool merge_stderr = false;         // --merge-stderr-to-stdout
  std::string rankfile;              // --rankfile FILE (mpirun's): rank -> host and CPUs
  int cpus_per_rank = 1;             // --cpus-per-rank (cores each rank gets with --bind-to core)
  // --gpu-bind (hostfiles/binding.h, plan_gpus); none (--gpu-bind none,
  // --no-gpu-bind): the agents do not even detect GPUs.
  hostfiles::GpuBind gpu_bind_mode = hostfiles::GpuBind::kVisible;
  std::optional<machine::GpuVendor> gpu_vendor;  // --gpu-vendor nvidia|amd|intel; nullopt = the first a host has (nvidia, amd, intel)
  bool oversubscribe_gpus = false;   // --oversubscribe-gpus: more ranks x --gpus-per-rank than GPUs share them
  bool report_bindings = false;      // --report-bindings: each rank's GPUs and CPUs on stderr at start-up
  MpiMode mpi = MpiMode::kAuto;      // --mpi pmix|pmi|none|auto
  double fence_timeout_s = 60;       // --fence-timeout: an MPI fence across hosts must complete within it
  // Output.
  bool tag_output = false;        // --tag-output: "[rank@host] " before each line
  bool timestamp_output = false;  // --timestamp-output
  std::string output_dir;         // --output-filename DIR: DIR/rank.N/{stdout,stderr}
  int stdin_rank = 0;               // --stdin 0|none: which rank gets dlaunch's stdin; kNoStdin: none
  TorchStoreMode torch_store = TorchStoreMode::kServed;  // --torch-store served|rank0: who hosts torch's c10d store (MASTER_PORT)
  bool output_pty = true;         // --output-pty (default) / --no-output-pty: each rank's stdout a pseudo-terminal
  bool verbose = false;           // -v/--verbose
  // Lifecycle.
  double kill_grace_s = 3.0;        // --kill-grace: SIGTERM -> SIGKILL delay on teardown
  double timeout_s = 0;             // --timeout: whole-job bound, 0 = none
  std::string timeout_from = "--timeout";  // what set it, for the verdict: --timeout or MPIEXEC_TIMEOUT
  // Where every rank is stuck (docs/hangs.md): collected on --timeout and SIGQUIT.
  double stack_timeout_s = 10;      // --stack-timeout: bound of each collection; 0 = collect none
  std::string report_dir;           // --report-dir: the full stacks; "" = a new temp dir, named and kept
  std::string report_json;          // --report-json FILE: the latest report as JSON there too
  double heartbeat_timeout_s = 10;  // --heartbeat-timeout
  double agent_timeout_s = 30;      // --agent-timeout: wait for agents to connect
  int max_restarts = 0;             // --max-restarts (torchrun's --max_restarts): failed attempts retried (docs/failures.md)
  // --spares K: the last K hosts hold no ranks; a lost host's ranks move to
  // one of them at the next attempt (docs/failures.md, "Spares"). Without
  // --max-restarts, K restarts are allowed: a spare replaces a host only
  // at a restart.
  int spares = 0;
  // --min-hosts N (torchrun's --nnodes MIN:MAX): a lost host with no spare
  // for it leaves the job, which goes on with the hosts that remain while at
  // least N do: WORLD_SIZE shrinks and the ranks are numbered again
  // (docs/failures.md, "A shrinking world"). 0: a lost host must come back.
  int min_hosts = 0;
  // --max-hosts N (torchrun's --nnodes MIN:MAX): at most N hosts take
  // ranks; those after them wait as spares. 0: every host but --spares'.
  int max_hosts = 0;
  // --return-cooldown S: a host the job stopped using (lost, swapped out,
  // failed the health gate) is tried again after S seconds, doubling with
  // each of its losses up to 32 x S, and comes back as a spare once it
  // passes the health gate (docs/failures.md, "A lost host comes back").
  // 0: it never comes back, as Horovod's blacklist without a cooldown.
  double return_cooldown_s = 0;
  // --health-check CMD: every host runs it (/bin/sh -c, DLAUNCH_HOST set)
  // before it takes ranks; a host where it fails takes none (docs/failures.md).
  std::string health_check;
  double health_timeout_s = 60;  // --health-timeout: its bound on each host
  // --clock-threshold S: in the health gate, a host whose wall clock is
  // surely more than S off the launcher's fails (0: clocks not judged).
  double clock_threshold_s = 1;
  bool restarts_given = false;  // --max-restarts was given (not implied by --spares/--min-hosts)
  // Remote hosts.
  std::string prefix;               // --prefix DIR holding bin/dlaunch-agent
  std::string control_addr;         // --control-addr: address agents connect back to
  int ssh_parallel = 32;            // --ssh-parallel
  // --fanout F: with more hosts to start than F (libssh, ssh, sim), the
  // launcher starts F agents and they start the rest, a tree of at most F
  // children per agent (launcher/launch_tree.h); 0: every agent from here.
  int fanout = 32;
  bool ssh_accept_new = false;      // --ssh-accept-new
  bool preflight = false;           // --preflight: the doctor's per-host checks first (doctor/preflight.h, run by the cli)
  // The hosts that failed --preflight (host -> what failed), given by the
  // cli (run_command): each fails the health gate as its agent says hello,
  // so with --spares a spare takes its seat before the launch (Job::check_health).
  std::map<std::string, std::string> preflight_failed;
  std::string ssh_config;           // --ssh-config FILE (like ssh -F)
  double ssh_timeout_s = 10;        // --ssh-timeout: connect timeout per host
  // --launcher (remote/start_method.h) resolved: run.cc sets it from
  // as_written.launcher (auto: slurm inside a Slurm job, else libssh) before
  // any job is made.
  remote::StartMethod launcher = remote::StartMethod::kLibssh;
  std::string launcher_exec;        // --launcher-exec: the program in place of srun/ssh, e.g. /opt/slurm/bin/srun
  // Per-node mode (torchrun's shape, for batch systems): this dlaunch is one
  // of nnodes, meeting the others at a store (docs/dlaunch.md, "Per-node launch").
  int nnodes = 0;                   // --nnodes; 0 = not per-node mode
  int node_rank = -1;               // --node-rank; -1 = from the environment (--rdzv env)
  RdzvMode rdzv = RdzvMode::kNone;  // --rdzv tcp://HOST:PORT | env: per-node mode, where the nodes meet
  std::string rdzv_host;            // --rdzv tcp://HOST:PORT's host
  int rdzv_port = 29400;            // the store's port: --rdzv tcp://'s, or --rdzv-port with --rdzv env
  std::string rdzv_id;              // --rdzv-id: names this job at a shared store
  double rdzv_timeout_s = 300;      // --rdzv-timeout: wait for every node to arrive
  std::string token_file;           // --token-file: the shared job token (else DLAUNCH_TOKEN)
  // torchrun's spellings (docs/dlaunch.md, "torchrun's command line"); its
  // underscores (--nproc_per_node) are read as dashes.
  NprocKind nproc_per_node_kind = NprocKind::kNumber;  // --nproc-per-node gpu|cpu|auto, resolved on this host (run.cc)
  std::string master_addr;          // --master-addr: with --nnodes > 1, the nodes meet at tcp://ADDR:--master-port
  int master_port = 0;              // --master-port; 0 = torchrun's 29500
  std::string rdzv_endpoint;        // --rdzv-endpoint HOST[:PORT] (port 29400): --rdzv tcp://HOST:PORT
  std::string rdzv_backend;         // --rdzv-backend c10d|static: accepted; dlaunch's own store serves both
  std::string role = "default";     // --role NAME: the ranks' ROLE_NAME
  bool standalone = false;          // --standalone: one node, this machine
  bool module = false;              // -m/--module: the program is a Python module (python3 -m PROGRAM)
  bool no_python = false;           // --no-python: run PROGRAM as it is, even a .py
  bool version = false;             // --version
  // torchrun's output options (launcher/options/std_spec.h; routed by output_sink.h).
  std::string log_dir;              // --log-dir DIR: the files -r/-t write (a directory per run and attempt)
  StdSpec redirects;                // -r/--redirects 0-3 or LOCAL_RANK:0-3,..: those streams to files only
  StdSpec tee;                      // -t/--tee, same values: those streams to files and the console
  std::vector<int> console_ranks;   // --local-ranks-filter 0,2: only these (global) ranks on the console; empty = all
  // The interpreter dlaunch runs a .py PROGRAM (or --module) under
  // (python3, $PYTHON), set when it did; "" for any other program.
  std::string interpreter;
  // The program and its arguments (the first app context's, with MPMD).
  std::vector<std::string> command;
  // MPMD (launcher/options/app_context.h): every app context, in rank order, when the
  // command line has ':' or --app FILE; np is then their sum and command the
  // first's. Empty for a job of one program.
  std::vector<AppContext> apps;
  std::string app_file;             // --app FILE: one app context per line
  // The modes above as the command line, a config file or a variable wrote
  // them (in dlaunch's spelling: launcher/options/habits.h): read by
  // parse_run_options, which types them (every later reader uses the
  // enums) and quotes them in its messages. What an mpirun habit means
  // (--map-by ppr:2:socket, :PE=2, --use-hwthread-cpus, --no-gpu-bind) goes
  // into the typed modes, never back in here; only torchrun's rendezvous
  // options write `rdzv`, as the --rdzv they mean.
  struct AsWritten {
    std::string map_by = "slot", bind_to = "none", gpu_bind = "visible", mpi = "auto", gpu_vendor;
    std::string launcher = "auto";  // libssh|ssh|slurm|auto
    std::string redirects = "0", tee = "0", local_ranks_filter, torch_store = "served", stdin = "0";
    std::string rank_by;  // mpirun's --rank-by: "" or the order --map-by gives (launcher/options/habits.h, check_rank_by)
    std::string rdzv;  // "", env or tcp://HOST:PORT (torchrun's --rdzv-endpoint and --master-addr write it too)
  } as_written;
};

// Whether ranks are pinned to CPUs: --bind-to, or a rankfile's slots.
inline bool pins_cpus(const RunOptions& o) { return o.bind_to != hostfiles::CpuBind::kNone || !o.rankfile.empty(); }

// Parses `args` (without the program name and subcommand) over the option
// defaults of the config files and DLAUNCH_<OPTION> variables
// (launcher/options/option_sources.h; the 3-argument form takes them given). Throws
// UsageError with a "did you mean" for near-miss options, and what
// load_option_defaults throws; an error after defaults were applied names
// them. Sets *help when --help was given (then nothing else is validated).
RunOptions parse_run_options(const std::vector<std::string>& args, bool* help);
RunOptions parse_run_options(const std::vector<std::string>& args, bool* help, const OptionDefaults& defaults);
// The option table as help text, each option showing its value (built in or
// a default's) and, at the end, where the defaults came from. A bad config
// file or variable is shown there, not thrown.
std::string run_options_help();
std::string run_options_help(const OptionDefaults& defaults);
// Every option of the run table (for config files and shell completion).
std::vector<OptionSpec> run_option_table();
// Options whose value is one of a few words: the parse checks them against
// this (where the option is not free-form beside them: --stdin takes any
// rank, --map-by ppr:N:...), and bash completion offers them.
struct OptionWords {
  std::string option;  // long name, without dashes
  std::vector<std::string> words;
};
const std::vector<OptionWords>& option_words();

// --env-file FILE (DeepSpeed's .deepspeed_env): one NAME=value per line, the
// value taken as it is (no quotes, no expansion); blank lines and lines
// starting with '#' are skipped. Returns the lines as -x NAME=value entries.
// Throws UsageError naming FILE:LINE and what was expected, and
// read_user_file's for a file it will not read.
std::vector<std::string> read_env_file(const std::string& path);

// The name rule of the ranks' variables, for --env-file and -x alike:
// letters, digits and _, not starting with a digit.
bool is_env_name(std::string_view name);
// One -x entry: VAR, VAR=value or 'PREFIX*' (PREFIX a start of such a name,
// or empty). Throws UsageError "WHERE: expected ..." otherwise.
void check_export(const std::string& entry, const std::string& where);

// --stdin TARGET for a job of `world_size` ranks: "none" or a rank of it.
// Throws UsageError naming the ranks there are.
void check_stdin_rank(int rank, int world_size);
// --local-ranks-filter's ranks (`typed` as written) for a job of
// `world_size` ranks: each one of the job's. Throws UsageError naming the
// ranks there are (a filter of none of them would hide every rank's output).
void check_console_ranks(const std::vector<int>& ranks, const std::string& typed, int world_size);

// The ranks' argv, as torchrun builds it: `python` (the interpreter, e.g.
// "python3") in front of a PROGRAM ending in .py, and `python -m` with
// --module; PROGRAM as it is with --no-python or anything else.
std::vector<std::string> program_argv(const RunOptions& o, const std::string& python);
// The same for one app context's command.
std::vector<std::string> program_argv(const RunOptions& o, const std::vector<std::string>& command,
                                      const std::string& python);

// --nproc-per-node gpu|cpu|auto on a host with `gpus` GPUs and `cores` CPUs:
// gpu the GPUs (UsageError with none), cpu the CPUs, auto the GPUs or else 1.
int resolve_nproc_per_node(NprocKind kind, int gpus, int cores);

// The closest of `candidates` to `word` within a small edit distance, or "".
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace dl::launcher
