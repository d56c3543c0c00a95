#include "agent/mpi_job.h"

#include <stdlib.h>

#include <filesystem>

#include "errors/error.h"

#if DLAUNCH_HAVE_PMIX
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

namespace {
std::string make_tmpdir(const std::string& nspace) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dlaunch-" + nspace + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw_errno("cannot create the job's temp dir " + tmpl);
  return tmpl;
}
}  // namespace

std::unique_ptr<MpiJob> MpiJob::start(const nlohmann::json& mpi, MpiHooks hooks) {
#if DLAUNCH_HAVE_PMIX
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
  std::unique_ptr<MpiJob> job(new MpiJob);
  job->tmpdir_ = make_tmpdir(map.nspace);
  map.tmpdir = job->tmpdir_;
  pmix::Callbacks cb;
  cb.post = std::move(hooks.post);
  cb.fence = std::move(hooks.fence);
  cb.abort = std::move(hooks.abort);
  job->server_ = std::make_unique<Server>();
  job->server_->pmix = pmix::PmixServer::start(map, std::move(cb));  // on throw, ~MpiJob removes tmpdir
  return job;
#else
  (void)mpi, (void)hooks;
  throw UsageError("this dlaunch-agent was built without libpmix: run with --mpi none, or rebuild with libpmix-dev");
#endif
}

MpiJob::~MpiJob() {
#if DLAUNCH_HAVE_PMIX
  if (server_ && server_->pmix) server_->pmix->stop();
#endif
  server_.reset();
  std::error_code ec;
  if (!tmpdir_.empty()) std::filesystem::remove_all(tmpdir_, ec);
}

std::vector<std::pair<std::string, std::string>> MpiJob::rank_env(int rank) {
#if DLAUNCH_HAVE_PMIX
  return server_->pmix->rank_env(rank);
#else
  (void)rank;
  return {};
#endif
}

void MpiJob::fence_done(uint64_t id, const std::string& all_blobs) {
#if DLAUNCH_HAVE_PMIX
  server_->pmix->fence_done(id, all_blobs);
#else
  (void)id, (void)all_blobs;
#endif
}

void MpiJob::fence_failed(uint64_t id) {
#if DLAUNCH_HAVE_PMIX
  server_->pmix->fence_failed(id);
#else
  (void)id;
#endif
}

}  // namespace dl::agent
