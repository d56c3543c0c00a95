#pragma once
// The PMIx server of one dlaunch-agent: it tells this host's ranks of a job who
// they are (rank, size, peers, node map) so that OpenMPI's MPI_Init and other
// PMIx clients work under dlaunch, and it hands collective data exchanges
// (fences), aborts, spawns, names, connects and remote data requests to the
// agent in the control protocol's own terms: what a rank asks leaves as a
// control::MpiUp through MpiHooks::send (fence contributions through
// MpiHooks::fence), and the launcher's answers come back as a
// control::MpiDown to receive(). No struct of its own mirrors a message.
//
// The module is split by operation, as PRRTE splits its pmix_server_*.c:
// libpmix's upcall of an operation and the answer that completes it live in
// one file (server_fence.cc, server_connect.cc, server_spawn.cc,
// server_publish.cc, server_dmodex.cc; the clients' connect, finalize and
// abort in server_module.cc, which also holds the upcall table); the ranks'
// variables are server_env.cc's, the server's life pmix_server.cc's. This
// header names no libpmix type: server_module.h is the internal one.
//
// Thread-safety: libpmix runs its own progress thread and calls into this
// class from it. Every hook is delivered through MpiHooks::post, so with
// post = "asio::post(io_context, task)" they all run on the agent's thread.
// The public methods may be called from any thread, but not concurrently
// with stop() or the destructor.
//
// libpmix is a process singleton: at most one PmixServer may be started per
// process at a time; a second start() throws. Whether libpmix can be started
// again in one process after stop() is not tested: one agent keeps one
// server, and a restarted job (--max-restarts) is registered with it under
// a namespace of its own per attempt (register_job again).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "control/messages.h"
#include "mpi/job_map.h"
#include "mpi/mpi_hooks.h"

namespace dl::mpi::pmix {

// The map as the PMIx server needs it: mpi::validate's checks, and a tmpdir
// for its per-job files. Throws UsageError naming what is missing.
void validate_served(const JobMap& map);

struct ServerState;
class LocalTopology;

class PmixServer {
 public:
  // init() without direct modex, then register_job(map, hooks): for a
  // caller that knows the job at once (dl_pmix_run, tests). The map's host
  // name is given to libpmix.
  static std::unique_ptr<PmixServer> start(const JobMap& map, MpiHooks hooks);

  // The slow half, which needs no job (100-200 ms on a loaded machine, almost
  // all of it hwloc's topology discovery): discovers this host's topology once
  // and runs PMIx_server_init with its files in tmpdir/pmix (tmpdir must
  // exist; the caller removes it after stop). `hostname`: this host's name in
  // the launcher's plan, or "" when not known yet (libpmix then uses
  // gethostname and rank_env sets PMIX_HOSTNAME from the map). `direct_modex`:
  // whether a local rank's request for the data of a spawned rank on another
  // host is asked of the launcher (mpi_dmodex); else libpmix answers it
  // "not found".
  // May run on any thread (the agent runs it on one while it connects).
  // Throws UsageError when a server is already running in this process,
  // IoError when libpmix fails.
  static std::unique_ptr<PmixServer> init(const std::string& tmpdir, const std::string& hostname,
                                          bool direct_modex);
  // The same with a topology discovered beforehand (null: discover here).
  static std::unique_ptr<PmixServer> init(const std::string& tmpdir, const std::string& hostname,
                                          bool direct_modex, std::unique_ptr<LocalTopology> topology);

  // The fast half (about 1 ms): registers the job's namespace and this host's
  // ranks. map.tmpdir must be init's tmpdir. Of the hooks, post is required;
  // without send or fence, what a rank asks of them fails at once ("not
  // supported"), and start_children is needed only for spawn_launch. A
  // later call is the job's next attempt (--max-restarts; its namespace is
  // another, e.g. "<job>.a1"): the earlier job is retired first
  // (retire_job), so its fences, spawns and names never meet the new one's,
  // and the new job's fences count from 0 on every host again. Throws
  // UsageError for a bad map or no post hook, IoError when libpmix fails
  // (message says which call and its status).
  void register_job(const JobMap& map, MpiHooks hooks);

