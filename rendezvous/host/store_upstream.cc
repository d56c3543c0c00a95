#include "rendezvous/host/store_upstream.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "errors/error.h"
#include "wire/async_connect.h"
#include "wire/client_retry.h"
#include "wire/frame.h"

namespace dl::rdzv {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
using State = StoreUpstream::State;

namespace {
constexpr size_t kReadChunk = 65536;
// After a try to make the link failed, no new try starts before this pause
// (doubled after each failed try in a row, up to kMaxRetryPause): requests
// in the pause are answered at once with the failure. A try itself lasts up
// to the connect timeout, so a store that stays away costs one try per pause
// at most, however often the ranks ask.
constexpr std::chrono::milliseconds kFirstRetryPause{2000};
constexpr std::chrono::milliseconds kMaxRetryPause{60000};

std::chrono::milliseconds retry_pause(int failures) {
  auto pause = kFirstRetryPause;
  for (int i = 1; i < failures && pause < kMaxRetryPause; ++i) pause *= 2;
  return std::min(pause, kMaxRetryPause);
}

proto::Reply error_reply(std::string message) { return {proto::Status::kError, std::move(message), 0, {}, nullptr}; }

// r as it goes up after waiting `waited` for the link: the timeout it
// carries, if any, shortened by that wait.
proto::Request aged(proto::Request r, Clock::duration waited) {
  using proto::Op;
  if (r.op == Op::kGet || r.op == Op::kWait || proto::is_barrier(r.op) || proto::is_gather(r.op))
    r.number = std::max<int64_t>(0, r.number - std::chrono::duration_cast<std::chrono::milliseconds>(waited).count());
  return r;
}
}  // namespace

struct StoreUpstream::Impl : std::enable_shared_from_this<Impl> {
  asio::io_context& io;
  wire::AsyncConnectTarget target;
  tcp::socket sock;
  State state = State::kIdle;
  std::unique_ptr<wire::AsyncConnect> connecting;
  struct Call {
    proto::Op op;
    Done done;
  };
  std::unordered_map<uint32_t, Call> calls;  // outstanding, by id
  struct Held {
    uint32_t id;
    proto::Request request;
    Clock::time_point since;
  };
  std::vector<Held> held;  // calls waiting for the link, in order
  uint32_t next_id = 1;
  uint64_t sent = 0;
  std::string out, sending;  // queued frames; the frames being written
  wire::FrameParser parser{proto::kMaxFramePayload + 4};
  std::unique_ptr<char[]> buf{new char[kReadChunk]};
  std::string broken;  // why the link is down, once it is
  // kUnreachable: why the last try failed, how many in a row did, and
  // when the next may start.
  std::string unreachable;
  int failures = 0;
  Clock::time_point retry_at{};
  std::function<void(const std::string&)> on_unreachable;

  Impl(asio::io_context& c, wire::AsyncConnectTarget t) : io(c), target(std::move(t)), sock(c) {}

  uint32_t fresh_id() {
    while (calls.count(next_id) || next_id == 0) ++next_id;
    return next_id++;
  }

  void call(const proto::Request& r, Done done) {
    if (state == State::kBroken) return answer_later(std::move(done), broken);
    const auto now = Clock::now();
    if (state == State::kUnreachable && now < retry_at) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(retry_at - now).count();
      return answer_later(std::move(done), unreachable + " (tried again at a request " + std::to_string(left) +
                                               " ms from now or later)");
    }
    const uint32_t id = fresh_id();
    calls.emplace(id, Call{r.op, std::move(done)});
    ++sent;
    if (state == State::kUp) return send(id, r);
    held.push_back({id, r, now});
    if (state == State::kIdle || state == State::kUnreachable) start_connect();
  }

  void answer_later(Done done, std::string why) {
    asio::post(io, [done = std::move(done), why = std::move(why)] { done(error_reply(why)); });
  }

  void send(uint32_t id, const proto::Request& r) {
    out += proto::frame_with_id(proto::kRequest2, id, proto::encode(r));
    if (sending.empty()) write();
  }

  void start_connect() {
    state = State::kConnecting;
    connecting = std::make_unique<wire::AsyncConnect>(
        io, target, [weak = weak_from_this()](const std::string& error, tcp::socket s) {
          if (auto self = weak.lock()) self->linked(error, std::move(s));
        });
  }

