#include "mpi/mpi_side.h"

#include <iostream>

#include "errors/error.h"
#include "mpi/mpi_job.h"
#include "mpi/pmi/pmi_job.h"
#include "mpi/pmi/pmi_service.h"
#include "mpi/pmix_tripwire.h"

namespace dl::mpi {

namespace asio = boost::asio;
namespace msg = control::msg;

MpiSide::MpiSide(asio::io_context& io, MpiHooks hooks) : io_(io), hooks_(std::move(hooks)) {
  hooks_.post = [this](std::function<void()> task) { asio::post(io_, std::move(task)); };
}

// The PMIx server's thread is stopped first, while the rest still stands.
MpiSide::~MpiSide() { pmix_.reset(); }

bool MpiSide::available() { return MpiJob::available(); }

void MpiSide::prepare_pmix() {
  if (!pmix_) pmix_ = MpiJob::prepare();
}

void MpiSide::scrub_rank_env(std::map<std::string, std::string>& env) { MpiJob::scrub_rank_env(env); }

void MpiSide::release_for_exit() {
  if (pmix_) pmix_->release_for_exit();  // the agent _exits: no libpmix finalize to wait for
}

// The PMIx server when the job serves PMIx, and the PMI server always (with
// --mpi pmix it tells a PMI client that it is not served).
void MpiSide::start(const msg::MpiSection& section) {
  // The job's map came once for all hosts (mpi_map), not in this launch.
  msg::MpiSection mpi = section;
  if (mpi.node_hosts.empty() && map_) mpi.node_hosts = map_->node_hosts, mpi.node_ranks = map_->node_ranks;
  const control::MpiServe served = mpi.served();
  if (served == control::MpiServe::kRefuse) return refuse_mpi(mpi);
  if (served != control::MpiServe::kPmi) start_pmix(mpi);
  start_pmi(mpi);
}

void MpiSide::start_pmix(const msg::MpiSection& mpi) {
  prepare_pmix();  // --no-pmix, yet MPI was asked for: start it now
  if (!pmix_)
    throw UsageError("this dlaunch-agent was built without libpmix: run with --mpi pmi or --mpi none, or rebuild "
                     "with libpmix-dev");
  pmix_->start(mpi, attempt_hooks());
}

MpiHooks MpiSide::attempt_hooks() const {
  MpiHooks h = hooks_;
  const uint64_t mine = attempt_;
  h.send = [this, mine, send = hooks_.send](control::MpiUp m) {
    if (mine == attempt_) send(std::move(m));
  };
  h.fence = [this, mine, fence = hooks_.fence](uint64_t id, std::string blob) {
    if (mine == attempt_) fence(id, std::move(blob));
  };
  return h;
}

// A new PmiService per attempt: its key-value space (the attempt's
// namespace) and its fence count start empty.
void MpiSide::start_pmi(const msg::MpiSection& mpi) {
  const MpiHooks hooks = attempt_hooks();
  auto abort = [send = hooks.send](int rank, int status, std::string text) { send(msg::MpiAbort{rank, status, text}); };
  // A PMI fence of a job on this host alone is complete once this host's
  // ranks are in it: answered here, without the launcher's round trip (two
  // more processes to be scheduled among busy-polling MPICH ranks).
  std::function<void(uint64_t, std::string)> fence = hooks.fence;
  if (mpi.node_hosts.size() == 1)
    fence = [this, mine = attempt_](uint64_t id, std::string blob) {
      asio::post(io_, [this, mine, id, blob = std::move(blob)] {
        if (pmi_ && mine == attempt_) pmi_->fence_done(id, blob);
      });
    };
  pmi_.reset();  // the last attempt's (its ranks are gone)
  pmi_ = std::make_unique<pmi::PmiService>(io_, pmi::job_from(mpi, mpi.served() != control::MpiServe::kPmix),
                                           pmi::PmiService::Hooks{fence, abort, {}});
}

// Per-node mode: nothing serves MPI (docs/failures.md); a rank that starts
// PMIx or PMI is reported, and the launcher ends the job.
void MpiSide::refuse_mpi(const msg::MpiSection& mpi) {
  auto refused = [this](const char* wire) {
    return [this, wire](int rank) { hooks_.send(msg::MpiRefused{rank, wire}); };
  };
  tripwire_ = std::make_unique<PmixTripwire>(io_, mpi, refused("PMIx"));
  pmi::PmiService::Hooks hooks;
  hooks.refuse = refused("PMI");
  pmi_ = std::make_unique<pmi::PmiService>(io_, pmi::job_from(mpi, true), std::move(hooks));
}

// The PMIx variables (PMIX_RANK, PMIX_SERVER_URI*, ...) of the server or
// of the tripwire, then the PMI socket's (PMI_FD).
TaskEnv MpiSide::task_env(int rank) {
  TaskEnv t;
  if (pmix_ && pmix_->started()) t.vars = pmix_->rank_env(rank);
  else if (tripwire_) t.vars = tripwire_->rank_env(rank);
  if (pmi_) {
    auto end = pmi_->open_rank(rank);
    t.vars.insert(t.vars.end(), end.env.begin(), end.env.end());
    t.inherit_fd = end.child_fd;
  }
  return t;
}

void MpiSide::task_spawned(int rank) {
  if (pmi_) pmi_->child_end_closed(rank);
}

void MpiSide::task_refused(int rank) {
  if (pmi_) pmi_->close_child_end(rank);
}

void MpiSide::tasks_started() {
  if (pmi_) pmi_->watch_started();
}

void MpiSide::fence_done(uint64_t id, std::string_view all_blobs) {
  if (pmi::is_pmi_fence(id)) {
    if (pmi_) pmi_->fence_done(id, all_blobs);
  } else if (pmix_) {
    pmix_->fence_done(id, std::string(all_blobs));
  }
}

void MpiSide::receive(const control::MpiDown& m) {
  if (auto* map = std::get_if<msg::MpiMap>(&m)) {
    map_ = *map;
  } else if (auto* f = std::get_if<msg::FenceFailed>(&m); f && pmi::is_pmi_fence(f->id)) {
    if (pmi_) pmi_->fence_failed(f->id, f->message);
  } else if (!pmix_ || !pmix_->receive(m)) {
    unserved(m);
  }
}

// No PMIx server serves here: another host's request is refused, spawned
// children are refused (or, with no server to tell, a namespace elsewhere
// is known at once: none of this host's ranks called MPI_Init), and answers
// to requests no server made are dropped.
void MpiSide::unserved(const control::MpiDown& m) {
  if (auto* s = std::get_if<msg::MpiDmodexServe>(&m)) return hooks_.send(msg::MpiDmodexData{s->id, false, ""});
  if (auto* l = std::get_if<msg::SpawnLaunch>(&m)) {
    const char* error = !pmix_ ? "no MPI job runs on this host" : l->elsewhere ? "" : "this host's PMIx server is not running";
    finish_spawn_launch(hooks_, *l, {}, error);
  }
}

}  // namespace dl::mpi
