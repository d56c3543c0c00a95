#pragma once
// The launcher <-> agent control messages, one struct each: the single home
// of their names and fields. Nothing outside control/ reads a message field
// by a string: the launcher and the agent receive these structs, decoded and
// type-checked, and send them back through encode().
//
// Each struct lists its fields once, in fields(), and that one list drives
// the JSON encoding and the checked decoding (the record codec,
// wire/record.h) and the protocol reference that
// docs/wire-protocol.md is checked against (protocol_reference()). A field
// of type std::optional<T> may be absent; every other field is required.
// Both ends are the same dlaunch version (the handshake's tag carries
// DLAUNCH_VERSION and refuses any other), so no field is optional for the
// sake of an older or newer peer: an optional field is one whose absence
// means something today (docs/wire-protocol.md, "Compatibility").
//
// A message that is not an object, has an unknown "t", a missing field or a
// field of the wrong type is refused with ProtocolError, whose text names the
// message and the field ("'exited' message: field 'rank' is missing"); the
// receiver closes that connection. The binary frames (rank output, stdin,
// fence blobs) are in control/protocol.h.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "errors/error.h"

namespace dl::control {

// A control message that cannot be decoded.
class ProtocolError : public RemoteError {
 public:
  using RemoteError::RemoteError;
};

using EnvVars = std::map<std::string, std::string>;

// What the agents serve a launch's ranks (--mpi): PMIx, PMI or both; or
// nothing, and a rank that calls MPI_Init ends the job (--max-restarts, per-node mode).
enum class MpiServe { kPmix, kPmi, kPmixAndPmi, kRefuse };
// Its word in MpiSection::serve: "pmix", "pmi", "pmix,pmi", "refuse".
const char* serve_word(MpiServe s);

// What an mpi_connect collective is: PMIx_Connect, PMIx_Disconnect, or a
// fence over some of the job's processes (or over several namespaces).
enum class ConnectOp { kConnect, kDisconnect, kFence };
// Its word in MpiConnect::op: "connect", "disconnect", "fence".
const char* connect_op_word(ConnectOp op);

namespace msg {

// ---- agent -> launcher -----------------------------------------------------

// What --bind-to needs of a host: its cores (each a list of CPU ids, the
// hyperthreads of one core) and NUMA nodes, within the agent's affinity.
struct CpuReport {
  std::vector<std::vector<int>> cores, numa;
  // The kernel's id of each entry of `numa` (parallel; -1 unknown): nodes
  // without usable CPUs are left out of `numa`, so its index is no node id.
  std::vector<int> numa_ids = {};
  // Sockets (physical packages), each its usable CPUs, for --bind-to socket
  // and --map-by ppr:N:socket.
  std::vector<std::vector<int>> packages = {};
  template <class S, class V> static void fields(S& s, V& v) {
    v("cores", s.cores), v("numa", s.numa), v("numa_ids", s.numa_ids), v("packages", s.packages);
  }
};

// The agent's first message, after the token handshake.
struct Hello {
  static constexpr const char* kType = "hello";
  std::string version;            // DLAUNCH_VERSION of the agent
  int node = 0;                   // the node index it was started for
  std::string host;               // its gethostname()
  int pid = 0;
  int free_port = 0;              // a free TCP port there (node 0's is MASTER_PORT)
  std::vector<std::string> gpus;  // the GPU ids it may hand out (its vendor's visibility variable's values)
  bool pmix = false;              // it can serve PMIx (built with libpmix)
  std::optional<CpuReport> cpu;   // with --cpu-topology only
  // The vendor of `gpus`: "nvidia", "amd" or "intel" (machine/gpu_vendor.h);
  // "" when `gpus` is empty.
  std::string gpu_vendor;
  // A host with GPUs of two or more vendors: each vendor's ids, comma-joined
  // ("amd" -> "0,1"), so --gpu-vendor can pick one (machine/gpu_report.h).
  std::optional<EnvVars> gpus_by_vendor;
  // The NUMA node of each of `gpus` (parallel; -1 unknown), from the PCI
  // device in sysfs, so --bind-to numa puts a rank next to its GPU; absent
  // when no node is known (GPUs given by a variable or --gpus-per-node).
  std::optional<std::vector<int>> gpu_numa;
  // Which machine it runs on (machine/identity.h): two agents of one
  // job reporting the same are one machine listed under two names, and the
  // job is refused before any rank starts. "": unknown (no /proc), compared
  // with nothing.
  std::string machine;
  // Set by the agent that relays this hello up the launch tree (never by
  // the agent itself): the address its connection came from, which is how
  // the other hosts reach this one (MASTER_ADDR when it is node 0).
  std::optional<std::string> reach;
  // The health gate's own checks of this host, run before the hello (its
  // temporary directory writable, with room): "" passed, else what failed,
  // in words for the user. The host then takes no ranks (docs/failures.md).
  std::string unhealthy;
  template <class S, class V> static void fields(S& s, V& v) {
    v("version", s.version), v("node", s.node), v("host", s.host), v("pid", s.pid), v("free_port", s.free_port);
    v("gpus", s.gpus), v("pmix", s.pmix), v("cpu", s.cpu), v("gpu_vendor", s.gpu_vendor);
    v("gpus_by_vendor", s.gpus_by_vendor), v("gpu_numa", s.gpu_numa), v("machine", s.machine), v("reach", s.reach);
    v("unhealthy", s.unhealthy);
  }
};

// The answer to health_check: the command's exit status 0 (passed), or the
// check's own words (the last lines it printed, or how it ended).
struct Health {
  static constexpr const char* kType = "health";
  bool passed = false;
  std::string text;
  // The agent's wall clock when the health_check came (ns since the epoch),
  // and how long it held the check before this answer: the launcher, which
  // noted its own clock when it sent the check and when this came, judges
  // the host's clock to within half the round trip (--clock-threshold).
  int64_t clock_ns = 0, held_ns = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v("passed", s.passed), v("text", s.text), v("clock_ns", s.clock_ns), v("held_ns", s.held_ns);
  }
};

// A rank was forked and exec'd.
struct Started {
  static constexpr const char* kType = "started";
  int rank = 0, pid = 0;
  template <class S, class V> static void fields(S& s, V& v) { v("rank", s.rank), v("pid", s.pid); }
};

// The launch tree: `count` ranks beneath this agent were started since its
// last such message. A relaying agent passes none of its children's
// `started` up: it counts them (and its children's own started_below) and
// sends the sum, at most kStartedHold after the first and before any other
// frame it sends up, so the launcher can count the ranks of an attempt
// started (the line of a membership change, docs/failures.md) without a
// frame per rank.
struct StartedBelow {
  static constexpr const char* kType = "started_below";
  int count = 0;
  template <class S, class V> static void fields(S& s, V& v) { v("count", s.count); }
};

// A rank ended, sent after the last of its output. Exactly one of code and
// signal is set.
struct Exited {
  static constexpr const char* kType = "exited";
  int rank = 0, pid = 0;
  std::optional<int> code;    // exit status
  std::optional<int> signal;  // the signal that killed it
  std::optional<bool> core;   // with signal: it dumped core
  bool by_agent = false;      // it ended through a signal the agent sent (teardown, forwarding)
  // A failed rank's exception as torch's @record wrote it to the rank's
  // TORCHELASTIC_ERROR_FILE, summarized: "ValueError: bad lr (at train.py:12)".
  std::optional<std::string> error;
  template <class S, class V> static void fields(S& s, V& v) {
    v("rank", s.rank), v("pid", s.pid), v("code", s.code), v("signal", s.signal), v("core", s.core);
    v("by_agent", s.by_agent), v("error", s.error);
  }
};

// Ranks that ended by themselves with exit code 0, each after the last of
// its output, reported together: an agent holds its clean exits until all of
// its ranks have ended or for at most a moment (agent/rank_supervisor.h), and
// a launch-tree agent holds its subtree's until every host beneath it said
// its last (agent/relay.h). So a job whose ranks all succeed costs the
// launcher about one message per root agent, not one per rank (at 1,024
// hosts x 8 the exits were most of the launcher's messages and wake-ups).
// A failure goes alone, at once, as `exited`.
struct ExitedClean {
  static constexpr const char* kType = "exited_clean";
  std::vector<int> ranks, pids;  // pids[i] is ranks[i]'s
  bool last = false;             // every rank of the host has ended and been reported
  template <class S, class V> static void fields(S& s, V& v) {
    v("ranks", s.ranks), v("pids", s.pids), v("last", s.last);
  }
};

// A rank could not be started: code 126 (not executable), 127 (not found)
// or 1 (the agent could not prepare it, e.g. no PMIx server).
struct SpawnFailed {
  static constexpr const char* kType = "spawn_failed";
  int rank = 0, code = 0;
  std::string message;
  template <class S, class V> static void fields(S& s, V& v) { v("rank", s.rank), v("code", s.code), v("message", s.message); }
};

// A rank called MPI_Abort / PMIx_Abort.
struct MpiAbort {
  static constexpr const char* kType = "mpi_abort";
  int rank = 0, status = 0;
  std::string message;
  template <class S, class V> static void fields(S& s, V& v) {
    v("rank", s.rank), v("status", s.status), v("message", s.message);
  }
};

// --max-restarts with --mpi auto, or per-node mode (serve "refuse"): a rank started MPI's
// wire-up ("PMIx": it connected to its PMIx address; "PMI": it wrote on its
// PMI_FD). Nothing serves it: the launcher ends the job (docs/failures.md).
struct MpiRefused {
  static constexpr const char* kType = "mpi_refused";
  int rank = 0;
  std::string wire;
  template <class S, class V> static void fields(S& s, V& v) { v("rank", s.rank), v("wire", s.wire); }
};

// One program of an MPI_Comm_spawn request: its argv and how many processes.
// `env`: what the program asked its children to get on top of the job's
// environment (OpenMPI puts OMPI_PARENT_PORT and its OMPI_MCA_* there);
// `wdir`: the directory it asked for (absent: the job's).
struct SpawnApp {
  std::vector<std::string> argv;
  int np = 0;
  std::optional<EnvVars> env = std::nullopt;
  std::optional<std::string> wdir = std::nullopt;
  template <class S, class V> static void fields(S& s, V& v) {
    v("argv", s.argv), v("np", s.np), v("env", s.env), v("wdir", s.wdir);
  }
};

// A rank called MPI_Comm_spawn (PMIx_Spawn). The rank waits until the
// launcher answers with a spawn_reply of the same id (ids count per agent).
struct SpawnRequest {
  static constexpr const char* kType = "spawn_request";
  uint64_t id = 0;
  int rank = 0;
  std::vector<SpawnApp> apps;
  template <class S, class V> static void fields(S& s, V& v) { v("id", s.id), v("rank", s.rank), v("apps", s.apps); }
};

// A name a rank published (PMIx_Publish, MPI_Publish_name), with who
// published it (its PMIx namespace and rank there). The value is a string,
// or with `bytes` a byte object in hex (OpenMPI's communicator ids).
struct PublishedName {
  std::string key, value, nspace;
  int rank = 0;
  std::optional<bool> bytes = std::nullopt;
  template <class S, class V> static void fields(S& s, V& v) {
    v("key", s.key), v("value", s.value), v("nspace", s.nspace), v("rank", s.rank), v("bytes", s.bytes);
  }
};

// PMIx_Publish: keep `names` in the job's name service (launcher/mpi/name_service.h);
// with first_read, each is removed when a lookup first returns it.
struct MpiPublish {
  static constexpr const char* kType = "mpi_publish";
  std::vector<PublishedName> names;
  bool first_read = false;
  template <class S, class V> static void fields(S& s, V& v) { v("names", s.names), v("first_read", s.first_read); }
};

// PMIx_Lookup by `rank` (a dlaunch rank id, spawned ranks included): answer
// mpi_lookup_reply with the same id; with wait, once every key is
// published or after timeout_ms.
struct MpiLookup {
  static constexpr const char* kType = "mpi_lookup";
  uint64_t id = 0;
  int rank = 0;
  std::vector<std::string> keys;
  bool wait = false;
  int timeout_ms = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v("id", s.id), v("rank", s.rank), v("keys", s.keys), v("wait", s.wait), v("timeout_ms", s.timeout_ms);
  }
};

