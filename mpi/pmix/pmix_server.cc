#include "mpi/pmix/pmix_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "mpi/pmix/job_info.h"
#include "mpi/pmix/listener_seal.h"
#include "mpi/pmix/local_topology.h"
#include "mpi/pmix/server_module.h"
#include "errors/error.h"

namespace dl::mpi::pmix {

void validate_served(const JobMap& map) {
  validate(map);
  if (map.tmpdir.empty())
    throw UsageError("the MPI job map of namespace '" + map.nspace + "': tmpdir is empty; give the per-job directory");
}
namespace {

// How long a registration inside libpmix may take before we give up.
constexpr auto kRegisterTimeout = std::chrono::seconds(30);

// Turns libpmix's asynchronous "done" callback into a bounded wait.
struct OpWaiter {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  pmix_status_t status = PMIX_SUCCESS;

  static void callback(pmix_status_t status, void* cbdata) {
    auto* w = static_cast<OpWaiter*>(cbdata);
    std::lock_guard<std::mutex> lock(w->mu);
    w->status = status;
    w->done = true;
    w->cv.notify_all();
  }
  // Throws TimeoutError/IoError naming `what`.
  void wait(pmix_status_t started, const std::string& what) {
    if (started == PMIX_OPERATION_SUCCEEDED) return;
    if (started != PMIX_SUCCESS)
      throw IoError("pmix: " + what + " failed: " + PMIx_Error_string(started));
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, kRegisterTimeout, [&] { return done; }))
      throw TimeoutError("pmix: " + what + " did not complete within 30 s");
    if (status != PMIX_SUCCESS)
      throw IoError("pmix: " + what + " failed: " + PMIx_Error_string(status));
  }
};

// Makes `path` mode 0700; one that exists already is used only when it is a
// directory of this user that nobody else may enter (another user may have
// made it first, to see or replace the ranks' shared-memory segments).
void make_private_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) == 0) return;
  if (errno != EEXIST) throw_errno("pmix: cannot create " + path);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
    throw IoError("pmix: " + path + " exists and is not a private directory of this user; not using it");
}

}  // namespace

pmix_proc_t make_proc(const std::string& nspace, int rank) {
  pmix_proc_t proc;
  PMIX_PROC_CONSTRUCT(&proc);
  PMIX_LOAD_PROCID(&proc, nspace.c_str(), static_cast<pmix_rank_t>(rank));
  return proc;
}

bool is_local(const JobMap& map, int rank) {
  for (int r : map.node_ranks[map.node_rank])
    if (r == rank) return true;
  return false;
}

namespace {
void free_env(char** env) {
  if (env == nullptr) return;
  for (char** p = env; *p; ++p) std::free(*p);
  std::free(env);
}
}  // namespace

EnvList setup_fork(const std::string& nspace, int rank) {
  pmix_proc_t proc = make_proc(nspace, rank);
  char** env = nullptr;
  pmix_status_t rc = PMIx_server_setup_fork(&proc, &env);
  std::vector<std::pair<std::string, std::string>> out;
  for (char** p = env; p && *p; ++p) {
    const char* eq = std::strchr(*p, '=');
    if (eq) out.emplace_back(std::string(*p, static_cast<size_t>(eq - *p)), std::string(eq + 1));
  }
  free_env(env);
  if (rc != PMIX_SUCCESS)
    throw IoError("pmix: PMIx_server_setup_fork failed for rank " + std::to_string(rank) + " of " + nspace + ": " +
                  PMIx_Error_string(rc));
  return out;
}

PmixServer::~PmixServer() {
  // An abandoned server's libpmix still runs: its state must outlive us.
  if (abandoned_) (void)state_.release(), (void)topology_.release();
  else stop();
}

std::unique_ptr<PmixServer> PmixServer::start(const JobMap& map, MpiHooks hooks) {
  validate_served(map);
  auto server = init(map.tmpdir, map.node_hosts[map.node_rank], false);
  server->register_job(map, std::move(hooks));  // on failure the destructor stops libpmix
  return server;
}

std::unique_ptr<PmixServer> PmixServer::init(const std::string& tmpdir, const std::string& hostname,
                                             bool direct_modex) {
  return init(tmpdir, hostname, direct_modex, nullptr);
}

