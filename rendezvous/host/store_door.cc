#include "rendezvous/host/store_door.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <unordered_set>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "errors/error.h"
#include "wire/admission.h"
#include "wire/coding.h"
#include "wire/frame.h"
#include "wire/handshake.h"

namespace dl::rdzv {

namespace asio = boost::asio;
using Local = asio::local::stream_protocol;
using boost::system::error_code;

namespace {
constexpr size_t kReadChunk = 16384;
// Reading stops while a request is outstanding and this much is buffered.
constexpr size_t kMaxHeldInput = 1u << 20;

// The uid of the process at the other end of a local socket; -1 if unknown.
long peer_uid(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  return static_cast<long>(cred.uid);
}
}  // namespace

struct StoreDoor::Impl : std::enable_shared_from_this<Impl> {
  asio::io_context& io;
  Local::acceptor acceptor;
  std::string path, token;
  StoreBackend& backend;
  std::function<void(const std::string&)> log;
  std::unordered_set<std::shared_ptr<struct DoorClient>> clients;
  bool stopped = false;

  Impl(asio::io_context& c, std::string p, std::string t, StoreBackend& b)
      : io(c), acceptor(c), path(std::move(p)), token(std::move(t)), backend(b) {}
  void note(const std::string& line) { if (log) log("store door: " + line); }
  void accept();
  void admit(Local::socket sock);
  void shutdown();
};

// One rank's connection: the handshake, then store/1 requests handled one
// at a time, each reply written before the next request is looked at.
struct DoorClient : std::enable_shared_from_this<DoorClient> {
  std::shared_ptr<StoreDoor::Impl> door;
  Local::socket sock;
  asio::steady_timer hs_timer;
  std::optional<wire::ServerHandshake> hs;
  wire::FrameParser parser{proto::kMaxFramePayload};
  std::unique_ptr<char[]> buf{new char[kReadChunk]};
  // Frames to send, each its own bytes and then, for an all-gather's reply,
  // the list every local client shares.
  struct Chunk {
    std::string own;
    std::shared_ptr<const std::string> shared;
    size_t shared_at = 0;  // where in `shared` its bytes still to send start
  };
  std::vector<Chunk> queued, sending;
  bool busy = false, reading = false, closing = false, closed = false;

  DoorClient(std::shared_ptr<StoreDoor::Impl> d, Local::socket s)
      : door(std::move(d)), sock(std::move(s)), hs_timer(door->io) {}

