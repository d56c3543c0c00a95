#pragma once
// Everything MPI of one agent, behind two calls the agent makes without
// knowing which MPI it serves: receive(MpiDown) for every MPI message from
// the launcher, and task_env(rank) for what a rank gets before its exec.
// Inside: the PMIx server (MpiJob), the PMI server (pmi::PmiService), and
// in per-node mode (serve "refuse") the tripwires that report a rank's
// MPI_Init instead of serving it (docs/failures.md).
//
// A restarted job (--max-restarts) is started again here, one start() per
// attempt, each with a namespace of its own: the PMIx server stays up and
// registers the new namespace in place of the old one, the PMI server is
// made anew (a fresh key-value space, fences from 0). Between the
// attempts, attempt_over() cuts the last one off: nothing its servers still
// say (a fence contribution, an MPI_Abort that libpmix handed over late)
// reaches the launcher after the agent's `ready`.
// What the servers say to the launcher leaves through one hook, send(MpiUp);
// fence contributions through fence() (binary frames, control/protocol.h):
// MpiHooks (mpi_hooks.h), the same struct the PMIx server is given.
//
// flux's PMI shell plugin is the model: a launch's init (start) and a
// task's init (task_env).
//
// Threading: the agent's io_context thread; the PMIx server's thread posts
// to it.
#include <boost/asio.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "control/messages.h"
#include "mpi/mpi_hooks.h"

namespace dl::mpi {

class MpiJob;
class PmixTripwire;
namespace pmi { class PmiService; }

class MpiSide {
 public:
  // `hooks`: send, fence and start_children; post is set here (io's).
  MpiSide(boost::asio::io_context& io, MpiHooks hooks);
  ~MpiSide();
  MpiSide(const MpiSide&) = delete;
  MpiSide& operator=(const MpiSide&) = delete;

  // True when this binary can serve PMIx (the hello's `pmix`).
  static bool available();
  // Opens the ranks' PMIx port and starts the PMIx server's thread ahead of
  // any launch (mpi_job.h: MpiJob::prepare); without libpmix, nothing.
  void prepare_pmix();
  // A launch's MPI section: starts the servers it asks for (or the
  // tripwires for "refuse"); again for each attempt of a restarted job.
  // Throws Error (a server cannot start); the caller refuses the launch's
  // ranks with it.
  void start(const control::msg::MpiSection& mpi);
  // The attempt's ranks are all gone (the agent is about to answer
  // `ready`): from now until the next start(), what the servers send or
  // fence for the ended attempt is dropped.
  void attempt_over() { ++attempt_; }

  // Local rank `rank` of the job (not a spawned child): the variables and
  // the socket its MPI needs, whatever MPI this host serves; nothing
  // without an MPI section. Throws Error (no socket or port, a rank not on
  // this host); the rank is then refused. After task_env, exactly one of:
  //   task_spawned(rank)   the rank was spawned (the spawn closed our copy
  //                        of inherit_fd)
  //   task_refused(rank)   it will not be (its socket is closed here)
  TaskEnv task_env(int rank);
  void task_spawned(int rank);
  void task_refused(int rank);
  // The ranks given a task_env so far are started: their sockets are watched.
  void tasks_started();

  // An MPI message from the launcher (control/messages.h, MpiDown): the
  // job's map is kept here, a PMI fence's failure goes to the PMI server,
  // everything else to the PMIx server; one it cannot take (none serves) is
  // answered here, so that no rank or host waits for it.
  void receive(const control::MpiDown& m);
  // The launcher's binary fence frame: every host's blobs for fence `id`.
  void fence_done(uint64_t id, std::string_view all_blobs);

  // For an agent about to _exit (MpiJob::release_for_exit). Idempotent.
  void release_for_exit();
  // Removes from a rank's environment what the agent set for itself.
  static void scrub_rank_env(std::map<std::string, std::string>& env);

 private:
  void start_pmix(const control::msg::MpiSection& mpi);
  void start_pmi(const control::msg::MpiSection& mpi);
  void refuse_mpi(const control::msg::MpiSection& mpi);
  void unserved(const control::MpiDown& m);
  // hooks_, for the attempt now starting: send and fence do nothing once
  // attempt_over() was called.
  MpiHooks attempt_hooks() const;

  boost::asio::io_context& io_;
  MpiHooks hooks_;
  std::unique_ptr<MpiJob> pmix_;            // the PMIx server, prepared or serving; else null
  std::unique_ptr<pmi::PmiService> pmi_;    // the PMI server (also with --mpi pmix: it refuses), else null
  std::unique_ptr<PmixTripwire> tripwire_;  // serve "refuse": the ranks' unserved PMIx ports, else null
  std::optional<control::msg::MpiMap> map_;  // the job's map, when the launcher broadcast it
  uint64_t attempt_ = 0;  // attempt_over()s so far: the hooks of earlier attempts are cut off
};

}  // namespace dl::mpi