// PMIx_Unpublish: forget these keys.
struct MpiUnpublish {
  static constexpr const char* kType = "mpi_unpublish";
  std::vector<std::string> keys;
  template <class S, class V> static void fields(S& s, V& v) { v("keys", s.keys); }
};

// A collective of this host's processes among `procs` ("nspace:rank",
// "nspace:*" for all of it), which span hosts: op "connect" (PMIx_Connect),
// "disconnect" or "fence" (a fence over some of the job's processes, or over
// several namespaces: OpenMPI's MPI_Comm_disconnect), with this host's data
// `blob` (hex). Answer mpi_connect_done with the same id once every host
// holding one of them asked for the same op and set.
struct MpiConnect {
  static constexpr const char* kType = "mpi_connect";
  uint64_t id = 0;
  std::string op;
  std::vector<std::string> procs;
  std::optional<std::string> blob;
  template <class S, class V> static void fields(S& s, V& v) {
    v("id", s.id), v("op", s.op), v("procs", s.procs), v("blob", s.blob);
  }
  // `op`, typed. Throws ProtocolError for a word this build does not know.
  ConnectOp connect_op() const;
};

// The answer to a spawn_launch with `elsewhere`: namespace `nspace` is
// registered here (or could not be: `error`), so its children may start.
struct SpawnKnown {
  static constexpr const char* kType = "spawn_known";
  std::string nspace;
  std::optional<std::string> error;
  template <class S, class V> static void fields(S& s, V& v) { v("nspace", s.nspace), v("error", s.error); }
};