  // The connect's end: the held calls go up, or are told why they cannot.
  void linked(const std::string& error, tcp::socket s) {
    if (!error.empty()) return unreached("this host's link to the job's store could not be made: " + error);
    sock = std::move(s);
    state = State::kUp;
    failures = 0;
    const auto now = Clock::now();
    for (auto& h : std::exchange(held, {})) send(h.id, aged(std::move(h.request), now - h.since));
    read();
  }

  void write() {
    sending.swap(out);
    asio::async_write(sock, asio::buffer(sending), [self = shared_from_this()](error_code ec, size_t) {
      self->sending.clear();
      if (ec) return self->broke("writing to the " + self->target.peer + " failed: " + ec.message());
      if (!self->out.empty()) self->write();
    });
  }

  void read() {
    sock.async_read_some(asio::buffer(buf.get(), kReadChunk), [self = shared_from_this()](error_code ec, size_t n) {
      if (ec) return self->broke(ec == asio::error::eof ? "the " + self->target.peer + " closed the connection"
                                                        : "reading from the " + self->target.peer + " failed: " + ec.message());
      try {
        self->parser.feed(self->buf.get(), n);
        while (auto f = self->parser.next()) self->dispatch(*f);
      } catch (const RemoteError& e) {
        return self->broke(e.what());
      }
      if (self->state == State::kUp) self->read();
    });
  }

  // One frame from the server: a reply to hand to its caller, or a refusal.
  void dispatch(const wire::Frame& f) {
    if (f.type == wire::kErrorText) throw RemoteError("the " + target.peer + " closed the connection: " + f.payload);
    if (f.type != proto::kReply2) throw RemoteError("the " + target.peer + " sent a frame of type " + std::to_string(f.type));
    const proto::Tagged t = proto::split_id(f.payload);
    auto it = calls.find(t.id);
    if (it == calls.end()) throw RemoteError("the " + target.peer + " answered request id " + std::to_string(t.id) + ", not sent");
    Call c = std::move(it->second);
    calls.erase(it);
    c.done(proto::decode_reply(t.payload, c.op));
  }

  void broke(const std::string& why) { fail("this host's link to the job's store broke: " + why); }

  // A try to make the link failed: its callers hear why, and the next
  // request after the pause tries again.
  void unreached(const std::string& why) {
    state = State::kUnreachable;
    unreachable = why;
    retry_at = Clock::now() + retry_pause(++failures);
    answer_all(why);
    if (on_unreachable) on_unreachable(why);
  }

  void fail(const std::string& why) {
    if (state == State::kBroken) return;
    state = State::kBroken;
    broken = why;
    error_code ignored;
    sock.close(ignored);
    answer_all(why);
  }

  void answer_all(const std::string& why) {
    connecting.reset();
    held.clear();
    auto all = std::move(calls);
    calls.clear();
    for (auto& [id, c] : all) c.done(error_reply(why));
  }
};

StoreUpstream::StoreUpstream(asio::io_context& io, const std::string& host, uint16_t port, const std::string& token,
                             wire::Millis connect_timeout) {
  const std::string peer = "store at " + host + ":" + std::to_string(port);
  impl_ = std::make_shared<Impl>(io, wire::AsyncConnectTarget{host, port, token, std::string(proto::kStoreTag), peer,
                                                              connect_timeout});
}

// Outstanding callers are dropped unanswered: their owner is going too.
StoreUpstream::~StoreUpstream() {
  impl_->calls.clear();
  impl_->fail("the link was closed");
}

void StoreUpstream::connect() {
  const wire::AsyncConnectTarget& t = impl_->target;
  wire::Socket s = wire::connect_authenticated(t.host, t.port, t.token, t.tag, t.peer, t.timeout);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len);
  error_code ec;
  impl_->sock.assign(ss.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), s.release(), ec);
  if (ec) throw IoError("cannot use the connection to the " + t.peer + ": " + ec.message());
  impl_->state = State::kUp;
  asio::post(impl_->io, [impl = impl_] {
    if (impl->state == State::kUp) impl->read();
  });
}

void StoreUpstream::call(const proto::Request& r, Done done) { impl_->call(r, std::move(done)); }
void StoreUpstream::set_on_unreachable(std::function<void(const std::string&)> fn) {
  impl_->on_unreachable = std::move(fn);
}
StoreUpstream::State StoreUpstream::state() const { return impl_->state; }
size_t StoreUpstream::outstanding() const { return impl_->calls.size(); }
uint64_t StoreUpstream::sent() const { return impl_->sent; }
const std::string& StoreUpstream::peer() const { return impl_->target.peer; }
void StoreUpstream::close() { impl_->broke("the link was closed"); }

}  // namespace dl::rdzv
