#include "mpi/pmi/pmi_service.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <utility>

#include "control/env_names.h"
#include "errors/error.h"

namespace dl::mpi::pmi {

namespace asio = boost::asio;

PmiService::PmiService(asio::io_context& io, PmiJob job, Hooks hooks)
    : io_(io),
      server_(std::move(job), PmiServer::Hooks{
                                  [this](int rank, std::string bytes) { write(rank, std::move(bytes)); },
                                  [this](int rank) { close(rank); },
                                  std::move(hooks.fence),
                                  std::move(hooks.abort),
                                  [](const std::string& line) { std::cerr << line + "\n"; },
                              }),
      refuse_(std::move(hooks.refuse)) {}

PmiService::~PmiService() {
  for (auto& [rank, link] : links_) {
    boost::system::error_code ec;
    link->sock.close(ec);
    if (link->child_fd >= 0) ::close(link->child_fd);
    if (link->unwatched >= 0) ::close(link->unwatched);
  }
}

PmiService::RankEnd PmiService::open_rank(int rank) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw_errno("cannot create the PMI socket of rank " + std::to_string(rank));
  if (fds[1] < 3) {  // the child's dup2s onto 0-2 must not clobber it
    const int high = ::fcntl(fds[1], F_DUPFD_CLOEXEC, 3);
    ::close(fds[1]);
    if (high < 0) {
      ::close(fds[0]);
      throw_errno("cannot create the PMI socket of rank " + std::to_string(rank));
    }
    fds[1] = high;
  }
  auto link = std::make_shared<Link>(io_);
  link->unwatched = fds[0];
  link->child_fd = fds[1];
  links_[rank] = link;
  RankEnd end;
  end.child_fd = fds[1];
  end.env = {{env::kPmiFd, std::to_string(env::kRankInheritedFd)}};  // spawn_rank moves it there
  return end;
}

void PmiService::close_child_end(int rank) {
  auto it = links_.find(rank);
  if (it == links_.end() || it->second->child_fd < 0) return;
  ::close(it->second->child_fd);
  it->second->child_fd = -1;
}

void PmiService::child_end_closed(int rank) {
  auto it = links_.find(rank);
  if (it != links_.end()) it->second->child_fd = -1;
}

void PmiService::watch_started() {
  for (auto& [rank, link] : links_) {
    if (link->unwatched < 0) continue;
    const int fd = std::exchange(link->unwatched, -1);
    const ssize_t n = ::recv(fd, link->rbuf.data(), link->rbuf.size(), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      // Ended (or broken) before it was watched: as the read's EOF below.
      ::close(fd);
      server_.on_closed(rank);
      continue;
    }
    boost::system::error_code ec;
    link->sock.assign(asio::local::stream_protocol(), fd, ec);
    if (ec) {
      std::cerr << "dlaunch-agent: cannot watch the PMI socket of rank " + std::to_string(rank) + ": " + ec.message() +
                       "; its MPI_Init will fail\n";
      ::close(fd);
      server_.on_closed(rank);
      continue;
    }
    // (on_bytes may answer at once: the socket is assigned first.)
    if (n > 0) on_bytes(rank, std::string_view(link->rbuf.data(), static_cast<size_t>(n)));
    if (link->sock.is_open()) read(rank);
  }
}

void PmiService::read(int rank) {
  std::shared_ptr<Link> link = links_.at(rank);
  link->sock.async_read_some(asio::buffer(link->rbuf), [this, rank, link](boost::system::error_code ec, size_t n) {
    if (ec == asio::error::operation_aborted || !link->sock.is_open()) return;
    if (ec) return server_.on_closed(rank), close(rank);
    on_bytes(rank, std::string_view(link->rbuf.data(), n));
    if (link->sock.is_open()) read(rank);
  });
}

void PmiService::on_bytes(int rank, std::string_view bytes) {
  if (!refuse_) return server_.on_bytes(rank, bytes);
  boost::system::error_code ignored;
  links_.at(rank)->sock.close(ignored);
  refuse_(rank);
}

void PmiService::write(int rank, std::string bytes) {
  auto it = links_.find(rank);
  if (it == links_.end() || !it->second->sock.is_open()) return;
  it->second->out.push_back(std::move(bytes));
  flush(rank);
}

void PmiService::flush(int rank) {
  std::shared_ptr<Link> link = links_.at(rank);
  if (link->writing) return;
  if (link->out.empty()) {
    if (link->close_after_write) {
      boost::system::error_code ec;
      link->sock.close(ec);
    }
    return;
  }
  link->writing = true;
  asio::async_write(link->sock, asio::buffer(link->out.front()), [this, rank, link](boost::system::error_code ec, size_t) {
    link->writing = false;
    if (ec) {
      boost::system::error_code ignored;
      link->out.clear();
      link->sock.close(ignored);
      return;
    }
    link->out.pop_front();
    flush(rank);
  });
}

// Closes once what was queued for the rank has been written.
void PmiService::close(int rank) {
  auto it = links_.find(rank);
  if (it == links_.end()) return;
  it->second->close_after_write = true;
  flush(rank);
}

}  // namespace dl::mpi::pmi