std::unique_ptr<PmixServer> PmixServer::init(const std::string& tmpdir, const std::string& hostname,
                                             bool direct_modex, std::unique_ptr<LocalTopology> topology) {
  if (tmpdir.empty()) throw UsageError("pmix: init needs a temp dir");
  if (current_state() != nullptr)
    throw UsageError("pmix: a PmixServer is already running in this process (libpmix is a singleton)");
  std::unique_ptr<PmixServer> server(new PmixServer());
  server->tmpdir_ = tmpdir;
  server->pmix_dir_ = tmpdir + "/pmix";
  if (::mkdir(server->pmix_dir_.c_str(), 0700) != 0 && errno != EEXIST)
    throw_errno("pmix: cannot create " + server->pmix_dir_);
  // Upcalls before register_job find an empty namespace and do nothing.
  auto state = std::make_unique<ServerState>();
  set_current_state(state.get());
  server->state_ = std::move(state);
  // One discovery for libpmix and the ranks (PMIX_LOCAL_TOPO).
  server->topology_ = topology ? std::move(topology) : std::make_unique<LocalTopology>();

  pmix_server_module_t module = make_server_module(direct_modex);
  InfoList init;
  init.add_string(PMIX_SERVER_TMPDIR, server->pmix_dir_);
  init.add_string(PMIX_SYSTEM_TMPDIR, server->pmix_dir_);
  init.add_bool(PMIX_SERVER_TOOL_SUPPORT, false);
  init.add_bool(PMIX_SERVER_SYSTEM_SUPPORT, false);
  init.add_bool(PMIX_SERVER_SESSION_SUPPORT, false);
  // A fixed name, so that a rank's environment can be written before this
  // server exists (predicted_rank_env).
  init.add_string(PMIX_SERVER_NSPACE, server_nspace());
  init.add_rank(PMIX_SERVER_RANK, 0);
  // The plan's name of this host when known. Without it libpmix uses
  // gethostname(); the explicit PMIX_LOCAL_PEERS/LOCAL_SIZE registered with
  // the job still give the right locality (tested across namespace hosts
  // named h1 but listed by address), and rank_env sets PMIX_HOSTNAME.
  if (!hostname.empty()) init.add_string(PMIX_HOSTNAME, hostname);
  pmix_topology_t topo{const_cast<char*>("hwloc"), server->topology_->hwloc()};
  if (topo.topology != nullptr) {
    pmix_info_t& info = init.add_raw(PMIX_TOPOLOGY2);
    PMIx_Value_load(&info.value, &topo, PMIX_TOPO);
  }
  pmix_status_t rc = PMIx_server_init(&module, init.data(), init.size());
  if (rc != PMIX_SUCCESS) {
    set_current_state(nullptr);
    std::filesystem::remove_all(server->pmix_dir_);
    throw IoError(std::string("pmix: PMIx_server_init failed: ") + PMIx_Error_string(rc));
  }
  server->running_ = true;
  return server;
}

void PmixServer::register_job(const JobMap& map, MpiHooks hooks) {
  validate_served(map);
  if (!hooks.post) throw UsageError("pmix: MpiHooks::post is required");
  if (!running_) throw UsageError("pmix: register_job needs a running server");
  if (map.tmpdir != tmpdir_) throw UsageError("pmix: the job's tmpdir " + map.tmpdir + " is not the server's " + tmpdir_);
  if (registered_ && map.nspace == map_.nspace)
    throw UsageError("pmix: namespace " + map.nspace + " was registered before; a next attempt needs a new one");
  if (registered_) retire_job();
  map_ = map;
  registered_ = true;
  // Shared-memory segments of killed ranks are removed with this directory.
  if (std::filesystem::is_directory("/dev/shm")) make_private_dir(shm_dir(map_));
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->nspace = map_.nspace;
    state_->id_base[map_.nspace] = 0;
    state_->ns_size[map_.nspace] = map_.world_size;
    state_->ns_local[map_.nspace] = true;
    state_->world_size = map_.world_size;
    state_->hooks = std::move(hooks);
  }
  register_nspace(map_);
}

