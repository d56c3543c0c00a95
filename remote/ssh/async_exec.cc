#include "remote/ssh/async_exec.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <boost/asio/post.hpp>

#include "remote/ssh/tcp_connect.h"

namespace dl::ssh {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::shared_ptr<AsyncExec> AsyncExec::create(asio::io_context& io, Target target, Options options, Hooks hooks) {
  return std::shared_ptr<AsyncExec>(new AsyncExec(io, std::move(target), std::move(options), std::move(hooks)));
}

AsyncExec::AsyncExec(asio::io_context& io, Target target, Options options, Hooks hooks)
    : io_(io), target_(std::move(target)), options_(std::move(options)), hooks_(std::move(hooks)), resolver_(io),
      socket_(io), deadline_(io) {}

// close() or the end released everything; a last handler may destroy us
// while the io_context shuts down, when its objects must not be touched.
AsyncExec::~AsyncExec() {
  if (state_ != State::kDone) release();
}

void AsyncExec::start() {
  if (state_ != State::kIdle) return;
  state_ = State::kResolving;
  // Begun from the loop, so that no hook runs inside start().
  asio::post(io_, [self = shared_from_this()] { self->begin(); });
}

void AsyncExec::begin() {
  if (state_ != State::kResolving) return;
  deadline_.expires_after(options_.connect_timeout);
  deadline_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->on_deadline();
  });
  try {
    session_ = Session::configure(target_, options_);
  } catch (const Error& e) {
    return fail(e.what(), e.kind());
  }
  if (session_->proxied()) {  // libssh runs the ProxyCommand and connects through it
    state_ = State::kHandshake;
    return step();
  }
  resolver_.async_resolve(session_->host(), std::to_string(session_->port()),
                          [self = shared_from_this()](const boost::system::error_code& ec, tcp::resolver::results_type r) {
                            self->on_resolved(ec, std::move(r));
                          });
}

void AsyncExec::on_resolved(const boost::system::error_code& ec, tcp::resolver::results_type r) {
  if (state_ != State::kResolving) return;
  try {
    if (ec) throw_resolve_error(session_->host(), ec.message(), session_->name());
  } catch (const Error& e) {
    return fail(e.what(), e.kind());
  }
  for (const auto& entry : r) endpoints_.push_back(entry.endpoint());
  state_ = State::kConnecting;
  connect_next();
}

// Each address in turn, as tcp_connect does; the deadline is shared.
void AsyncExec::connect_next() {
  if (next_endpoint_ == endpoints_.size()) {
    try {
      throw_connect_error(connect_errno_, session_->name(), session_->port(), options_.connect_timeout);
    } catch (const Error& e) {
      return fail(e.what(), e.kind());
    }
  }
  boost::system::error_code ignored;
  socket_.close(ignored);
  socket_.async_connect(endpoints_[next_endpoint_++], [self = shared_from_this()](const boost::system::error_code& ec) {
    if (self->state_ != State::kConnecting || ec == asio::error::operation_aborted) return;
    if (ec) {
      self->connect_errno_ = ec.value();
      return self->connect_next();
    }
    boost::system::error_code ignored;
    self->socket_.set_option(tcp::no_delay(true), ignored);
    TcpConnection c = describe_socket(self->socket_.native_handle());
    c.fd = self->socket_.release();
    try {
      self->session_->attach(c);
    } catch (const Error& e) {
      return self->fail(e.what(), e.kind());
    }
    self->state_ = State::kHandshake;
    self->step();
  });
}

void AsyncExec::on_deadline() {
  if (state_ >= State::kRunning) return;
  const std::string ms = std::to_string(options_.connect_timeout.count());
  std::string why;
  if (state_ == State::kResolving) why = target_.str() + ": cannot resolve host name within " + ms + " ms";
  else if (state_ == State::kOpening)
    why = session_->name() + ": the server did not start the command within " + ms + " ms (is the host overloaded?)";
  else why = session_->handshake_timeout_message(options_.connect_timeout);
  fail(why, ErrorKind::kTimeout);
}

void AsyncExec::step() {
  if (state_ == State::kDone) return;
  try {
    run_step();
  } catch (const Error& e) {
    fail(e.what(), e.kind());
  } catch (const std::exception& e) {
    fail(target_.str() + ": " + e.what(), ErrorKind::kIo);
  }
}

// Advances as far as the socket allows, then waits for it again.
void AsyncExec::run_step() {
  if (state_ == State::kHandshake) {
    if (!session_->advance()) return wait();
    state_ = State::kOpening;
    proc_ = session_->open(hooks_.command(*session_, &payload_));
  }
  if (state_ == State::kOpening) {
    if (!proc_->advance_open()) return wait();
    state_ = State::kRunning;
    deadline_.cancel();
    if (!payload_.empty()) proc_->offer_stdin(payload_);
  }
  const bool running = proc_->drain();
  if (proc_->err().size() > err_seen_) {
    const std::string_view fresh = std::string_view(proc_->err()).substr(err_seen_);
    err_seen_ = proc_->err().size();
    err_.append(fresh);
    hooks_.err(fresh);
    if (state_ == State::kDone) return;  // the hook closed us
  }
  if (running) return wait();
  const int status = proc_->exit_status().value_or(255);
  state_ = State::kDone;
  release();
  hooks_.ended(status);
}

// Asio's reactor is edge-triggered (epoll with EPOLLET) and async_wait does
// not look before it waits: bytes that arrived while libssh read only part
// of them would wait for the next packet. So look at the socket's level
// first, and wait only when there is nothing to do.
void AsyncExec::wait() {
  const int fd = session_->fd();
  if (fd < 0) {  // a ProxyCommand still starting
    asio::post(io_, [self = shared_from_this()] { self->step(); });
    return;
  }
  if (!watch_) watch_ = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
  const bool want_write = session_->wants_write();
  pollfd p{fd, static_cast<short>(POLLIN | (want_write ? POLLOUT : 0)), 0};
  if (::poll(&p, 1, 0) > 0) {
    asio::post(io_, [self = shared_from_this()] { self->step(); });
    return;
  }
  if (!reading_) {
    reading_ = true;
    watch_->async_wait(asio::posix::stream_descriptor::wait_read, [self = shared_from_this()](auto ec) {
      self->reading_ = false;
      if (!ec) self->step();
    });
  }
  if (want_write && !writing_) {
    writing_ = true;
    watch_->async_wait(asio::posix::stream_descriptor::wait_write, [self = shared_from_this()](auto ec) {
      self->writing_ = false;
      if (!ec) self->step();
    });
  }
}

void AsyncExec::fail(const std::string& why, ErrorKind kind) {
  if (state_ == State::kDone) return;
  state_ = State::kDone;
  release();
  hooks_.failed(why, kind);
}

void AsyncExec::close() {
  state_ = State::kDone;
  release();
}

void AsyncExec::release() {
  boost::system::error_code ignored;
  deadline_.cancel();
  resolver_.cancel();
  socket_.close(ignored);
  if (watch_) {
    watch_->cancel(ignored);
    (void)watch_->release();  // libssh owns the socket and closes it
    watch_.reset();
  }
  proc_.reset();     // closes the channel (non-blocking)
  session_.reset();  // disconnects (non-blocking) and closes the socket
}

}  // namespace dl::ssh