  void start() {
    hs.emplace(door->token, std::string(proto::kStoreTag), wire::random_bytes(wire::kNonceSize));
    hs_timer.expires_after(wire::kPreAuthDeadline);
    hs_timer.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec && self->hs) self->refuse("no handshake within " + std::to_string(wire::kPreAuthDeadline.count()) + " ms");
    });
    read();
  }

  // Asio reads at once only when the last read filled its buffer or an
  // event came since, so a request costs one recv (no read is tried on an
  // empty socket, and no epoll_ctl as a wait for readiness would make).
  void read() {
    if (reading || closing || closed || (busy && parser.buffered() >= kMaxHeldInput)) return;
    reading = true;
    sock.async_read_some(asio::buffer(buf.get(), kReadChunk), [self = shared_from_this()](error_code ec, size_t n) {
      self->reading = false;
      if (ec) return self->close();
      try {
        self->parser.feed(self->buf.get(), n);
      } catch (const RemoteError& e) {
        return self->refuse(e.what());
      }
      self->serve();
      self->read();
    });
  }

  // Handles buffered frames until one is outstanding at the back end.
  void serve() {
    while (!busy && !closing && !closed) {
      std::optional<wire::Frame> f;
      try {
        f = parser.next();
      } catch (const RemoteError& e) {
        return refuse(e.what());
      }
      if (!f) return;
      if (hs) handshake(*f);
      else handle(*f);
    }
  }

  void handshake(const wire::Frame& f) {
    if (f.type != wire::kHandshake || f.payload.size() > wire::kMaxHandshakePayload)
      return refuse("expected a store/1 token handshake, got something else");
    if (!hs->answered()) {
      auto answer = hs->answer(f.payload);
      if (!answer) return refuse(hs->error());
      return send(wire::encode_frame(wire::kHandshake, *answer));
    }
    if (!hs->verify(f.payload)) return refuse(hs->error());
    hs.reset();
    hs_timer.cancel();
  }

  void handle(const wire::Frame& f) {
    proto::Request req;
    try {
      if (f.type != proto::kRequest) throw RemoteError("frame type " + std::to_string(f.type));
      req = proto::decode_request(f.payload);
    } catch (const RemoteError& e) {
      return refuse(std::string("malformed store request: ") + e.what());
    }
    if (std::string bad = proto::check_limits(req); !bad.empty())
      return send(wire::encode_frame(proto::kReply, proto::encode(proto::Reply{proto::Status::kError, bad, 0, {}, nullptr}, req.op)));
    busy = true;
    // The callback holds the client weakly: a client that has gone expires
    // while the back end still holds its request.
    door->backend.execute(req, [weak = weak_from_this(), op = req.op](const proto::Reply& r) {
      auto self = weak.lock();
      if (!self || self->closed) return;
      self->busy = false;
      self->reply(r, op);
      self->serve();
      self->read();
    }, weak_from_this());
  }

  void reply(const proto::Reply& r, proto::Op op) {
    if (!r.list) return send(wire::encode_frame(proto::kReply, proto::encode(r, op)));
    std::string head(wire::kHeaderSize, '\0');
    wire::encode_frame_header(head.data(), static_cast<uint32_t>(1 + r.list->size()), proto::kReply);
    head.push_back(static_cast<char>(proto::Status::kOk));
    send(std::move(head), r.list);
  }

  // Sends at once what the socket takes when nothing is on its way out (a
  // barrier's release: one send, no completion to run); the rest is queued
  // and written asynchronously.
  void send(std::string frame, std::shared_ptr<const std::string> shared = nullptr) {
    size_t shared_at = 0;
    if (sending.empty() && queued.empty() && !closed) {
      const size_t sent = send_now(frame, shared.get());
      if (sent == frame.size() + (shared ? shared->size() : 0)) {
        if (closing) close();
        return;
      }
      if (sent <= frame.size()) frame.erase(0, sent);
      else shared_at = sent - frame.size(), frame.clear();
    }
    queued.push_back({std::move(frame), std::move(shared), shared_at});
    if (sending.empty()) write();
  }

  // One non-blocking sendmsg of frame (and shared after it); the bytes sent.
  size_t send_now(const std::string& frame, const std::string* shared) {
    iovec iov[2] = {{const_cast<char*>(frame.data()), frame.size()}, {}};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = 1;
    if (shared) iov[1] = {const_cast<char*>(shared->data()), shared->size()}, m.msg_iovlen = 2;
    ssize_t n;
    do n = ::sendmsg(sock.native_handle(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n > 0 ? static_cast<size_t>(n) : 0;  // an error shows again to the asynchronous write
  }

  void write() {
    if (closed || queued.empty()) return;
    sending.swap(queued);
    std::vector<asio::const_buffer> bufs;
    for (const auto& c : sending) {
      bufs.push_back(asio::buffer(c.own));
      if (c.shared) bufs.push_back(asio::buffer(*c.shared) + c.shared_at);
    }
    asio::async_write(sock, bufs, [self = shared_from_this()](error_code ec, size_t) {
      self->sending.clear();
      if (ec) return self->close();
      if (!self->queued.empty()) return self->write();
      if (self->closing) self->close();
    });
  }

  void refuse(const std::string& why) {
    if (closing || closed) return;
    door->note("a client refused: " + why);
    closing = true;
    send(wire::encode_frame(wire::kErrorText, why));
  }

  void close() {
    if (closed) return;
    closed = true;
    error_code ignored;
    hs_timer.cancel();
    sock.close(ignored);
    door->clients.erase(shared_from_this());
  }
};

void StoreDoor::Impl::accept() {
  acceptor.async_accept([self = shared_from_this()](error_code ec, Local::socket sock) {
    if (self->stopped || ec == asio::error::operation_aborted) return;
    if (!ec) self->admit(std::move(sock));
    self->accept();
  });
}

// Only the door's own user gets in, and only so many at once.
void StoreDoor::Impl::admit(Local::socket sock) {
  ::fcntl(sock.native_handle(), F_SETFD, FD_CLOEXEC);  // not inherited by the ranks the agent starts
  const long uid = peer_uid(sock.native_handle());
  if (uid != static_cast<long>(::geteuid())) return note("uid " + std::to_string(uid) + " refused: not the job's user");
  if (clients.size() >= kMaxDoorClients)
    return note("a client refused: " + std::to_string(kMaxDoorClients) + " clients connected already");
  auto c = std::make_shared<DoorClient>(shared_from_this(), std::move(sock));
  clients.insert(c);
  c->start();
}

void StoreDoor::Impl::shutdown() {
  if (stopped) return;
  stopped = true;
  error_code ignored;
  acceptor.close(ignored);
  auto all = clients;
  for (const auto& c : all) c->close();
}

StoreDoor::StoreDoor(asio::io_context& io, std::string path, std::string token, StoreBackend& backend)
    : impl_(std::make_shared<Impl>(io, std::move(path), std::move(token), backend)) {
  struct stat st{};
  if (::lstat(impl_->path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(impl_->path.c_str());
  try {
    impl_->acceptor.open(Local());
    ::fcntl(impl_->acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
    impl_->acceptor.bind(Local::endpoint(impl_->path));
    ::chmod(impl_->path.c_str(), 0600);
    impl_->acceptor.listen(asio::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    throw IoError("store door cannot listen on " + impl_->path + ": " + e.code().message());
  }
  impl_->accept();
}

StoreDoor::~StoreDoor() {
  impl_->shutdown();
  ::unlink(impl_->path.c_str());
}

const std::string& StoreDoor::path() const { return impl_->path; }
size_t StoreDoor::clients() const { return impl_->clients.size(); }

void StoreDoor::stop() {
  asio::dispatch(impl_->io, [impl = impl_] { impl->shutdown(); });
}

void StoreDoor::set_logger(std::function<void(const std::string&)> log) {
  asio::dispatch(impl_->io, [impl = impl_, log = std::move(log)]() mutable { impl->log = std::move(log); });
}

}  // namespace dl::rdzv
