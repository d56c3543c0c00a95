#include "mpi/pmix/pmix_server.h"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
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

// libpmix's MCA variable for its data store ("gds"), read at PMIx_server_init.
constexpr const char* kGdsVar = "PMIX_MCA_gds";

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

void free_env(char** env) {
  if (env == nullptr) return;
  for (char** p = env; *p; ++p) std::free(*p);
  std::free(env);
}

// libpmix's variables for `rank` of `nspace` (PMIx_server_setup_fork).
// Throws IoError naming the rank when libpmix fails.
std::vector<std::pair<std::string, std::string>> setup_fork(const std::string& nspace, int rank) {
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

std::string shm_dir(const JobMap& map) {
  if (!map.shm_dir.empty()) return map.shm_dir;
  // Named for the job's temp dir (dlaunch-<pid>-<random>), never for the
  // job's namespace: every user can list /dev/shm.
  const std::string base = std::filesystem::path(map.tmpdir).filename().string();
  const size_t dash = base.rfind('-');
  return "/dev/shm/dlaunch-" + std::to_string(::getpid()) + "-" + (dash == std::string::npos ? base : base.substr(dash + 1));
}

std::vector<std::pair<std::string, std::string>> ompi_env(const JobMap& map) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"OMPI_MCA_schizo", "^orte"}, {"OMPI_MCA_orte_tmpdir_base", map.tmpdir}};
  // register_job makes it when /dev/shm exists; a rank's environment is
  // written before that (predicted_rank_env), so the same test decides here.
  if (std::filesystem::is_directory("/dev/shm"))
    env.emplace_back("OMPI_MCA_btl_vader_backing_directory", shm_dir(map));
  // mpirun does the same when it oversubscribes: busy-polling ranks that
  // outnumber the cpus starve each other.
  cpu_set_t cpus;
  long ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : sysconf(_SC_NPROCESSORS_ONLN);
  if (static_cast<long>(map.node_ranks[map.node_rank].size()) > ncpu && !getenv("OMPI_MCA_mpi_yield_when_idle"))
    env.emplace_back("OMPI_MCA_mpi_yield_when_idle", "1");
  return env;
}

void select_hash_store() { ::setenv(kGdsVar, "hash", 1); }

std::string server_nspace() { return "pmix-server." + std::to_string(::getpid()); }

namespace {
// The URI variables libpmix 4.2's setup_fork writes, one per protocol version
// a client may speak; all hold the same address.
constexpr const char* kUriVars[] = {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
                                    "PMIX_SERVER_URI21", "PMIX_SERVER_URI2"};
bool is_uri_var(const std::string& name) {
  for (const char* v : kUriVars)
    if (name == v) return true;
  return false;
}

// The version of the libpmix headers dl_pmix was compiled against, as
// "4.2.2": a rank's environment is written before libpmix is loaded (the
// agent loads it on its PMIx thread, pmix_loader.h), and asking the library
// (PMIx_Get_version) made the first rank wait for that. Clients read only
// the numbers (major, minor, release); env_mismatches compares this with
// the loaded library's when the server starts.
std::string library_version() {
  return std::to_string(PMIX_VERSION_MAJOR) + "." + std::to_string(PMIX_VERSION_MINOR) + "." +
         std::to_string(PMIX_VERSION_RELEASE);
}

// "4.2.2" out of "4.2.2rc2": what a client reads of PMIX_VERSION.
std::string version_numbers(const std::string& v) {
  size_t end = 0;
  while (end < v.size() && (std::isdigit(static_cast<unsigned char>(v[end])) || v[end] == '.')) ++end;
  while (end > 0 && v[end - 1] == '.') --end;
  return v.substr(0, end);
}
}  // namespace

