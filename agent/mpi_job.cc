#include "agent/mpi_job.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>

#include <condition_variable>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "errors/error.h"

#if DLAUNCH_HAVE_PMIX
#include "agent/pmix/local_topology.h"
#include "agent/pmix/pmix_server.h"
#endif

namespace dl::agent {

#if DLAUNCH_HAVE_PMIX
struct MpiJob::Server {
  std::unique_ptr<pmix::PmixServer> pmix;
};

bool MpiJob::available() { return true; }
#else
struct MpiJob::Server {};

bool MpiJob::available() { return false; }
#endif

// What prepare's thread and the agent's thread share.
struct MpiJob::Prep {
  enum State { kReaping, kDiscovering, kInitializing, kDone };
  std::mutex mu;
  std::condition_variable cv;
  State state = kReaping;
  bool cancelled = false;  // release_for_exit came first: stop after discovery
  std::exception_ptr error;
  std::string tmpdir;
  std::unique_ptr<Server> server;
};

namespace {
// PMIx_server_init takes 100-200 ms; a minute means libpmix is stuck.
constexpr auto kPrepareTimeout = std::chrono::seconds(60);
// hwloc plugins whose libraries (OpenCL, X11/GL, libxml2 with ICU) cost most
// of hwloc's start-up and add nothing to the topology ranks need: its own XML
// writer replaces libxml2; the Linux backend reads CPUs, caches and PCI.
constexpr const char* kHwlocBlacklistVar = "HWLOC_PLUGINS_BLACKLIST";
constexpr const char* kHwlocBlacklist = "hwloc_opencl,hwloc_gl,hwloc_xml_libxml";
bool g_set_blacklist = false;  // prepare() set kHwlocBlacklistVar

std::string tmp_base() {
  const char* base = std::getenv("TMPDIR");
  return base && *base ? base : "/tmp";
}

std::string make_tmpdir() {
  std::string tmpl = tmp_base() + "/dlaunch-" + std::to_string(::getpid()) + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw_errno("cannot create the job's temp dir " + tmpl);
  return tmpl;
}

// An agent killed outright (SIGKILL) cannot remove its temp dir
// (<base>/dlaunch-<pid>-XXXXXX) nor its shared-memory dir
// (/dev/shm/dlaunch-<pid>-<namespace>): the next agent on the host removes
// those of this user whose agent pid no longer exists.
void remove_dirs_of_dead_agents(const std::string& base) {
  DIR* d = ::opendir(base.c_str());
  if (d == nullptr) return;
  std::vector<std::string> dead;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("dlaunch-", 0) != 0) continue;
    size_t end = 8;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    if (end == 8 || end >= name.size() || name[end] != '-' || end - 8 > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name.substr(8, end - 8)));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st;
    const std::string path = base + "/" + name;
    if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid()) dead.push_back(path);
  }
  ::closedir(d);
  std::error_code ec;
  for (const auto& path : dead) std::filesystem::remove_all(path, ec);
}
}  // namespace

MpiJob::MpiJob() : server_(std::make_unique<Server>()), prep_(std::make_shared<Prep>()) {}