// A process here asked for the data (modex) of dlaunch rank `rank`, on
// another host, that no fence delivered: answer mpi_dmodex_reply.
struct MpiDmodex {
  static constexpr const char* kType = "mpi_dmodex";
  uint64_t id = 0;
  int rank = 0;
  template <class S, class V> static void fields(S& s, V& v) { v("id", s.id), v("rank", s.rank); }
};

// The answer to mpi_dmodex_serve `id`: the PMIx server's blob of the rank's
// data in hex, or ok false.
struct MpiDmodexData {
  static constexpr const char* kType = "mpi_dmodex_data";
  uint64_t id = 0;
  bool ok = false;
  std::string blob;
  template <class S, class V> static void fields(S& s, V& v) { v("id", s.id), v("ok", s.ok), v("blob", s.blob); }
};

// One rank's stack, for the launcher's report of where every rank is
// (agent/stack_dump.h, docs/hangs.md).
struct RankStack {
  int rank = 0, pid = 0;
  std::string how;                   // "python" (its fault handler), "eu-stack", "gdb"; "" when there is none
  std::string text;                  // every thread's stack as that tool printed it
  std::optional<std::string> error;  // why there is no stack ("did not answer within 10 s", no tool, ptrace refused)
  template <class S, class V> static void fields(S& s, V& v) {
    v("rank", s.rank), v("pid", s.pid), v("how", s.how), v("text", s.text), v("error", s.error);
  }
};

