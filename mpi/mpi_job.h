#pragma once
// The PMIx half of the agent's MPI side (mpi/mpi_side.h): the life of the
// PMIx server of this host's ranks (mpi/pmix/pmix_server.h) on a thread of
// its own, and its temp dir. What the server says and hears is the
// server's (control::MpiUp through MpiHooks, receive(MpiDown)); MpiJob only
// hands it on while the server serves.
//
// Built on the PMIx server in mpi_job.cc; a dlaunch-agent built without
// libpmix takes mpi/pmix_none.cc instead (CMake picks one), where
// available() is false and prepare() makes nothing.
//
// Starting a PMIx server costs 30-200 ms (hwloc's topology discovery and
// PMIx_server_init), which a job that never calls MPI_Init must not pay
// (docs/mpi.md, "Cost for non-MPI programs"). So ranks never wait for it:
// prepare() opens a loopback port at once (pmix/front_door.h) and every rank
// is told that port as its server's address, and a thread waits on it. Only
// when a rank connects (MPI_Init) does it discover the topology, start
// libpmix, register the job and relay the waiting connections to libpmix's
// listener.
// A job whose ranks never connect never starts libpmix, and its agent leaves
// without waiting for anything.
//
// Threading: hooks run on the agent's io_context thread (through `post`).
// The methods are for the agent's thread; the server thread is internal.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "control/messages.h"
#include "mpi/mpi_hooks.h"

namespace dl::mpi {

namespace pmix { class PmixServer; }

class MpiJob {
 public:
  // True when this binary can serve PMIx.
  static bool available();
  // Names the temp dir ($TMPDIR/dlaunch-<pid>-mpi-..., or /tmp; made
  // with the PMIx server when a rank connects, so a job that never calls
  // MPI_Init makes no directory), opens the ranks' PMIx port, and starts the
  // server thread: it removes the temp and shared-memory dirs that agents
  // killed outright left (errors/temp_dirs.h), then waits for a rank to connect.
  // Null when !available(). Sets HWLOC_PLUGINS_BLACKLIST in this process
  // (unless set) so that hwloc does not load its OpenCL, GL and libxml2
  // plugins (most of its start-up time); scrub_rank_env removes it again from
  // the ranks' environment.
  static std::unique_ptr<MpiJob> prepare();
  // Removes what prepare() added to this process's environment.
  static void scrub_rank_env(std::map<std::string, std::string>& env);
  // Hands the job to the server thread and returns at once: `mpi` is the
  // launch message's mpi section (control/messages.h); `hooks` go to the
  // server (post is required). Called again for the job's next attempt
  // (--max-restarts), with a namespace of its own: the same server and
  // port serve it, and once libpmix runs the earlier attempt's namespace is
  // retired and the new one registered here (PmixServer::register_job; it
  // may wait while libpmix is starting for a rank of the earlier attempt).
  // Throws UsageError (bad section, a namespace served before) or IoError
  // (prepare could not make the temp dir or port, libpmix refused the
  // registration). A server that fails later (libpmix) is reported on
  // stderr, and the ranks' MPI_Init fails.
  void start(const control::msg::MpiSection& mpi, MpiHooks hooks);
  // Per-node mode (mpi/pmix_tripwire.h): the PMIx variables local rank
  // `rank` of `mpi` would get, pointing at 127.0.0.1:`port`, where no server
  // runs. Empty without libpmix. Throws UsageError for a rank not on this host.
  static std::vector<std::pair<std::string, std::string>> unserved_rank_env(const control::msg::MpiSection& mpi,
                                                                            int rank, uint16_t port);
  // True after a successful start() (of any attempt).
  bool started() const { return started_; }
  // For an agent about to _exit: removes the temp dir, the shared-memory dir
  // and the PMIx server's files without finalizing libpmix (20-50 ms the
  // job's end need not wait for). Waits only while libpmix is being started
  // for a rank that connected; otherwise the server thread is told to stop
  // and not waited for. Afterwards only _exit may end the process.
  // Idempotent.
  void release_for_exit();
  // Stops the server thread and waits for it, stops the PMIx server (unless
  // released), removes the temp dirs.
  ~MpiJob();

  // Variables to add to local rank `rank`'s environment, after dlaunch's own:
  // what the PMIx server will give it (pmix::predicted_rank_env), pointing at
  // the ranks' PMIx port. REQUIRES started(). Throws UsageError for a rank
  // that does not live on this host.
  std::vector<std::pair<std::string, std::string>> rank_env(int rank);
  // While the server serves: hands it the launcher's message (PmixServer::
  // receive) and returns true. False when it does not serve (not started,
  // failed, released): the caller answers for it.
  bool receive(const control::MpiDown& m);
  // The launcher's answer to fence `id`: all hosts' blobs, node order;
  // dropped unless the server serves.
  void fence_done(uint64_t id, const std::string& all_blobs);
  const std::string& tmpdir() const { return tmpdir_; }

 private:
  struct Prep;
  // The PMIx server while it serves a job, else null.
  pmix::PmixServer* serving() const;
  MpiJob();
  static void serve(std::shared_ptr<Prep> prep, std::string tmpdir);
  static void reap_dead_agents(Prep& prep);
  void remove_dirs();
  std::string tmpdir_, shm_dir_;
  std::shared_ptr<Prep> prep_;  // shared with the server thread
  // rank_env's: the job's PMIx variables (PMIX_RANK set per rank), and the
  // ranks of this host, sorted.
  std::vector<std::pair<std::string, std::string>> rank_env_;
  std::vector<int> local_ranks_;
  bool started_ = false, released_ = false;
};

}  // namespace dl::mpi
