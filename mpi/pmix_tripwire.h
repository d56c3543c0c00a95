#pragma once
// Per-node mode (--rdzv: its nodes run no MPI fences between them,
// docs/failures.md): no PMIx server runs; yet a rank that calls MPI_Init
// must not go on as a singleton, the wrong job. Each local rank is given the PMIx
// variables a served rank gets (MpiJob::unserved_rank_env), pointing at a
// loopback port of its own (pmix::FrontDoor: only the agent's user gets in).
// Nothing is served there: the first connection of the agent's user calls
// `tripped(rank)`, once per rank, and the rank's PMIx_Init waits until the
// job is torn down. The PMI side of the same rule is PmiService's refuse hook.
//
// Cost for a rank that never calls MPI_Init: one listening socket.
// Built without libpmix (mpi/pmix_none.cc) it gives no variables and never
// trips.
// Threading: everything on the agent's io_context thread.
#include <boost/asio.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "control/messages.h"

namespace dl::mpi {

class PmixTripwire {
 public:
  PmixTripwire(boost::asio::io_context& io, control::msg::MpiSection mpi, std::function<void(int rank)> tripped);
  ~PmixTripwire();
  PmixTripwire(const PmixTripwire&) = delete;
  PmixTripwire& operator=(const PmixTripwire&) = delete;

  // Opens global rank `rank`'s port and returns the variables to add to its
  // environment. Throws IoError (no port) or UsageError (not on this host).
  std::vector<std::pair<std::string, std::string>> rank_env(int rank);

 private:
  struct Door;
  void watch(int rank);

  boost::asio::io_context& io_;
  control::msg::MpiSection mpi_;
  std::function<void(int rank)> tripped_;
  std::map<int, std::shared_ptr<Door>> doors_;
};

}  // namespace dl::mpi