void PmixServer::retire_job() {
  std::vector<std::string> nspaces;
  std::map<uint64_t, PendingModex> fences, group_fences, dmodex;
  std::map<uint64_t, PendingOp> connects;
  std::map<uint64_t, PendingSpawn> spawns;
  std::map<uint64_t, PendingLookup> lookups;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    ServerState& s = *state_;
    for (const auto& kv : s.id_base) nspaces.push_back(kv.first), s.retired.insert(kv.first);
    s.id_base.clear(), s.ns_size.clear(), s.ns_local.clear();
    s.nspace.clear();
    s.world_size = 0;
    s.hooks = MpiHooks{};  // upcalls until the next job find none (with_state)
    // Every host's server numbers the next job's whole-job fences from 0 (the
    // launcher matches them by id); the other ids go on counting, so that an
    // answer meant for the earlier job matches nothing.
    s.next_fence = 0;
    fences.swap(s.fences), group_fences.swap(s.group_fences), dmodex.swap(s.dmodex);
    connects.swap(s.connects), spawns.swap(s.spawns), lookups.swap(s.lookups);
  }
  // Completed before the namespaces go, while libpmix still holds their
  // trackers; the clients are gone, so nobody reads the failure.
  for (auto& [id, p] : fences) complete_modex(p, PMIX_ERROR, std::string());
  for (auto& [id, p] : group_fences) complete_modex(p, PMIX_ERROR, std::string());
  for (auto& [id, p] : dmodex) complete_modex(p, PMIX_ERR_NOT_FOUND, std::string());
  for (auto& [id, p] : connects) p.fn(PMIX_ERROR, p.cbdata);
  for (auto& [id, p] : lookups) p.fn(PMIX_ERR_NOT_FOUND, nullptr, 0, p.cbdata);
  for (auto& [id, p] : spawns) {
    pmix_nspace_t none;
    PMIX_LOAD_NSPACE(none, "");
    p.fn(PMIX_ERR_NOT_SUPPORTED, none, p.cbdata);
  }
  std::error_code ec;
  for (const auto& ns : nspaces) {
    OpWaiter w;
    pmix_nspace_t name;
    PMIX_LOAD_NSPACE(name, ns.c_str());
    PMIx_server_deregister_nspace(name, OpWaiter::callback, &w);
    w.wait(PMIX_SUCCESS, "deregistering namespace " + ns);
    std::filesystem::remove_all(pmix_dir_ + "/" + ns, ec);
  }
  // The earlier ranks' shared-memory segments (register_job makes the
  // directory again).
  std::filesystem::remove_all(shm_dir(map_), ec);
  spawned_local_ = 0;
  registered_ = false;
}

void PmixServer::register_nspace(const JobMap& map) {
  const std::string nsdir = pmix_dir_ + "/" + map.nspace;
  if (::mkdir(nsdir.c_str(), 0700) != 0 && errno != EEXIST) throw_errno("pmix: cannot create " + nsdir);
  InfoList info;
  build_nspace_info(map, nsdir, topology_ ? topology_->xml() : std::string(), info);
  const auto& local = map.node_ranks[map.node_rank];
  {
    OpWaiter w;
    pmix_nspace_t ns;
    PMIX_LOAD_NSPACE(ns, map.nspace.c_str());
    w.wait(PMIx_server_register_nspace(ns, static_cast<int>(local.size()), info.data(), info.size(),
                                       OpWaiter::callback, &w),
           "registering namespace " + map.nspace);
  }
  for (int rank : local) {
    OpWaiter w;
    pmix_proc_t proc = make_proc(map.nspace, rank);
    w.wait(PMIx_server_register_client(&proc, ::getuid(), ::getgid(), nullptr, OpWaiter::callback, &w),
           "registering rank " + std::to_string(rank) + " of " + map.nspace);
  }
}

std::vector<std::pair<std::string, std::string>> PmixServer::rank_env(int global_rank) {
  if (!running_ || !registered_) throw UsageError("pmix: rank_env needs a running server with a job");
  if (global_rank < 0 || global_rank >= map_.world_size || !is_local(map_, global_rank))
    throw UsageError("pmix: rank " + std::to_string(global_rank) + " is not on host " +
                     map_.node_hosts[map_.node_rank]);
  auto out = setup_fork(map_.nspace, global_rank);
  // The plan's name for this host, also when libpmix was started before the
  // plan was known (init with no hostname).
  bool named = false;
  for (auto& kv : out)
    if (kv.first == "PMIX_HOSTNAME") kv.second = map_.node_hosts[map_.node_rank], named = true;
  if (!named) out.emplace_back("PMIX_HOSTNAME", map_.node_hosts[map_.node_rank]);
  for (auto& kv : ompi_env(map_)) out.push_back(kv);
  return out;
}

void PmixServer::receive(const control::MpiDown& m) {
  std::visit([this](const auto& x) { answer(x); }, m);
}

void PmixServer::seal(uint16_t door_port, uint16_t tcp_port, std::function<void(long uid)> refused) {
  if (!running_) throw UsageError("pmix: seal needs a running server");
  door_port_ = door_port;
  auto sweeper = std::make_shared<TcpClientSweeper>(tcp_port, std::move(refused));
  sweeper->sweep();
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->admit_client = [sweeper] { return sweeper->sweep() == 0; };
}

void PmixServer::abandon() {
  if (!running_) return;
  running_ = false;
  abandoned_ = true;
  std::error_code ec;
  std::filesystem::remove_all(pmix_dir_, ec);
  if (registered_) std::filesystem::remove_all(shm_dir(map_), ec);
}

void PmixServer::stop() {
  if (!running_) return;
  running_ = false;
  PMIx_server_finalize();  // joins libpmix's thread: no upcall runs after this
  set_current_state(nullptr);
  std::error_code ec;
  std::filesystem::remove_all(pmix_dir_, ec);
  if (registered_) std::filesystem::remove_all(shm_dir(map_), ec);
  topology_.reset();
}

}  // namespace dl::mpi::pmix