// The answer to dump_stacks `id`: each of the host's ranks, running or not.
struct Stacks {
  static constexpr const char* kType = "stacks";
  uint64_t id = 0;
  std::vector<RankStack> ranks;
  template <class S, class V> static void fields(S& s, V& v) { v("id", s.id), v("ranks", s.ranks); }
};

// After a `restart`: every rank of the ended attempt was reported, and the
// agent is ready for the next launch; free_port is a free TCP port there
// now (node 0's becomes the next attempt's MASTER_PORT).
struct Ready {
  static constexpr const char* kType = "ready";
  int attempt = 0;  // the attempt the next launch will be (the restart's)
  int free_port = 0;
  template <class S, class V> static void fields(S& s, V& v) { v("attempt", s.attempt), v("free_port", s.free_port); }
};

// The launch tree (docs/design.md "The launch tree"): an agent that starts
// other agents says what became of them.
//
// Node `node`, which this agent was to start, could not be started (or its
// agent exited before it said hello): `why`, in the start method's words.
struct AgentFailed {
  static constexpr const char* kType = "agent_failed";
  int node = 0;
  std::string why;
  template <class S, class V> static void fields(S& s, V& v) { v("node", s.node), v("why", s.why); }
};

// Node `node`'s agent, which said hello through this one, is gone (its
// connection closed, or it fell silent): `why`. Sent for each node beneath
// it too, which were lost with it.
struct AgentLost {
  static constexpr const char* kType = "agent_lost";
  int node = 0;
  std::string why;
  template <class S, class V> static void fields(S& s, V& v) { v("node", s.node), v("why", s.why); }
};

// Both directions: "I am alive", once a heartbeat interval after the launch.
struct Heartbeat {
  static constexpr const char* kType = "hb";
  template <class S, class V> static void fields(S&, V&) {}
};

// ---- launcher -> agent -----------------------------------------------------

