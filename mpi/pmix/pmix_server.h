#pragma once
// The PMIx server of one dlaunch-agent: it tells this host's ranks of a job who
// they are (rank, size, peers, node map) so that OpenMPI's MPI_Init and other
// PMIx clients work under dlaunch, and it hands collective data exchanges
// (fences), aborts and remote data requests to the agent through callbacks.
//
// This is the only file on the server side that uses libpmix (Debian's 4.2).
//
// Thread-safety: libpmix runs its own progress thread and calls into this
// class from it. Every Callbacks function is delivered through Callbacks::post,
// so with post = "asio::post(io_context, task)" they all run on the agent's
// thread. The public methods may be called from any thread, but not
// concurrently with stop() or the destructor.
//
// libpmix is a process singleton: at most one PmixServer may be started per
// process at a time; a second start() throws. Whether libpmix can be started
// again in one process after stop() is not tested: one agent serves one job.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpi/job_map.h"

namespace dl::mpi::pmix {

// The map as the PMIx server needs it: mpi::validate's checks, and a tmpdir
// for its per-job files. Throws UsageError naming what is missing.
void validate_served(const JobMap& map);

struct ServerState;
class LocalTopology;

// One program a rank asked PMIx_Spawn (MPI_Comm_spawn) to start.
struct SpawnApp {
  std::vector<std::string> argv;  // the command first
  int np = 0;                     // maxprocs
  std::vector<std::pair<std::string, std::string>> env;  // the app's variables (OMPI_PARENT_PORT, ...)
  std::string wdir;                                      // "" = the job's
};

// A published name (PMIx_Publish) and who published it.
struct Name {
  std::string key, value, nspace;  // value: a string, or with `bytes` a byte object in hex
  int rank = 0;
  bool bytes = false;
};

struct Callbacks {
  // REQUIRED. Runs a task on the agent's thread, e.g. asio::post(io, task).
  // Called from libpmix's thread; must not block.
  std::function<void(std::function<void()>)> post;

  // All LOCAL ranks entered the id-th whole-job fence; local_blob is their
  // combined data (opaque bytes). The agent forwards it to the launcher,
  // which concatenates every host's blob in node order and returns it; the
  // agent then calls fence_done(id, all_blobs). Fences are numbered 0, 1, ...
  // in the order they happen; the k-th fence of every host is the same
  // collective, so the launcher matches contributions by id. libpmix
  // completes fences whose participants are all on this host by itself, so
  // in a one-host job this is never called. REQUIRED for multi-host jobs.
  std::function<void(uint64_t id, std::string local_blob)> fence;

  // A rank called PMIx_Abort (MPI_Abort): status is the exit code it asked
  // for, message its text (OpenMPI sends "N/A"). The rank exits by itself
  // right after; the agent should tear the job down with that status.
  std::function<void(int rank, int status, std::string message)> abort;

  // OPTIONAL. A local rank asked for data of dlaunch rank `rank`, of an
  // MPI_Comm_spawn namespace, on another host (the job's own ranks' data
  // comes with the MPI_Init fence: those requests fail "not found" at once).
  // The agent asks that host's agent, which calls serve_direct_modex(rank,
  // ...) there; then calls direct_modex_done(id, ...) here. Left empty, such
  // requests fail at once with "not found".
  std::function<void(uint64_t id, int rank)> direct_modex;

  // OPTIONAL. Local rank `rank` called PMIx_Spawn (MPI_Comm_spawn) for
  // `apps`; it waits until the agent calls spawn_done(id, ...). Left empty,
  // the call fails at once with PMIX_ERR_NOT_SUPPORTED.
  std::function<void(uint64_t id, int rank, std::vector<SpawnApp> apps)> spawn;

  // OPTIONAL. PMIx_Publish / PMIx_Unpublish / PMIx_Lookup (string and byte
  // object values; others fail "not supported"): the agent keeps the names in the job's name service (the
  // launcher's); a lookup waits until lookup_done(id, ...). `rank` is the
  // dlaunch rank id of the caller. Left empty, they fail "not supported".
  std::function<void(std::vector<Name> names, bool first_read)> publish;
  std::function<void(std::vector<std::string> keys)> unpublish;
  std::function<void(uint64_t id, int rank, std::vector<std::string> keys, bool wait, int timeout_ms)> lookup;

  // OPTIONAL. PMIx_Connect / PMIx_Disconnect (op "connect", "disconnect")
  // or a fence that is not over the whole job (op "fence", with this host's
  // blob: OpenMPI's MPI_Comm_disconnect) over `procs` ("nspace:rank",
  // "nspace:*"), which are not all on this host; answer connect_done(id,
  // ...) once every host joined. Left empty: "not supported".
  std::function<void(uint64_t id, std::string op, std::vector<std::string> procs, std::string blob)> connect;

