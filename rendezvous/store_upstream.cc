#include "rendezvous/store_upstream.h"

#include <sys/socket.h>

#include <cstring>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "errors/error.h"
#include "wire/client_retry.h"
#include "wire/frame.h"

namespace dl::rdzv {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {
constexpr size_t kReadChunk = 65536;

proto::Reply error_reply(std::string message) { return {proto::Status::kError, std::move(message), 0, {}, nullptr}; }
}  // namespace

struct StoreUpstream::Impl : std::enable_shared_from_this<Impl> {
  asio::io_context& io;
  tcp::socket sock;
  std::string peer;
  struct Call {
    proto::Op op;
    Done done;
  };
  std::unordered_map<uint32_t, Call> calls;  // outstanding, by id
  uint32_t next_id = 1;
  uint64_t sent = 0;
  std::string out, sending;  // queued frames; the frames being written
  wire::FrameParser parser{proto::kMaxFramePayload + 4};
  std::unique_ptr<char[]> buf{new char[kReadChunk]};
  std::string broken;  // why the link is down; empty while it is up

  Impl(asio::io_context& c, std::string p) : io(c), sock(c), peer(std::move(p)) {}

  uint32_t fresh_id() {
    while (calls.count(next_id) || next_id == 0) ++next_id;
    return next_id++;
  }

  void call(const proto::Request& r, Done done) {
    if (!broken.empty()) {
      asio::post(io, [done = std::move(done), why = broken] { done(error_reply(why)); });
      return;
    }
    const uint32_t id = fresh_id();
    calls.emplace(id, Call{r.op, std::move(done)});
    out += proto::frame_with_id(proto::kRequest2, id, proto::encode(r));
    ++sent;
    if (sending.empty()) write();
  }

  void write() {
    sending.swap(out);
    asio::async_write(sock, asio::buffer(sending), [self = shared_from_this()](error_code ec, size_t) {
      self->sending.clear();
      if (ec) return self->fail("writing to the " + self->peer + " failed: " + ec.message());
      if (!self->out.empty()) self->write();
    });
  }

  void read() {
    sock.async_read_some(asio::buffer(buf.get(), kReadChunk), [self = shared_from_this()](error_code ec, size_t n) {
      if (ec) return self->fail(ec == asio::error::eof ? "the " + self->peer + " closed the connection"
                                                        : "reading from the " + self->peer + " failed: " + ec.message());
      try {
        self->parser.feed(self->buf.get(), n);
        while (auto f = self->parser.next()) self->dispatch(*f);
      } catch (const RemoteError& e) {
        return self->fail(e.what());
      }
      if (self->broken.empty()) self->read();
    });
  }

  // One frame from the server: a reply to hand to its caller, or a refusal.
  void dispatch(const wire::Frame& f) {
    if (f.type == wire::kErrorText) throw RemoteError("the " + peer + " closed the connection: " + f.payload);
    if (f.type != proto::kReply2) throw RemoteError("the " + peer + " sent a frame of type " + std::to_string(f.type));
    const proto::Tagged t = proto::split_id(f.payload);
    auto it = calls.find(t.id);
    if (it == calls.end()) throw RemoteError("the " + peer + " answered request id " + std::to_string(t.id) + ", not sent");
    Call c = std::move(it->second);
    calls.erase(it);
    c.done(proto::decode_reply(t.payload, c.op));
  }

  void fail(const std::string& why) {
    if (!broken.empty()) return;
    broken = "this host's link to the job's store broke: " + why;
    error_code ignored;
    sock.close(ignored);
    auto all = std::move(calls);
    calls.clear();
    for (auto& [id, c] : all) c.done(error_reply(broken));
  }
};

StoreUpstream::StoreUpstream(asio::io_context& io, const std::string& host, uint16_t port, const std::string& token,
                             wire::Millis connect_timeout)
    : impl_(std::make_shared<Impl>(io, "store at " + host + ":" + std::to_string(port))) {
  wire::Socket s = wire::connect_authenticated(host, port, token, proto::kStoreTag, impl_->peer, connect_timeout);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len);
  error_code ec;
  impl_->sock.assign(ss.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), s.release(), ec);
  if (ec) throw IoError("cannot use the connection to the " + impl_->peer + ": " + ec.message());
  asio::post(io, [impl = impl_] { impl->read(); });
}

// Outstanding callers are dropped unanswered: their owner is going too.
StoreUpstream::~StoreUpstream() {
  impl_->calls.clear();
  impl_->broken = "the link was closed";
  error_code ignored;
  impl_->sock.close(ignored);
}

void StoreUpstream::call(const proto::Request& r, Done done) { impl_->call(r, std::move(done)); }
size_t StoreUpstream::outstanding() const { return impl_->calls.size(); }
uint64_t StoreUpstream::sent() const { return impl_->sent; }
const std::string& StoreUpstream::peer() const { return impl_->peer; }
void StoreUpstream::close() { impl_->fail("the link was closed"); }

}  // namespace dl::rdzv