// One agent for a tree agent to start (StartAgents): the host as the
// hostfile names it, its ssh user and port, and `below`: how many of the
// entries that follow it in the list are its own subtree, which it starts
// in turn once it said hello.
struct TreeAgent {
  int node = 0;
  std::string host, user;
  int port = 0;
  int below = 0;
  template <class S, class V> static void fields(S& s, V& v) {
    v("node", s.node), v("host", s.host), v("user", s.user), v("port", s.port), v("below", s.below);
  }
};

// Start these agents, with the start method the launcher uses and the same
// options (never the token: each is handed this agent's own, on its stdin),
// each connecting back to this agent, which relays their traffic
// (docs/design.md "The launch tree"). `agents` lists each direct child
// followed by its subtree (TreeAgent::below).
struct StartAgents {
  static constexpr const char* kType = "start_agents";
  std::string method;                 // --launcher, resolved: libssh, ssh, sim
  std::string self;                   // the receiving agent's host, as the job names it (for its messages)
  std::vector<TreeAgent> agents;
  int ssh_parallel = 32, ssh_timeout_ms = 30000;
  std::string ssh_config, prefix;
  bool ssh_accept_new = false;
  std::vector<std::string> launcher_exec;
  // What each of them is started with (control/agent_args.h).
  int gpus_per_node = -1;
  bool detect_gpus = true, prepare_pmix = true, cpu_topology = false;
  template <class S, class V> static void fields(S& s, V& v) {
    v("method", s.method), v("self", s.self), v("agents", s.agents), v("ssh_parallel", s.ssh_parallel);
    v("ssh_timeout_ms", s.ssh_timeout_ms), v("ssh_config", s.ssh_config), v("prefix", s.prefix);
    v("ssh_accept_new", s.ssh_accept_new), v("launcher_exec", s.launcher_exec), v("gpus_per_node", s.gpus_per_node);
    v("detect_gpus", s.detect_gpus), v("prepare_pmix", s.prepare_pmix), v("cpu_topology", s.cpu_topology);
  }
};

// One rank to start.
struct RankSpec {
  int rank = 0;
  std::vector<std::string> argv;   // empty: the launch's argv
  EnvVars env;                     // this rank's own variables (GPU binding; identity unless the launch's identity says it)
  bool stdin_open = false;         // its stdin is fed by stdin data frames, else /dev/null
  std::optional<std::vector<int>> cpus;  // --bind-to: the CPUs to pin it to
  std::optional<std::string> wdir;       // MPMD: its app context's --wdir (absent: the launch's wdir)
  template <class S, class V> static void fields(S& s, V& v) {
    v("rank", s.rank), v("argv", s.argv), v("env", s.env), v("stdin", s.stdin_open), v("cpus", s.cpus);
    v("wdir", s.wdir);
  }
};

// With --mpi (pmix): the agent serves PMIx to its ranks (mpi/mpi_job.h).
struct MpiSection {
  std::string nspace;
  int world_size = 0, node_rank = 0, universe_size = 0;
  // By node: its host and its ranks. Empty in a launch that an mpi_map
  // broadcast came before (the map is the same for every host: sent once, not
  // in each of 1,024 launches); the agent fills them in from it.
  std::vector<std::string> node_hosts;
  std::vector<std::vector<int>> node_ranks;
  // MPMD: the number of ranks of each app context, in rank order (absent: one app).
  std::optional<std::vector<int>> app_sizes;
  // The wire-up the agents serve (--mpi): "pmix", "pmi" or "pmix,pmi";
  // "refuse" (--max-restarts): none; a rank that starts either is reported
  // (MpiRefused).
  std::string serve = "pmix";
  template <class S, class V> static void fields(S& s, V& v) {
    v("nspace", s.nspace), v("world_size", s.world_size), v("node_rank", s.node_rank);
    v("node_hosts", s.node_hosts), v("node_ranks", s.node_ranks), v("universe_size", s.universe_size);
    v("app_sizes", s.app_sizes), v("serve", s.serve);
  }
  // `serve`, typed: what the agents serve. Throws ProtocolError for a word
  // this build does not know.
  MpiServe served() const;
};

