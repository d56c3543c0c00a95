#pragma once
// The agent's MPI side of one job: a per-job temp dir and, when dlaunch-agent
// was built with libpmix (DLAUNCH_HAVE_PMIX), the PMIx server of this host's
// ranks (agent/pmix/pmix_server.h). The only agent file that knows libpmix
// exists; without it, available() is false and start() throws UsageError.
//
// Threading: hooks run on the agent's io_context thread (through `post`).
#include <cstdint>
#include <functional>
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
  // `mpi` is the launch message's "mpi" section (control/protocol.h). Creates
  // the job's temp dir (mkdtemp under $TMPDIR or /tmp), starts the PMIx
  // server. Throws UsageError (bad section, no PMIx in this build) or IoError
  // (temp dir, libpmix); nothing is left behind then.
  static std::unique_ptr<MpiJob> start(const nlohmann::json& mpi, MpiHooks hooks);
  // Stops the PMIx server and removes the temp dir.
  ~MpiJob();

  // Variables to add to local rank `rank`'s environment, after dlaunch's own.
  std::vector<std::pair<std::string, std::string>> rank_env(int rank);
  // The launcher's answer to fence `id`: all hosts' blobs, node order.
  void fence_done(uint64_t id, const std::string& all_blobs);
  void fence_failed(uint64_t id);
  const std::string& tmpdir() const { return tmpdir_; }

 private:
  struct Server;
  MpiJob() = default;
  std::string tmpdir_;
  std::unique_ptr<Server> server_;
};

}  // namespace dl::agent