  ~PmixServer();  // stop()
  PmixServer(const PmixServer&) = delete;
  PmixServer& operator=(const PmixServer&) = delete;

  // Variables to ADD to the environment of local rank `global_rank` before
  // exec: libpmix's connection info (PMIx_server_setup_fork) and ompi_env().
  // The agent should also drop any PMIX_* and OMPI_* variables it inherited
  // itself (from an outer launcher). Throws UsageError when the rank is not
  // on this host, IoError when libpmix fails.
  std::vector<std::pair<std::string, std::string>> rank_env(int global_rank);

  // Completes fence `id` with the concatenation of every host's blob (node
  // order): the launcher's kFence frame. Unknown ids are ignored (e.g. after
  // stop).
  void fence_done(uint64_t id, const std::string& all_blobs);

  // A message of the launcher for this host's MPI side: the answer to what a
  // rank asked (fence_failed, spawn_reply, mpi_lookup_reply,
  // mpi_connect_done, mpi_dmodex_reply: unknown ids are ignored), another
  // host's request (mpi_dmodex_serve: answered with mpi_dmodex_data), or
  // MPI_Comm_spawn's children placed here or on another host (spawn_launch:
  // their namespace is registered, then MpiHooks::start_children starts them
  // and the spawning rank's call completes, or spawn_known answers).
  // mpi_map is the MPI side's (mpi_side.h) and ignored here. Run on the
  // agent's thread.
  void receive(const control::MpiDown& m);

  // For a server whose listener on 127.0.0.1:`tcp_port` (the port of its
  // PMIX_SERVER_URI41) was sealed (listener_seal.h) and that its clients
  // reach at 127.0.0.1:`door_port` (the agent's front door, front_door.h):
  // cuts the clients that reached tcp_port, and from now on refuses at its
  // handshake any client while such a connection exists, with
  // `refused(uid)` told of each other user's (on any thread).
  // MPI_Comm_spawn's children are told door_port.
  void seal(uint16_t door_port, uint16_t tcp_port, std::function<void(long uid)> refused);

  // Finalizes libpmix, removes map.tmpdir/pmix and shm_dir(map). Pending fences are
  // dropped (their ranks are being killed). Idempotent.
  void stop();
  // For a process about to _exit: removes the same files but leaves libpmix
  // running (PMIx_server_finalize takes 20-50 ms and releases nothing that
  // the exit does not). The process must not return from main or call
  // exit() afterwards: libpmix's thread still runs. Idempotent.
  void abandon();

  const JobMap& map() const { return map_; }