// The identity variables of a launch's ranks (RANK, LOCAL_RANK, their
// OpenMPI, Hydra, Horovod, Slurm and dlaunch spellings), left for the agent
// to write from each rank's number and place (control/rank_identity.h)
// instead of being spelled out rank by rank: at 1,024 hosts x 8 that was
// 8,192 maps of 13 variables built, encoded and sent by the launcher.
struct RankIdentity {
  // Horovod's cross rank and cross size, by local rank (a rank's local rank
  // is its place in the launch's ranks).
  std::vector<int> cross_rank, cross_size;
  bool slurm = false;  // also SLURM_PROCID and SLURM_LOCALID (and, with node, SLURM_NODEID)
  // The host's node index: present, the agent writes the host's variables
  // too (NODE_RANK, LOCAL_WORLD_SIZE, ...: control::add_host_identity), so
  // the launcher plans and encodes none of them per host.
  std::optional<int> node;
  template <class S, class V> static void fields(S& s, V& v) {
    v("cross_rank", s.cross_rank), v("cross_size", s.cross_size), v("slurm", s.slurm), v("node", s.node);
  }
};

// What every host's launch shares (the -x exports, the job's sizes, the
// rendezvous, the job's id and token, ...), sent once to every agent ahead
// of the launches, which then carry only what is their host's own (its
// ranks; its node index, from which the agent writes LOCAL_WORLD_SIZE,
// NODE_RANK, ...): at 1,024 hosts the shared part was 1,024 copies of about
// 2 KB, each planned, encoded and sent by the launcher. An agent applies the
// latest one to each launch it gets after it (control/rank_identity.h,
// complete_launch); a launch's own env wins.
struct LaunchEnv {
  static constexpr const char* kType = "launch_env";
  EnvVars env;
  template <class S, class V> static void fields(S& s, V& v) { v("env", s.env); }
};

// Start this host's ranks.
struct Launch {
  static constexpr const char* kType = "launch";
  EnvVars env;          // for every rank of the host: its own variables, over the latest launch_env's
  std::string wdir;     // "" = the agent's own directory
  std::vector<RankSpec> ranks;
  // The program and arguments of every rank whose RankSpec::argv is empty
  // (absent: each rank names its own).
  std::optional<std::vector<std::string>> argv;
  // Present: the agent writes each rank's identity variables (absent: they
  // are in the ranks' env).
  std::optional<RankIdentity> identity;
  int hb_ms = 1000;          // heartbeat interval
  int hb_timeout_ms = 10000; // silence after which the launcher counts as lost
  std::optional<MpiSection> mpi;
  // Each rank's stdout is a pseudo-terminal (--output-pty, the default), so
  // its stdio line-buffers; false: a pipe.
  bool stdout_pty = false;
  template <class S, class V> static void fields(S& s, V& v) {
    v("env", s.env), v("wdir", s.wdir), v("ranks", s.ranks), v("hb_ms", s.hb_ms), v("hb_timeout_ms", s.hb_timeout_ms);
    v("mpi", s.mpi), v("stdout_pty", s.stdout_pty), v("argv", s.argv), v("identity", s.identity);
  }
};

// Fence `id` cannot complete (a host never contributed): fail the ranks' fence.
struct FenceFailed {
  static constexpr const char* kType = "fence_failed";
  uint64_t id = 0;
  std::string message;  // the hosts and ranks that did not arrive
  template <class S, class V> static void fields(S& s, V& v) { v("id", s.id), v("message", s.message); }
};

// Forward a signal to every rank's process group.
struct Signal {
  static constexpr const char* kType = "signal";
  int signal = 0;
  template <class S, class V> static void fields(S& s, V& v) { v("signal", s.signal); }
};

// SIGTERM every rank, SIGKILL what is left after grace_ms. With
// `ready_for` (a teardown that --max-restarts may follow): once every rank
// is reported, answer `ready` for that attempt as a Restart would ask, in
// the turn that reports the last exit. The launcher then holds every answer
// when it has seen every exit, and a restart waits for no round trip
// through the launch tree after the teardown; if the job ends instead, the
// answers go unused.
struct Kill {
  static constexpr const char* kType = "kill";
  int grace_ms = 0;
  std::optional<int> ready_for;
  template <class S, class V> static void fields(S& s, V& v) { v("grace_ms", s.grace_ms), v("ready_for", s.ready_for); }
};

// The answer to spawn_request `id`: the new namespace, or why there is none
// (the rank's MPI_Comm_spawn then returns an error).
struct SpawnReply {
  static constexpr const char* kType = "spawn_reply";
  uint64_t id = 0;
  std::optional<std::string> nspace;
  std::optional<std::string> error;
  template <class S, class V> static void fields(S& s, V& v) { v("id", s.id), v("nspace", s.nspace), v("error", s.error); }
};

