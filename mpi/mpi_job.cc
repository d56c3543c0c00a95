#include "mpi/mpi_job.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <iostream>

#include <condition_variable>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "errors/error.h"
#include "errors/temp_dirs.h"
#include "wire/handshake.h"
#include "wire/quiet_thread.h"

#include "mpi/pmix/front_door.h"
#include "mpi/pmix/listener_seal.h"
#include "mpi/pmix/local_topology.h"
#include "mpi/pmix/pmix_loader.h"
#include "mpi/pmix/pmix_server.h"

namespace dl::mpi {

bool MpiJob::available() { return true; }

// What the server thread and the agent's thread share.
struct MpiJob::Prep {
  // kReaping: removing dead agents' dirs; kIdle: waiting for a rank to
  // connect; kStarting: hwloc, libpmix init and the job's registration;
  // kServing: relaying; kFailed: libpmix could not start.
  enum State { kReaping, kIdle, kStarting, kServing, kFailed };
  std::mutex mu;
  std::condition_variable cv;
  State state = kReaping;
  bool thread_done = false;
  bool reap_claimed = false;  // someone is removing dead agents' dirs (once)
  bool reaped = false;        // ... and is done
  bool cancelled = false;  // release_for_exit or the destructor: stop
  std::string error;       // why prepare() failed (then no thread runs)
  int wake[2] = {-1, -1};  // written to when cancelled
  std::unique_ptr<pmix::FrontDoor> door;
  std::optional<JobMap> map;
  MpiHooks hooks;
  std::unique_ptr<pmix::PmixServer> server;
  ~Prep() {
    if (wake[0] >= 0) ::close(wake[0]), ::close(wake[1]);
  }
  void cancel() {
    std::lock_guard<std::mutex> lock(mu);
    cancelled = true;
    if (wake[1] >= 0) (void)!::write(wake[1], "x", 1);
    cv.notify_all();
  }
};

namespace {
// Starting libpmix takes 30-200 ms; a minute means it is stuck.
constexpr auto kStartTimeout = std::chrono::seconds(60);
// hwloc plugins whose libraries (OpenCL, X11/GL, libxml2 with ICU) cost most
// of hwloc's start-up and add nothing to the topology ranks need: its own XML
// writer replaces libxml2; the Linux backend reads CPUs, caches and PCI.
constexpr const char* kHwlocBlacklistVar = "HWLOC_PLUGINS_BLACKLIST";
constexpr const char* kHwlocBlacklist = "hwloc_opencl,hwloc_gl,hwloc_xml_libxml";
bool g_set_blacklist = false;  // prepare() set kHwlocBlacklistVar

// libpmix's listener once sealed: a Unix socket in the job's 0700 temp dir.
std::string listener_path(const std::string& tmpdir) { return tmpdir + "/pmix.sock"; }

// The job's temp dir is named here and made only when a rank connects
// (serve): a job that never calls MPI_Init makes and removes no directory
// (on ext4 with online discard each rmdir took 4 ms). The name is
// unguessable and its mkdir fails if it exists, as mkdtemp's would.
std::string tmpdir_name() { return temp_base() + "/" + temp_dir_prefix("mpi") + wire::to_hex(wire::random_bytes(6)); }
}  // namespace



// An agent killed outright (SIGKILL) cannot remove its temp dir nor its
// shared-memory dir (/dev/shm/dlaunch-<pid>-shm-...): the next agent on the
// host removes those of this user whose agent is gone (errors/temp_dirs.h).
// Removes dead agents' dirs once per agent, on whichever thread comes first:
// the server thread at its start, or an agent leaving before that thread ran
// (under load it may not have been scheduled yet; the agent does not wait).
void MpiJob::reap_dead_agents(Prep& prep) {
  {
    std::lock_guard<std::mutex> lock(prep.mu);
    if (prep.reap_claimed) return;
    prep.reap_claimed = true;
  }
  reap_stale_temp_dirs(temp_base());
  reap_stale_temp_dirs("/dev/shm");
  std::lock_guard<std::mutex> lock(prep.mu);
  prep.reaped = true;
  prep.cv.notify_all();
}

MpiJob::MpiJob() : prep_(std::make_shared<Prep>()) {}

std::unique_ptr<MpiJob> MpiJob::prepare() {
  // Before the thread starts: setenv must not race with readers of environ.
  if (std::getenv(kHwlocBlacklistVar) == nullptr) {
    ::setenv(kHwlocBlacklistVar, kHwlocBlacklist, 1);
    g_set_blacklist = true;
  }
  pmix::select_hash_store();
  std::unique_ptr<MpiJob> job(new MpiJob);
  Prep& p = *job->prep_;
  try {
    job->tmpdir_ = tmpdir_name();
    p.door = std::make_unique<pmix::FrontDoor>();
    if (::pipe2(p.wake, O_CLOEXEC) != 0) throw_errno("pipe");
  } catch (const Error& e) {
    p.error = e.what();
    p.state = Prep::kFailed;
    p.thread_done = true;
    return job;
  }
  // Quiet (wire/quiet_thread.h): it sleeps in poll until a rank connects,
  // and libpmix's threads, started from it, inherit its mask.
  wire::quiet_thread([prep = job->prep_, dir = job->tmpdir_] { serve(prep, dir); }).detach();
  return job;
}

// The server thread: dead agents' dirs, then a wait for the first rank to
// connect; then the topology, libpmix, the job's registration and the relay.
void MpiJob::serve(std::shared_ptr<Prep> prep, std::string tmpdir) {
  auto finish = [&](Prep::State state) {
    std::lock_guard<std::mutex> lock(prep->mu);
    prep->state = state;
    prep->thread_done = true;
    prep->cv.notify_all();
  };
  // Moves to `next` unless cancelled; false when cancelled.
  auto advance = [&](Prep::State next) {
    std::lock_guard<std::mutex> lock(prep->mu);
    if (prep->cancelled) return false;
    prep->state = next;
    prep->cv.notify_all();
    return true;
  };
  // libpmix and hwloc are loaded only once a rank connects (below): their
  // 0.6 ms of dlopen ran beside every job's start, MPI or not, and cost a
  // job of /bin/true more than it saved an MPI one (docs/benchmarks.md).
  reap_dead_agents(*prep);
  if (!advance(Prep::kIdle)) return finish(Prep::kIdle);
  // Until a rank of the agent's user connects (MPI_Init) or the agent
  // leaves; another user's connection is refused here and starts nothing.
  // Nothing of hwloc or libpmix has run so far, so an agent leaving now waits
  // for nothing. (The topology is not discovered ahead either: that cost a
  // job of /bin/true measurable CPU, and gained an MPI job nothing measurable.)
  if (!prep->door->admit(prep->wake[0]) || !advance(Prep::kStarting)) return finish(Prep::kIdle);
  uint16_t upstream = 0;
  std::unique_ptr<pmix::ListenerSeal> seal;
  try {
    // Made now, by the first rank's connection (tmpdir_name); PmixServer
    // makes pmix/ in it, and pmix/<nspace> and the /dev/shm dir at register_job.
    if (::mkdir(tmpdir.c_str(), 0700) != 0) throw_errno("cannot create the job's temp dir " + tmpdir);
    pmix::preload();  // libpmix and hwloc (pmix_loader.h); names what to install if one is missing
    auto topology = std::make_unique<pmix::LocalTopology>();
    // Direct modex: for MPI_Comm_spawn's children on another host (the
    // job's own ranks' data comes with the MPI_Init fence).
    auto server = pmix::PmixServer::init(tmpdir, "", true, std::move(topology));
    JobMap map;
    MpiHooks hooks;
    {
      // The job arrives before any rank exists; only a stray local client
      // can come first.
      std::unique_lock<std::mutex> lock(prep->mu);
      if (!prep->cv.wait_for(lock, kStartTimeout, [&] { return prep->map || prep->cancelled; }))
        throw TimeoutError("a client connected to the ranks' PMIx port, but no MPI job came within 60 s");
      if (prep->cancelled) {
        prep->server = std::move(server);
        lock.unlock();
        return finish(Prep::kFailed);
      }
      map = *prep->map;
      hooks = prep->hooks;
    }
    server->register_job(map, std::move(hooks));
    // The environment the ranks were started with must be what libpmix would
    // have given them (pmix::predicted_rank_env); a libpmix that differs is
    // named here rather than left to fail obscurely in MPI_Init.
    const int first = map.node_ranks[map.node_rank].front();
    const auto real = server->rank_env(first);
    for (auto& kv : real)
      if (kv.first == "PMIX_SERVER_URI41") upstream = pmix::uri_port(kv.second);
    if (upstream == 0) throw IoError("pmix: libpmix gave no tcp4 loopback PMIX_SERVER_URI41");
    // Only the door reaches libpmix from here on (pmix/listener_seal.h).
    seal = std::make_unique<pmix::ListenerSeal>(upstream, listener_path(tmpdir));
    server->seal(prep->door->port(), upstream, [](long uid) {
      std::cerr << "dlaunch-agent: warning: cut a connection that reached libpmix's own port, from " +
                       pmix::describe_user(uid) + "\n";
    });
    for (auto& m : pmix::env_mismatches(pmix::predicted_rank_env(map, first, prep->door->port()), real))
      std::cerr << "dlaunch-agent: warning: a rank's PMIx environment differs from libpmix's: " + m + "\n";
    std::lock_guard<std::mutex> lock(prep->mu);
    prep->server = std::move(server);
    if (prep->cancelled) {
      prep->state = Prep::kFailed;
      prep->thread_done = true;
      prep->cv.notify_all();
      return;
    }
    prep->state = Prep::kServing;
    prep->cv.notify_all();
  } catch (const Error& e) {
    std::cerr << std::string("dlaunch-agent: error: cannot start the PMIx server for this host's ranks (") + e.what() +
                     "); their MPI_Init fails\n";
    prep->door->close_listener();  // waiting and later clients fail at once
    return finish(Prep::kFailed);
  }
  prep->door->relay(listener_path(tmpdir), prep->wake[0], [&seal] { seal->wake(); });
  finish(Prep::kServing);
}

void MpiJob::scrub_rank_env(std::map<std::string, std::string>& env) {
  if (g_set_blacklist) env.erase(kHwlocBlacklistVar);
}

std::vector<std::pair<std::string, std::string>> MpiJob::unserved_rank_env(const control::msg::MpiSection& mpi,
                                                                           int rank, uint16_t port) {
  JobMap map = job_map_from(mpi);
  map.tmpdir = tmpdir_name();  // never made: no server runs
  return pmix::predicted_rank_env(map, rank, port);
}

void MpiJob::start(const control::msg::MpiSection& mpi, MpiHooks hooks) {
  if (released_) throw UsageError("the PMIx server was released");
  JobMap map = job_map_from(mpi);
  {
    std::lock_guard<std::mutex> lock(prep_->mu);
    if (!prep_->error.empty()) throw IoError(prep_->error);
  }
  map.tmpdir = tmpdir_;
  // One shared-memory dir for the agent's life: every attempt's ranks use it
  // (register_job empties it for the next), release_for_exit removes it.
  map.shm_dir = started_ ? shm_dir_ : "/dev/shm/" + temp_dir_prefix("shm") + wire::to_hex(wire::random_bytes(8));
  pmix::validate_served(map);
  // The server thread makes them when a rank connects (tmpdir_name);
  // release_for_exit removes whatever exists of them.
  shm_dir_ = pmix::shm_dir(map);
  if (!hooks.post) throw UsageError("the PMIx server needs MpiHooks::post");
  rank_env_.clear(), local_ranks_.clear();
  pmix::PmixServer* serving = nullptr;
  {
    std::unique_lock<std::mutex> lock(prep_->mu);
    if (started_) {
      // A next attempt (--max-restarts). libpmix being started for a rank of
      // the last one: let it finish, so that the new job is registered after it.
      if (!prep_->cv.wait_for(lock, kStartTimeout, [&] { return prep_->state != Prep::kStarting; }))
        throw TimeoutError("the PMIx server did not finish starting within 60 s");
      if (prep_->state == Prep::kServing) serving = prep_->server.get();
    }
    prep_->map = map;
    prep_->hooks = hooks;
    prep_->cv.notify_all();
  }
  // Serving already: the new namespace goes to libpmix now (about 1 ms),
  // before the next attempt's ranks exist; otherwise the server thread
  // registers it when the first rank connects.
  if (serving) serving->register_job(map, std::move(hooks));
  started_ = true;
}

void MpiJob::remove_dirs() {
  std::error_code ec;
  if (!shm_dir_.empty()) std::filesystem::remove_all(shm_dir_, ec);
  if (!tmpdir_.empty()) std::filesystem::remove_all(tmpdir_, ec);
}

void MpiJob::release_for_exit() {
  if (released_) return;
  released_ = true;
  prep_->cancel();
  reap_dead_agents(*prep_);
  {
    // The server thread may be removing dead agents' dirs (a moment): let it
    // finish. libpmix is starting for a rank that connected: let it finish
    // too, so that nothing it creates outlives the removal below.
    std::unique_lock<std::mutex> lock(prep_->mu);
    prep_->cv.wait_for(lock, kStartTimeout, [&] {
      return prep_->thread_done || (prep_->reaped && prep_->state != Prep::kStarting);
    });
    if (prep_->server) prep_->server->abandon();
  }
  remove_dirs();
}

MpiJob::~MpiJob() {
  prep_->cancel();
  {
    std::unique_lock<std::mutex> lock(prep_->mu);
    prep_->cv.wait_for(lock, kStartTimeout, [&] { return prep_->thread_done; });
    if (prep_->thread_done && prep_->server && !released_) prep_->server->stop();
  }
  remove_dirs();
}

std::vector<std::pair<std::string, std::string>> MpiJob::rank_env(int rank) {
  if (!started_) return {};
  // Every variable but PMIX_RANK is the job's: computed for the first rank
  // asked about (which checks that it lives here), copied for the others.
  if (rank_env_.empty()) {
    std::lock_guard<std::mutex> lock(prep_->mu);
    rank_env_ = pmix::predicted_rank_env(*prep_->map, rank, prep_->door->port());
    local_ranks_ = prep_->map->node_ranks.at(static_cast<size_t>(prep_->map->node_rank));
    std::sort(local_ranks_.begin(), local_ranks_.end());
  } else if (!std::binary_search(local_ranks_.begin(), local_ranks_.end(), rank)) {
    throw UsageError("pmix: rank " + std::to_string(rank) + " is not on this host");
  }
  auto env = rank_env_;
  for (auto& [k, v] : env)
    if (k == "PMIX_RANK") v = std::to_string(rank);
  return env;
}

pmix::PmixServer* MpiJob::serving() const {
  std::lock_guard<std::mutex> lock(prep_->mu);
  return prep_->state == Prep::kServing && !released_ ? prep_->server.get() : nullptr;
}

bool MpiJob::receive(const control::MpiDown& m) {
  pmix::PmixServer* server = serving();
  if (server) server->receive(m);
  return server != nullptr;
}

void MpiJob::fence_done(uint64_t id, const std::string& all_blobs) {
  if (auto* server = serving()) server->fence_done(id, all_blobs);
}

}  // namespace dl::mpi