std::unique_ptr<MpiJob> MpiJob::prepare() {
#if DLAUNCH_HAVE_PMIX
  // Before the thread starts: setenv must not race with readers of environ.
  if (std::getenv(kHwlocBlacklistVar) == nullptr) {
    ::setenv(kHwlocBlacklistVar, kHwlocBlacklist, 1);
    g_set_blacklist = true;
  }
  std::unique_ptr<MpiJob> job(new MpiJob);
  std::thread([prep = job->prep_] {
    remove_dirs_of_dead_agents(tmp_base());
    remove_dirs_of_dead_agents("/dev/shm");
    {
      std::lock_guard<std::mutex> lock(prep->mu);
      prep->state = Prep::kDiscovering;
      prep->cv.notify_all();
    }
    auto topology = std::make_unique<pmix::LocalTopology>();
    {
      std::lock_guard<std::mutex> lock(prep->mu);
      if (prep->cancelled) {
        prep->state = Prep::kDone;
        prep->cv.notify_all();
        return;
      }
      prep->state = Prep::kInitializing;
    }
    std::unique_ptr<Server> server = std::make_unique<Server>();
    std::string tmpdir;
    std::exception_ptr error;
    try {
      tmpdir = make_tmpdir();
      server->pmix = pmix::PmixServer::init(tmpdir, "", false, std::move(topology));
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(prep->mu);
    prep->tmpdir = tmpdir;
    prep->server = std::move(server);
    prep->error = error;
    prep->state = Prep::kDone;
    prep->cv.notify_all();
  }).detach();
  return job;
#else
  return nullptr;
#endif
}

void MpiJob::scrub_rank_env(std::map<std::string, std::string>& env) {
  if (g_set_blacklist) env.erase(kHwlocBlacklistVar);
}

bool MpiJob::wait_prepared(std::chrono::seconds limit) {
  std::unique_lock<std::mutex> lock(prep_->mu);
  if (!prep_->cv.wait_for(lock, limit, [&] { return prep_->state == Prep::kDone; })) return false;
  // Take what the thread made (once).
  if (prep_->server) {
    server_ = std::move(prep_->server);
    tmpdir_ = prep_->tmpdir;
  }
  return true;
}

void MpiJob::start(const nlohmann::json& mpi, MpiHooks hooks) {
#if DLAUNCH_HAVE_PMIX
  if (started_ || released_) throw UsageError("the PMIx server already served a job");
  pmix::JobMap map;
  try {
    map.nspace = mpi.at("nspace");
    map.world_size = mpi.at("world_size");
    map.node_rank = mpi.at("node_rank");
    map.node_hosts = mpi.at("node_hosts").get<std::vector<std::string>>();
    map.node_ranks = mpi.at("node_ranks").get<std::vector<std::vector<int>>>();
    map.universe_size = mpi.value("universe_size", 0);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(std::string("bad mpi section in the launch message: ") + e.what());
  }
  if (!wait_prepared(kPrepareTimeout))
    throw TimeoutError("the PMIx server did not start within 60 s (hwloc's topology or PMIx_server_init is stuck)");
  if (prep_->error) std::rethrow_exception(prep_->error);
  map.tmpdir = tmpdir_;
  pmix::Callbacks cb;
  cb.post = std::move(hooks.post);
  cb.fence = std::move(hooks.fence);
  cb.abort = std::move(hooks.abort);
  server_->pmix->register_job(map, std::move(cb));
  started_ = true;
#else
  (void)mpi, (void)hooks;
  throw UsageError("this dlaunch-agent was built without libpmix: run with --mpi none, or rebuild with libpmix-dev");
#endif
}

void MpiJob::release_for_exit() {
  if (released_) return;
  released_ = true;
  {
    std::unique_lock<std::mutex> lock(prep_->mu);
    // Removing dead agents' dirs takes a few ms: let it finish.
    prep_->cv.wait_for(lock, kPrepareTimeout, [&] { return prep_->state != Prep::kReaping; });
    // Still in hwloc: nothing on disk yet, and the thread will stop there.
    if (prep_->state == Prep::kDiscovering) {
      prep_->cancelled = true;
      return;
    }
  }
  if (!wait_prepared(kPrepareTimeout)) return;  // stuck in libpmix: leave it to the exit
#if DLAUNCH_HAVE_PMIX
  if (server_ && server_->pmix) server_->pmix->abandon();
#endif
  std::error_code ec;
  if (!tmpdir_.empty()) std::filesystem::remove_all(tmpdir_, ec);
}

MpiJob::~MpiJob() {
  if (!released_) {
    {
      std::lock_guard<std::mutex> lock(prep_->mu);
      prep_->cancelled = true;
    }
    wait_prepared(kPrepareTimeout);
  }
#if DLAUNCH_HAVE_PMIX
  if (server_ && server_->pmix && !released_) server_->pmix->stop();
#endif
  server_.reset();
  std::error_code ec;
  if (!tmpdir_.empty()) std::filesystem::remove_all(tmpdir_, ec);
}

std::vector<std::pair<std::string, std::string>> MpiJob::rank_env(int rank) {
#if DLAUNCH_HAVE_PMIX
  if (!started_) return {};
  return server_->pmix->rank_env(rank);
#else
  (void)rank;
  return {};
#endif
}

void MpiJob::fence_done(uint64_t id, const std::string& all_blobs) {
#if DLAUNCH_HAVE_PMIX
  if (started_ && !released_) server_->pmix->fence_done(id, all_blobs);
#else
  (void)id, (void)all_blobs;
#endif
}

void MpiJob::fence_failed(uint64_t id) {
#if DLAUNCH_HAVE_PMIX
  if (started_ && !released_) server_->pmix->fence_failed(id);
#else
  (void)id;
#endif
}

}  // namespace dl::agent