 private:
  PmixServer() = default;
  // Registers map's namespace and its ranks on this host with libpmix.
  void register_nspace(const JobMap& map);
  // The registered job's end before its next attempt (its ranks are gone):
  // what libpmix is owed for it fails, its namespace and its spawned
  // children's are deregistered and their files removed, and no upcall
  // reaches its hooks any more.
  void retire_job();
  // The launcher's messages, one overload each (receive), each defined in
  // its operation's file.
  void answer(const control::msg::FenceFailed& m);       // server_fence.cc
  void answer(const control::msg::MpiConnectDone& m);    // server_connect.cc
  void answer(const control::msg::SpawnReply& m);        // server_spawn.cc
  void answer(const control::msg::SpawnLaunch& m);       // server_spawn.cc
  void answer(const control::msg::MpiLookupReply& m);    // server_publish.cc
  void answer(const control::msg::MpiDmodexReply& m);    // server_dmodex.cc
  void answer(const control::msg::MpiDmodexServe& m);    // server_dmodex.cc
  void answer(const control::msg::MpiMap&) {}
  // MPI_Comm_spawn's children: registers `children` (their map; this host's
  // ranks of it may be none: then the namespace is only made known, for a
  // spawning rank's peers here) as a namespace spawned by a rank of the job,
  // and each local child as a client. Their events reach the hooks as
  // dlaunch rank ids first_id + k. Throws UsageError/IoError as
  // register_job does.
  void register_spawn(const JobMap& children, int first_id);
  // The variables to add to child `rank` (of register_spawn's `children`)
  // before exec, as rank_env does for the job's ranks.
  std::vector<std::pair<std::string, std::string>> spawn_env(const JobMap& children, int rank);
  // spawn_launch `m`'s children's map, or (m.elsewhere) the namespace to
  // make known; registered; their variables, in m.children's order
  // (nothing with m.elsewhere). Throws Error.
  std::vector<EnvList> start_spawn(const control::msg::SpawnLaunch& m);
  JobMap map_;
  uint16_t door_port_ = 0;  // seal's: the port clients are told; 0 = libpmix's own listener
  int spawned_local_ = 0;  // children of MPI_Comm_spawn on this host, all spawns of the job's attempt
  std::string tmpdir_, pmix_dir_;
  std::unique_ptr<ServerState> state_;
  std::unique_ptr<LocalTopology> topology_;
  bool running_ = false, registered_ = false, abandoned_ = false;
};

// Bytes as hex text and back, for byte objects and modex blobs carried in
// JSON control messages (from_hex of bad text: undefined bytes, no throw).
std::string to_hex(const char* bytes, size_t size);
std::string from_hex(const std::string& hex);

// Sets PMIX_MCA_gds=hash in this process's environment, so that a server
// started afterwards keeps its job data in libpmix's "hash" store: its
// clients' environment is then predictable (predicted_rank_env), and it
// creates no shared-memory segments or files (the default "ds21" dstore
// does). Call before other threads run (setenv). The variable starts with
// PMIX_, so the agent's filter keeps it out of the ranks' environment.
void select_hash_store();

// The server's own PMIx name, given to libpmix at init (PMIX_SERVER_NSPACE,
// rank 0) and written into every rank's PMIX_SERVER_URI*: "pmix-server.<pid>".
std::string server_nspace();

// What rank_env(global_rank) will return once a server is up and the job
// registered, computed without libpmix so that a rank can be started before
// its server exists (docs/mpi.md, "Cost for non-MPI programs"), except that
// PMIX_SERVER_URI* point at 127.0.0.1:`port` (the agent's FrontDoor)
// instead of libpmix's own listener. The libpmix-specific values are those
// PMIx_server_setup_fork of libpmix 4.2 writes for a server started by init()
// after select_hash_store() (gds "hash", security "native"); env_mismatches() checks them against the
// real ones.
std::vector<std::pair<std::string, std::string>> predicted_rank_env(const JobMap& map, int global_rank,
                                                                    uint16_t port);

// "VAR: predicted 'x', libpmix 'y'" for every variable of `real` (rank_env)
// that `predicted` (predicted_rank_env) lacks or has otherwise, and every
// variable `predicted` has that `real` lacks; PMIX_SERVER_URI* are compared
// without their address, PMIX_VERSION by its numbers only ("4.2.2" agrees
// with "4.2.2rc2": predicted_rank_env names the headers' version, which is
// all a client reads). Empty when they agree.
std::vector<std::string> env_mismatches(const std::vector<std::pair<std::string, std::string>>& predicted,
                                        const std::vector<std::pair<std::string, std::string>>& real);

// Sets every PMIX_SERVER_URI* of `env` to the server's name at
// 127.0.0.1:`port` (the agent's front door).
void point_uris_at(std::vector<std::pair<std::string, std::string>>& env, uint16_t port);

// The port of the listener in `uri` ("nspace.rank;tcp4://127.0.0.1:PORT"); 0
// when it is not a tcp4 loopback address.
uint16_t uri_port(const std::string& uri);

// The OpenMPI-only variables rank_env() adds (docs/mpi.md says why):
// OMPI_MCA_schizo=^orte, so that OpenMPI 4.1 uses PMIx instead of starting a
// singleton, and OMPI_MCA_orte_tmpdir_base=map.tmpdir, so that its session
// directories are removed with the job's tmpdir instead of left in /tmp, and
// OMPI_MCA_mpi_yield_when_idle=1 when this host's ranks outnumber the cpus
// this process may use (as mpirun does when it oversubscribes) unless the
// environment already sets it, and OMPI_MCA_btl_vader_backing_directory=
// shm_dir(map) whenever /dev/shm exists (created by register_job, removed by
// stop) so that shared-memory segments of killed ranks do not stay in /dev/shm.
std::string shm_dir(const JobMap& map);
std::vector<std::pair<std::string, std::string>> ompi_env(const JobMap& map);

}  // namespace dl::mpi::pmix
