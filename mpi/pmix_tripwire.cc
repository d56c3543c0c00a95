#include "mpi/pmix_tripwire.h"

#include <fcntl.h>
#include <unistd.h>

#include "errors/error.h"
#include "mpi/mpi_job.h"
#include "mpi/pmix/front_door.h"

namespace dl::mpi {

namespace asio = boost::asio;

struct PmixTripwire::Door {
  explicit Door(asio::io_context& io) : wait(io) {}
  pmix::FrontDoor door;
  asio::posix::stream_descriptor wait;  // a duplicate of the door's listening socket
};

PmixTripwire::PmixTripwire(asio::io_context& io, control::msg::MpiSection mpi, std::function<void(int rank)> tripped)
    : io_(io), mpi_(std::move(mpi)), tripped_(std::move(tripped)) {}

PmixTripwire::~PmixTripwire() {
  for (auto& [rank, d] : doors_) {
    boost::system::error_code ignored;
    d->wait.close(ignored);
  }
}

std::vector<std::pair<std::string, std::string>> PmixTripwire::rank_env(int rank) {
  auto d = std::make_shared<Door>(io_);
  auto env = MpiJob::unserved_rank_env(mpi_, rank, d->door.port());
  const int fd = ::fcntl(d->door.listen_fd(), F_DUPFD_CLOEXEC, 3);
  if (fd < 0) throw_errno("cannot watch the PMIx port of rank " + std::to_string(rank));
  d->wait.assign(fd);
  doors_[rank] = d;
  watch(rank);
  return env;
}

void PmixTripwire::watch(int rank) {
  std::shared_ptr<Door> d = doors_.at(rank);
  d->wait.async_wait(asio::posix::descriptor_base::wait_read, [this, rank, d](boost::system::error_code ec) {
    if (ec || !d->wait.is_open()) return;
    if (!d->door.admit_waiting()) return watch(rank);  // another user's, refused and reported
    d->wait.close(ec);
    tripped_(rank);
  });
}

}  // namespace dl::mpi