uint16_t uri_port(const std::string& uri) {
  const std::string tag = ";tcp4://127.0.0.1:";
  auto at = uri.find(tag);
  if (at == std::string::npos) return 0;
  try {
    long port = std::stol(uri.substr(at + tag.size()));
    return port > 0 && port < 65536 ? static_cast<uint16_t>(port) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

void point_uris_at(std::vector<std::pair<std::string, std::string>>& env, uint16_t port) {
  const std::string uri = server_nspace() + ".0;tcp4://127.0.0.1:" + std::to_string(port);
  for (auto& [k, v] : env)
    if (is_uri_var(k)) v = uri;
}

std::vector<std::pair<std::string, std::string>> predicted_rank_env(const JobMap& map, int global_rank,
                                                                    uint16_t port) {
  validate_served(map);
  if (global_rank < 0 || global_rank >= map.world_size || !is_local(map, global_rank))
    throw UsageError("pmix: rank " + std::to_string(global_rank) + " is not on host " +
                     map.node_hosts[map.node_rank]);
  const std::string pmix_dir = map.tmpdir + "/pmix";
  std::vector<std::pair<std::string, std::string>> env = {
      {"PMIX_NAMESPACE", map.nspace},
      {"PMIX_RANK", std::to_string(global_rank)},
      {"PMIX_SERVER_TMPDIR", pmix_dir},
      {"PMIX_SYSTEM_TMPDIR", pmix_dir},
      {"PMIX_VERSION", library_version()},
      {"PMIX_SECURITY_MODE", "native"},
      {"PMIX_BFROP_BUFFER_TYPE", "PMIX_BFROP_BUFFER_NON_DESC"},
      {"PMIX_GDS_MODULE", "hash"},
      {"PMIX_HOSTNAME", map.node_hosts[map.node_rank]},
  };
  for (const char* v : kUriVars) env.emplace_back(v, "");
  point_uris_at(env, port);
  for (auto& kv : ompi_env(map)) env.push_back(kv);
  return env;
}

std::vector<std::string> env_mismatches(const std::vector<std::pair<std::string, std::string>>& predicted,
                                        const std::vector<std::pair<std::string, std::string>>& real) {
  auto strip = [](const std::string& name, const std::string& value) {
    if (name == "PMIX_VERSION") return version_numbers(value);
    return is_uri_var(name) ? value.substr(0, value.find(';')) : value;
  };
  std::map<std::string, std::string> p(predicted.begin(), predicted.end()), r(real.begin(), real.end());
  std::vector<std::string> out;
  for (auto& [k, v] : r) {
    auto it = p.find(k);
    if (it == p.end()) out.push_back(k + ": predicted nothing, libpmix '" + v + "'");
    else if (strip(k, it->second) != strip(k, v))
      out.push_back(k + ": predicted '" + it->second + "', libpmix '" + v + "'");
  }
  for (auto& [k, v] : p)
    if (!r.count(k)) out.push_back(k + ": predicted '" + v + "', libpmix nothing");
  return out;
}

PmixServer::~PmixServer() {
  // An abandoned server's libpmix still runs: its state must outlive us.
  if (abandoned_) (void)state_.release(), (void)topology_.release();
  else stop();
}

std::unique_ptr<PmixServer> PmixServer::start(const JobMap& map, Callbacks callbacks) {
  validate_served(map);
  auto server = init(map.tmpdir, map.node_hosts[map.node_rank], static_cast<bool>(callbacks.direct_modex));
  server->register_job(map, std::move(callbacks));  // on failure the destructor stops libpmix
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
  server->with_dmodex_ = direct_modex;
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

void PmixServer::register_job(const JobMap& map, Callbacks callbacks) {
  validate_served(map);
  if (!callbacks.post) throw UsageError("pmix: Callbacks::post is required");
  if (!running_ || registered_) throw UsageError("pmix: register_job needs a running server without a job");
  if (map.tmpdir != tmpdir_) throw UsageError("pmix: the job's tmpdir " + map.tmpdir + " is not the server's " + tmpdir_);
  if (static_cast<bool>(callbacks.direct_modex) != with_dmodex_)
    throw UsageError("pmix: direct_modex given to init and register_job differently");
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
    state_->cb = std::move(callbacks);
  }
  register_nspace(map_);
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

void PmixServer::register_spawn(const JobMap& children, int first_id) {
  validate_served(children);
  if (!running_ || !registered_) throw UsageError("pmix: register_spawn needs a running server with a job");
  if (children.tmpdir != tmpdir_) throw UsageError("pmix: the children's tmpdir is not the server's");
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->id_base.count(children.nspace)) throw UsageError("pmix: namespace " + children.nspace + " is served already");
    state_->id_base[children.nspace] = first_id;
    state_->ns_size[children.nspace] = children.world_size;
    state_->ns_local[children.nspace] = !children.node_ranks[children.node_rank].empty();
  }
  spawned_local_ += static_cast<int>(children.node_ranks[children.node_rank].size());
  register_nspace(children);
}

std::vector<std::pair<std::string, std::string>> PmixServer::spawn_env(const JobMap& children, int rank) {
  if (!running_ || !registered_) throw UsageError("pmix: spawn_env needs a running server with a job");
  auto out = setup_fork(children.nspace, rank);
  out.emplace_back("PMIX_HOSTNAME", children.node_hosts[children.node_rank]);
  // The job's OpenMPI settings; the children count towards oversubscription.
  JobMap all = map_;
  for (int k = 0; k < spawned_local_; ++k) all.node_ranks[all.node_rank].push_back(all.world_size + k);
  for (auto& kv : ompi_env(all)) out.push_back(kv);
  return out;
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

namespace {

// Removes and returns pending[id]; fn == nullptr when there is none.
template <class Pending>
Pending take(ServerState* s, std::map<uint64_t, Pending> ServerState::*which, uint64_t id) {
  if (s == nullptr) return {};
  std::lock_guard<std::mutex> lock(s->mu);
  auto& pending = s->*which;
  auto it = pending.find(id);
  if (it == pending.end()) return {};
  Pending p = it->second;
  pending.erase(it);
  return p;
}

void dmodex_reply(pmix_status_t status, char* data, size_t size, void* cbdata) {
  auto* reply = static_cast<std::function<void(bool, std::string)>*>(cbdata);
  std::string blob(data ? data : "", data ? size : 0);
  ServerState* s = current_state();
  if (s != nullptr) {
    bool ok = status == PMIX_SUCCESS;
    auto fn = std::move(*reply);
    s->cb.post([fn, ok, blob = std::move(blob)] { fn(ok, blob); });
  }
  delete reply;
}

}  // namespace

void PmixServer::fence_done(uint64_t id, const std::string& all_blobs) {
  PendingModex p = take(state_.get(), &ServerState::fences, id);
  if (p.fn) complete_modex(p, PMIX_SUCCESS, all_blobs);
}

void PmixServer::fence_failed(uint64_t id) {
  PendingModex p = take(state_.get(), &ServerState::fences, id);
  if (p.fn) complete_modex(p, PMIX_ERROR, std::string());
}

void PmixServer::spawn_done(uint64_t id, const std::string& nspace, const std::string& error) {
  PendingSpawn p = take(state_.get(), &ServerState::spawns, id);
  if (!p.fn) return;
  pmix_nspace_t ns;
  PMIX_LOAD_NSPACE(ns, nspace.c_str());
  p.fn(error.empty() ? PMIX_SUCCESS : PMIX_ERR_NOT_SUPPORTED, ns, p.cbdata);
}

void PmixServer::lookup_done(uint64_t id, const std::vector<Name>& names, const std::string& error) {
  PendingLookup p = take(state_.get(), &ServerState::lookups, id);
  if (!p.fn) return;
  if (!error.empty()) return p.fn(error.rfind("timed out", 0) == 0 ? PMIX_ERR_TIMEOUT : PMIX_ERR_NOT_FOUND, nullptr, 0, p.cbdata);
  std::vector<pmix_pdata_t> data(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    PMIX_PDATA_CONSTRUCT(&data[i]);
    PMIX_LOAD_PROCID(&data[i].proc, names[i].nspace.c_str(), static_cast<pmix_rank_t>(names[i].rank));
    PMIX_LOAD_KEY(data[i].key, names[i].key.c_str());
    if (names[i].bytes) {
      const std::string raw = from_hex(names[i].value);
      pmix_byte_object_t bo{const_cast<char*>(raw.data()), raw.size()};
      PMIx_Value_load(&data[i].value, &bo, PMIX_BYTE_OBJECT);  // copies
    } else {
      PMIx_Value_load(&data[i].value, names[i].value.c_str(), PMIX_STRING);
    }
  }
  // libpmix packs the reply before returning: the data may go afterwards.
  p.fn(PMIX_SUCCESS, data.data(), data.size(), p.cbdata);
  for (auto& d : data) PMIX_PDATA_DESTRUCT(&d);
}

void PmixServer::direct_modex_done(uint64_t id, bool ok, const std::string& blob) {
  PendingModex p = take(state_.get(), &ServerState::dmodex, id);
  if (p.fn) complete_modex(p, ok ? PMIX_SUCCESS : PMIX_ERR_NOT_FOUND, blob);
}

void PmixServer::connect_done(uint64_t id, bool ok, const std::string& all_blobs) {
  PendingOp p = take(state_.get(), &ServerState::connects, id);
  if (p.fn) return p.fn(ok ? PMIX_SUCCESS : PMIX_ERROR, p.cbdata);
  PendingModex f = take(state_.get(), &ServerState::group_fences, id);
  if (f.fn) complete_modex(f, ok ? PMIX_SUCCESS : PMIX_ERROR, ok ? all_blobs : std::string());
}

void PmixServer::serve_direct_modex(int rank, std::function<void(bool ok, std::string blob)> reply) {
  std::string nspace;
  int in_ns = -1;
  bool local = false;
  if (running_ && registered_) {
    std::lock_guard<std::mutex> lock(state_->mu);
    local = proc_of(*state_, rank, &nspace, &in_ns) && state_->ns_local[nspace] &&
            (nspace != map_.nspace || is_local(map_, in_ns));
  }
  if (!local) {
    state_->cb.post([reply] { reply(false, std::string()); });
    return;
  }
  pmix_proc_t proc = make_proc(nspace, in_ns);
  auto* holder = new std::function<void(bool, std::string)>(std::move(reply));
  pmix_status_t rc = PMIx_server_dmodex_request(&proc, dmodex_reply, holder);
  if (rc != PMIX_SUCCESS) {
    auto fn = std::move(*holder);
    delete holder;
    state_->cb.post([fn] { fn(false, std::string()); });
  }
}

void PmixServer::refuse_tcp_clients(uint16_t tcp_port, std::function<void(long uid)> refused) {
  if (!running_) throw UsageError("pmix: refuse_tcp_clients needs a running server");
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