  // OPTIONAL. A local rank connected to / finalized with the server.
  std::function<void(int rank)> connected;
  std::function<void(int rank)> finalized;
};

class PmixServer {
 public:
  // init() then register_job(map, callbacks): for a caller that knows the
  // job at once (dl_pmix_run, tests). The map's host name is given to libpmix.
  static std::unique_ptr<PmixServer> start(const JobMap& map, Callbacks callbacks);

  // The slow half, which needs no job (100-200 ms on a loaded machine, almost
  // all of it hwloc's topology discovery): discovers this host's topology once
  // and runs PMIx_server_init with its files in tmpdir/pmix (tmpdir must
  // exist; the caller removes it after stop). `hostname`: this host's name in
  // the launcher's plan, or "" when not known yet (libpmix then uses
  // gethostname and rank_env sets PMIX_HOSTNAME from the map). `direct_modex`:
  // whether register_job's callbacks will have a direct_modex function.
  // May run on any thread (the agent runs it on one while it connects).
  // Throws UsageError when a server is already running in this process,
  // IoError when libpmix fails.
  static std::unique_ptr<PmixServer> init(const std::string& tmpdir, const std::string& hostname,
                                          bool direct_modex);
  // The same with a topology discovered beforehand (null: discover here).
  static std::unique_ptr<PmixServer> init(const std::string& tmpdir, const std::string& hostname,
                                          bool direct_modex, std::unique_ptr<LocalTopology> topology);

  // The fast half (about 1 ms): registers the job's namespace and this host's
  // ranks. map.tmpdir must be init's tmpdir. Once per server. Throws
  // UsageError for a bad map or missing post callback, IoError when libpmix
  // fails (message says which call and its status).
  void register_job(const JobMap& map, Callbacks callbacks);

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
  // order). Unknown ids are ignored (e.g. after stop).
  void fence_done(uint64_t id, const std::string& all_blobs);
  // Fails fence `id`: the ranks' PMIx_Fence returns an error (MPI aborts).
  void fence_failed(uint64_t id);

  // Answers spawn request `id` (Callbacks::spawn): an empty `error` with the
  // children's namespace, else the rank's PMIx_Spawn fails (MPI_Comm_spawn
  // returns an error). Unknown ids are ignored.
  void spawn_done(uint64_t id, const std::string& nspace, const std::string& error);

  // Answers lookup `id` (Callbacks::lookup): the names found, else `error`.
  void lookup_done(uint64_t id, const std::vector<Name>& names, const std::string& error);

  // MPI_Comm_spawn's children: registers `children` (their map; this host's
  // ranks of it may be none: then the namespace is only made known, for a
  // spawning rank's peers here) as a namespace spawned by rank `parent_rank`
  // of `parent_nspace`, and each local child as a client. Their events
  // (abort, spawn, lookup) reach the Callbacks as dlaunch rank ids
  // first_id + k. Throws UsageError/IoError as register_job does.
  void register_spawn(const JobMap& children, int first_id);
  // The variables to add to child `rank` (of register_spawn's `children`)
  // before exec, as rank_env does for the job's ranks.
  std::vector<std::pair<std::string, std::string>> spawn_env(const JobMap& children, int rank);

  // Answers direct-modex request `id` (see Callbacks::direct_modex).
  void direct_modex_done(uint64_t id, bool ok, const std::string& blob);
  // Completes connect `id` (Callbacks::connect); ok false fails it; a
  // fence's result is `all_blobs`.
  void connect_done(uint64_t id, bool ok, const std::string& all_blobs);
  // Serves another host's request for the data of local dlaunch rank `rank`; `reply`
  // is delivered through post once libpmix has it (it waits until the rank
  // has committed its data).
  void serve_direct_modex(int rank, std::function<void(bool ok, std::string blob)> reply);

  // For a server whose listener on 127.0.0.1:`tcp_port` (the port of its
  // PMIX_SERVER_URI41) was sealed (listener_seal.h): cuts the clients that
  // reached that port, and from now on refuses at its handshake any client
  // while such a connection exists, with `refused(uid)` told of each other
  // user's (on any thread).
  void refuse_tcp_clients(uint16_t tcp_port, std::function<void(long uid)> refused);

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
  JobMap map_;
  int spawned_local_ = 0;  // children of MPI_Comm_spawn on this host, all spawns
  std::string tmpdir_, pmix_dir_;
  std::unique_ptr<ServerState> state_;
  std::unique_ptr<LocalTopology> topology_;
  bool running_ = false, registered_ = false, with_dmodex_ = false, abandoned_ = false;
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
