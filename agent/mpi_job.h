#pragma once
// The agent's MPI side: a temp dir and, when dlaunch-agent was built with
// libpmix (DLAUNCH_HAVE_PMIX), the PMIx server of this host's ranks
// (agent/pmix/pmix_server.h). The only agent file that knows libpmix exists.
//
// Starting a PMIx server costs 100-200 ms (hwloc's topology discovery and
// PMIx_server_init), so it is split: prepare() does that slow half on a
// thread as soon as the agent starts, while it connects to the launcher and
// waits for its launch message; start() waits for it only when the launch
// asks for MPI, and registers the job (about 1 ms).
//
// Threading: hooks run on the agent's io_context thread (through `post`).
// The methods are for the agent's thread.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace dl::agent {

struct MpiHooks {
  std::function<void(std::function<void()>)> post;                 // run on the agent's thread
  std::function<void(uint64_t id, std::string blob)> fence;        // this host's fence contribution
  std::function<void(int rank, int status, std::string msg)> abort;  // a rank called MPI_Abort
};

class MpiJob {
 public:
  // True when this binary can serve PMIx.
  static bool available();
  // Starts the slow half on a thread and returns at once: removes the temp
  // and shared-memory dirs that agents killed outright left (their pid is
  // gone), discovers this host's topology, then makes the temp dir (mkdtemp $TMPDIR/dlaunch-<pid>-XXXXXX, or
  // /tmp) and PMIx_server_init. Null when !available(). Sets
  // HWLOC_PLUGINS_BLACKLIST in this process (unless set) so that hwloc does
  // not load its OpenCL, GL and libxml2 plugins (most of its start-up time);
  // scrub_rank_env removes it again from the ranks' environment.
  static std::unique_ptr<MpiJob> prepare();
  // Removes what prepare() added to this process's environment.
  static void scrub_rank_env(std::map<std::string, std::string>& env);
  // Waits for prepare's thread (at most 60 s) and registers the job: `mpi` is
  // the launch message's "mpi" section (control/protocol.h). Throws
  // UsageError (bad section), IoError (temp dir, libpmix) or TimeoutError.
  void start(const nlohmann::json& mpi, MpiHooks hooks);
  // True after a successful start().
  bool started() const { return started_; }
  // For an agent about to _exit: removes the temp dir and the PMIx server's
  // files without finalizing libpmix (20-50 ms the job's end need not wait
  // for). If prepare's thread is still discovering the topology it is told
  // to stop there and not waited for; if it is in PMIx_server_init, it is
  // waited for. Afterwards only _exit may end the process. Idempotent.
  void release_for_exit();
  // Waits for prepare's thread, stops the PMIx server (unless released),
  // removes the temp dir.
  ~MpiJob();

  // Variables to add to local rank `rank`'s environment, after dlaunch's own.
  // REQUIRES started().
  std::vector<std::pair<std::string, std::string>> rank_env(int rank);
  // The launcher's answer to fence `id`: all hosts' blobs, node order.
  void fence_done(uint64_t id, const std::string& all_blobs);
  void fence_failed(uint64_t id);
  const std::string& tmpdir() const { return tmpdir_; }

 private:
  struct Server;
  struct Prep;
  MpiJob();
  // Waits until prepare's thread has finished (or timeout); false on timeout.
  bool wait_prepared(std::chrono::seconds limit);
  std::string tmpdir_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<Prep> prep_;  // shared with prepare's thread
  bool started_ = false, released_ = false;
};

}  // namespace dl::agent
