// The PMIx half of the MPI side in a dlaunch-agent built without libpmix
// (DLAUNCH_PMIX=OFF, or libpmix-dev or libhwloc-dev missing): CMake builds
// this file instead of mpi_job.cc and pmix_tripwire.cc. No PMIx server
// exists (available() is false, prepare() makes none, so MpiSide refuses
// --mpi pmix with what to do), and no rank is given PMIx variables.
#include "errors/error.h"
#include "mpi/mpi_job.h"
#include "mpi/pmix_tripwire.h"

namespace dl::mpi {

struct MpiJob::Prep {};

bool MpiJob::available() { return false; }
std::unique_ptr<MpiJob> MpiJob::prepare() { return nullptr; }
void MpiJob::scrub_rank_env(std::map<std::string, std::string>&) {}
std::vector<std::pair<std::string, std::string>> MpiJob::unserved_rank_env(const control::msg::MpiSection&, int,
                                                                           uint16_t) {
  return {};
}

// No MpiJob is ever made (prepare): what follows only completes the class.
MpiJob::~MpiJob() = default;
void MpiJob::start(const control::msg::MpiSection&, MpiHooks) {
  throw UsageError("this dlaunch-agent was built without libpmix");
}
void MpiJob::release_for_exit() {}
std::vector<std::pair<std::string, std::string>> MpiJob::rank_env(int) { return {}; }
bool MpiJob::receive(const control::MpiDown&) { return false; }
void MpiJob::fence_done(uint64_t, const std::string&) {}

// The tripwire without a PMIx port: a rank that starts PMIx finds no
// server, and its PMI side still trips (pmi/pmi_service.h).
struct PmixTripwire::Door {};

PmixTripwire::PmixTripwire(boost::asio::io_context& io, control::msg::MpiSection mpi,
                           std::function<void(int rank)> tripped)
    : io_(io), mpi_(std::move(mpi)), tripped_(std::move(tripped)) {}
PmixTripwire::~PmixTripwire() = default;
std::vector<std::pair<std::string, std::string>> PmixTripwire::rank_env(int) { return {}; }

}  // namespace dl::mpi