// Start the processes of spawn_request `id`, all on this host, as the
// PMIx namespace `nspace` whose rank k is children[k] (children[k].rank is
// its dlaunch rank id, for output, exits and teardown); then complete the
// request. parent_nspace/parent_rank name the rank that asked.
struct SpawnLaunch {
  static constexpr const char* kType = "spawn_launch";
  uint64_t id = 0;
  std::string nspace, parent_nspace;
  int parent_rank = 0;
  std::vector<int> app_sizes;  // the children of each app, in order
  std::vector<RankSpec> children;
  // Present: the children run on that host, not here; only register their
  // namespace (this host has the spawning rank's peers) and answer
  // spawn_known. The children's host gets its spawn_launch after every such
  // answer, so the namespace is known everywhere before they start.
  std::optional<std::string> elsewhere;
  template <class S, class V> static void fields(S& s, V& v) {
    v("id", s.id), v("nspace", s.nspace), v("parent_nspace", s.parent_nspace), v("parent_rank", s.parent_rank);
    v("app_sizes", s.app_sizes), v("children", s.children), v("elsewhere", s.elsewhere);
  }
};

// An MPI job's map, the same for every host: broadcast once before the
// launches, whose MPI sections then leave node_hosts and node_ranks empty.
struct MpiMap {
  static constexpr const char* kType = "mpi_map";
  std::vector<std::string> node_hosts;       // by node
  std::vector<std::vector<int>> node_ranks;  // by node: its ranks
  template <class S, class V> static void fields(S& s, V& v) { v("node_hosts", s.node_hosts), v("node_ranks", s.node_ranks); }
};

// mpi_connect `id` completed on every host, with every host's blob
// concatenated in node order (hex; fences), or `error`: it failed.
struct MpiConnectDone {
  static constexpr const char* kType = "mpi_connect_done";
  uint64_t id = 0;
  std::optional<std::string> blob;
  std::optional<std::string> error;
  template <class S, class V> static void fields(S& s, V& v) { v("id", s.id), v("blob", s.blob), v("error", s.error); }
};

// Serve the data of local dlaunch rank `rank` for another host: answer
// mpi_dmodex_data with the same id.
struct MpiDmodexServe {
  static constexpr const char* kType = "mpi_dmodex_serve";
  uint64_t id = 0;
  int rank = 0;
  template <class S, class V> static void fields(S& s, V& v) { v("id", s.id), v("rank", s.rank); }
};

// The answer to mpi_dmodex `id`: the rank's data blob (hex) or ok false.
struct MpiDmodexReply {
  static constexpr const char* kType = "mpi_dmodex_reply";
  uint64_t id = 0;
  bool ok = false;
  std::string blob;
  template <class S, class V> static void fields(S& s, V& v) { v("id", s.id), v("ok", s.ok), v("blob", s.blob); }
};

// The answer to mpi_lookup `id`: the names found, or why not (the rank's
// PMIx_Lookup fails: not found, timed out).
struct MpiLookupReply {
  static constexpr const char* kType = "mpi_lookup_reply";
  uint64_t id = 0;
  std::vector<PublishedName> names;
  std::optional<std::string> error;
  template <class S, class V> static void fields(S& s, V& v) { v("id", s.id), v("names", s.names), v("error", s.error); }
};

// No more stdin for `rank`: close its pipe once the queued data is written.
struct StdinEof {
  static constexpr const char* kType = "stdin_eof";
  int rank = 0;
  template <class S, class V> static void fields(S& s, V& v) { v("rank", s.rank); }
};

// Collect a stack of each of this host's ranks, within timeout_ms, and
// answer with `stacks` carrying the same id. The ranks keep running.
struct DumpStacks {
  static constexpr const char* kType = "dump_stacks";
  uint64_t id = 0;
  int timeout_ms = 0;
  template <class S, class V> static void fields(S& s, V& v) { v("id", s.id), v("timeout_ms", s.timeout_ms); }
};

// --max-restarts: the attempt failed and every rank of it ended; the job
// goes on. Forget this attempt's ranks once each is reported, then answer
// `ready` for `attempt` (the restart count of the launch that follows).
// A program a host's ranks will run, to be found before they start: argv0
// as written, looked up as the launch will (agent/rank_process.h,
// resolve_program) on `path` (the job's -x PATH; "" for the agent's own)
// from `wdir`.
struct ProgramProbe {
  std::string argv0, path, wdir;
  template <class S, class V> static void fields(S& s, V& v) { v("argv0", s.argv0), v("path", s.path), v("wdir", s.wdir); }
};

// The health gate's checks that need the host (docs/failures.md, "The
// health gate"), before the host takes ranks; answered by `health`. Each of
// `programs` must be found, then, when `command` is not empty
// (--health-check CMD), `/bin/sh -c command` runs on this host with
// DLAUNCH_HOST=host (as the hostfile names it) within timeout_ms.
struct HealthCheck {
  static constexpr const char* kType = "health_check";
  std::string command, host;
  int timeout_ms = 60000;
  std::vector<ProgramProbe> programs;
  template <class S, class V> static void fields(S& s, V& v) {
    v("command", s.command), v("host", s.host), v("timeout_ms", s.timeout_ms), v("programs", s.programs);
  }
};

struct Restart {
  static constexpr const char* kType = "restart";
  int attempt = 0;
  template <class S, class V> static void fields(S& s, V& v) { v("attempt", s.attempt); }
};

// The job is over: exit once every rank is reaped and reported.
struct Bye {
  static constexpr const char* kType = "bye";
  template <class S, class V> static void fields(S&, V&) {}
};

}  // namespace msg

// MPI's traffic, grouped one variant each way so that the agent hands every
// MpiDown to mpi/ and the launcher every MpiUp to its MPI router without
// naming the messages: a new MPI operation adds its structs here and its
// handling in mpi/ and the launcher's router, and nothing in Agent or Job.
// On the wire each keeps its own "t" (the table in docs/wire-protocol.md).
// FenceFailed is MPI's: only the PMIx and PMI servers run fences (the fence
// blobs themselves are binary frames, control/protocol.h).
using MpiUp = std::variant<msg::MpiAbort, msg::MpiRefused, msg::SpawnRequest, msg::MpiPublish, msg::MpiLookup,
                           msg::MpiUnpublish, msg::MpiConnect, msg::MpiDmodex, msg::MpiDmodexData, msg::SpawnKnown>;
using MpiDown = std::variant<msg::FenceFailed, msg::SpawnReply, msg::SpawnLaunch, msg::MpiLookupReply,
                             msg::MpiConnectDone, msg::MpiDmodexServe, msg::MpiDmodexReply, msg::MpiMap>;

// What each side may receive. Decoding picks the alternative by "t", looking
// into MpiUp and MpiDown for theirs.
using FromAgent = std::variant<msg::Hello, msg::Started, msg::StartedBelow, msg::Exited, msg::ExitedClean, msg::SpawnFailed, msg::Heartbeat, msg::Stacks,
                               msg::Ready, msg::AgentFailed, msg::AgentLost, msg::Health, MpiUp>;
using FromLauncher = std::variant<msg::Launch, msg::LaunchEnv, msg::Signal, msg::Kill, msg::StdinEof, msg::Heartbeat, msg::Bye,
                                  msg::DumpStacks, msg::Restart, msg::StartAgents, msg::HealthCheck, MpiDown>;

// The JSON text of a message, "t" first.
template <class M> std::string encode(const M& m);
// The kJson frame (wire/frame.h) carrying a message.
template <class M> std::string frame(const M& m);
// The same for a message of MPI's groups: the one it holds.
std::string encode(const MpiUp& m);
std::string encode(const MpiDown& m);
std::string frame(const MpiUp& m);
std::string frame(const MpiDown& m);

// Decode one kJson payload; throw ProtocolError naming the message and field.
FromAgent decode_from_agent(std::string_view json_text);
FromLauncher decode_from_launcher(std::string_view json_text);

// The message table, one line per message and direction:
//   agent -> launcher  exited  {rank, pid, code?, signal?, core?, by_agent}
// docs/wire-protocol.md holds this text between its "messages" markers; a
// test checks that it matches.
std::string protocol_reference();

// Overloaded lambdas for std::visit over FromAgent / FromLauncher.
template <class... F> struct Visitor : F... { using F::operator()...; };
template <class... F> Visitor(F...) -> Visitor<F...>;

}  // namespace dl::control
