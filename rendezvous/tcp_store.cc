#include "rendezvous/tcp_store.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "errors/error.h"
#include "wire/client_retry.h"
#include "wire/coding.h"
#include "wire/handshake.h"
#include "wire/socket_owner.h"

namespace dl::rdzv {

using Clock = std::chrono::steady_clock;
using proto::Op;

TcpStore::TcpStore(std::string host, uint16_t port, std::string token, Millis connect_timeout)
    : host_(std::move(host)), token_(std::move(token)), port_(port), connect_timeout_(connect_timeout) {
  peer_ = "store at " + host_ + ":" + std::to_string(port_);
  std::lock_guard lk(mu_);
  connect();
}

TcpStore::TcpStore(StoreDoorPath door, std::string token, Millis connect_timeout)
    : token_(std::move(token)), door_(std::move(door.path)), connect_timeout_(connect_timeout) {
  peer_ = "store door at " + door_;
  std::lock_guard lk(mu_);
  connect();
}

TcpStore::~TcpStore() {
  std::lock_guard lk(mu_);
  try {
    // Outstanding answers are read so that the server has handled every set
    // before this client goes; a refusal here has no caller left to tell.
    if (!pending_.empty() && sock_.valid()) collect_pending(kCloseFlushTimeout);
  } catch (const Error&) {}
  sock_.close();
}

void TcpStore::own_server(std::shared_ptr<void> server) { hosted_ = std::move(server); }

namespace {
// The longest receive timeout set on the socket: a longer wait re-arms every
// slice, so the usual operations (handshake, add, wait) all run under the
// same SO_RCVTIMEO and it is set once per connection.
constexpr Millis kRecvSlice{5000};

timeval to_timeval(Millis t) {
  return {static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>((t.count() % 1000) * 1000)};
}

// `e` again, of the same kind, with `more` after its message.
[[noreturn]] void rethrow_with(const Error& e, const std::string& more) {
  throw Error(e.kind(), std::string(e.what()) + more);
}

std::string quoted_keys(const std::deque<std::string>& keys, size_t most) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < most; ++i) out += (i ? ", '" : "'") + keys[i].substr(0, 200) + "'";
  if (keys.size() > most) out += " and " + std::to_string(keys.size() - most) + " more";
  return out;
}

}  // namespace

// Connects and runs the token handshake, trying again (wire/client_retry.h)
// while the server is starting, busy or turned this try away, until
// connect_timeout_.
void TcpStore::connect() {
  wire::retry_until(peer_, connect_timeout_, [this](const wire::Try& t) { connect_once(t); });
}

// One try: connect, then the handshake with one recv per server frame.
void TcpStore::connect_once(const wire::Try& t) {
  inbuf_.clear();
  recv_timeout_ = Millis(-1);  // a new socket has none set
  sock_.close();
  sock_ = door_.empty() ? wire::connect_tcp(host_, port_, t.connect_wait) : wire::connect_unix(door_);
  try {
    wire::ClientHandshake hs(token_, proto::kStoreTag, peer_);
    const auto sent = Clock::now();
    outbuf_.clear();
    wire::append_frame(outbuf_, wire::kHandshake, hs.hello());
    wire::send_all(sock_, outbuf_, peer_);
    std::string proof;
    try {
      proof = hs.finish(read_frame(t.wait, wire::kMaxHandshakePayload));
      fast_ = Clock::now() - sent < kSpinWhenFaster;
    } catch (const AuthError&) {
      try {
        wire::send_all(sock_, wire::encode_frame(wire::kErrorText, std::string(wire::ClientHandshake::refusal())), peer_);
      } catch (const Error&) {}
      throw_if_foreign();
      throw;
    } catch (const TimeoutError&) {
      throw_if_foreign();
      throw;
    }
    // Not waited for: the server checks the proof before the request that
    // follows it, and refuses (the next read says so) if it is wrong.
    outbuf_.clear();
    wire::append_frame(outbuf_, wire::kHandshake, proof);
    wire::send_all(sock_, outbuf_, peer_);
  } catch (...) {
    sock_.close();  // never left connected but unauthenticated
    throw;
  }
}

// A port on this host that answers no handshake, or not ours, may be held by
// another user's program: then say whose it is, and try no more.
void TcpStore::throw_if_foreign() {
  if (!door_.empty() || !wire::is_loopback_host(host_)) return;
  const std::string holder = wire::foreign_holder(host_, port_, "store");
  if (!holder.empty()) throw AuthError(holder);
}

// Sets the socket's receive timeout when it differs from the one set last.
void TcpStore::set_recv_timeout(Millis t) {
  if (t == recv_timeout_) return;
  const timeval tv = to_timeval(t);
  if (::setsockopt(sock_.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) throw_errno("configuring " + peer_);
  recv_timeout_ = t;
}

// A blocking recv bounded by SO_RCVTIMEO rather than poll + recv: one
// system call per frame (header and payload together) instead of four.
wire::Frame TcpStore::read_frame(Millis timeout, size_t max_payload, bool spin) {
  const auto deadline = Clock::now() + timeout;
  const auto spin_until = spin ? Clock::now() + store_spin() : Clock::time_point::min();
  char buf[65536];
  for (;;) {
    if (inbuf_.size() >= wire::kHeaderSize) {
      const wire::FrameHeader h = wire::decode_frame_header(inbuf_.data());
      const size_t len = h.length;
      if (len > max_payload)
        throw RemoteError(peer_ + " sent a frame of " + std::to_string(len) + " bytes, over the limit of " +
                          std::to_string(max_payload));
      if (inbuf_.size() >= wire::kHeaderSize + len) {
        wire::Frame f{h.type, inbuf_.substr(wire::kHeaderSize, len)};
        inbuf_.erase(0, wire::kHeaderSize + len);
        return f;
      }
    }
    const auto now = Clock::now();
    ssize_t n;
    if (now < spin_until) {
      n = ::recv(sock_.fd(), buf, sizeof buf, MSG_DONTWAIT);
    } else {
      auto left = std::chrono::duration_cast<Millis>(deadline - now);
      if (left <= Millis(0))
        throw TimeoutError("no reply from " + peer_ + " within " + std::to_string(timeout.count()) + " ms");
      // A timeout of 0 would mean "never": keep at least 1 ms.
      set_recv_timeout(std::clamp(left, Millis(1), kRecvSlice));
      n = ::recv(sock_.fd(), buf, sizeof buf, 0);
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n < 0) throw_errno("reading from " + peer_);
    if (n == 0) throw RemoteError(peer_ + " closed the connection (did the store server stop?)");
    inbuf_.append(buf, static_cast<size_t>(n));
  }
}

std::string TcpStore::drop_connection() {
  sock_.close();
  if (pending_.empty()) return "";
  std::string lost = " (the sets of " + quoted_keys(pending_, 3) + " were sent but not answered: they may be lost)";
  pending_.clear();
  return lost;
}

// Reads one answer per pending set, in order, all of them even after a
// refusal so that the stream stays in step; then throws the first refusal.
void TcpStore::collect_pending(Millis timeout) {
  std::string refused;
  size_t refusals = 0;
  while (!pending_.empty()) {
    proto::Reply r;
    try {
      wire::Frame f = read_frame(timeout, proto::kMaxFramePayload);
      if (f.type == wire::kErrorText) throw RemoteError(peer_ + " closed the connection: " + f.payload);
      if (f.type != proto::kReply) throw RemoteError(peer_ + " sent a malformed reply to a set");
      r = proto::decode_reply(f.payload, Op::kSet);
    } catch (const Error& e) {
      rethrow_with(e, drop_connection());
    }
    if (r.status == proto::Status::kError && refusals++ == 0)
      refused = peer_ + " refused the set of key '" + pending_.front().substr(0, 200) + "': " + r.value;
    pending_.pop_front();
  }
  if (refusals > 1) refused += " (and " + std::to_string(refusals - 1) + " later sets were refused too)";
  if (refusals > 0) throw RemoteError(refused);
}

void TcpStore::flush() {
  std::lock_guard lk(mu_);
  if (!pending_.empty()) collect_pending(timeout());
}

proto::Reply TcpStore::call(const proto::Request& req, Millis reply_timeout) {
  std::lock_guard lk(mu_);
  if (!sock_.valid()) connect();
  // A request is sent only once the sets before it were answered: their
  // refusal is this call's error, and the request is not made.
  if (!pending_.empty()) collect_pending(timeout());
  proto::Reply r;
  try {
    // Requests that are answered at once spin for their reply while round
    // trips are fast; one that parks (wait, barrier) never does.
    const bool immediate = req.op != Op::kWait && req.op != Op::kBarrier && req.op != Op::kAllGather;
    const bool spin = immediate && fast_ && store_spin().count() > 0 && spin_backoff_.take();
    outbuf_.clear();
    wire::append_frame(outbuf_, proto::kRequest, proto::encode(req));
    const auto sent = Clock::now();
    wire::send_all(sock_, outbuf_, peer_);
    wire::Frame f = read_frame(reply_timeout, proto::kMaxFramePayload, spin);
    const auto took = Clock::now() - sent;
    if (spin && took <= store_spin()) spin_backoff_.succeeded();
    else if (spin) spin_backoff_.failed();
    if (immediate) fast_ = took < kSpinWhenFaster;
    if (f.type == wire::kErrorText) throw RemoteError(peer_ + " closed the connection: " + f.payload);
    auto malformed = [&] { return peer_ + " sent a malformed reply (is it a dlaunch store of the same version?)"; };
    if (f.type != proto::kReply) throw RemoteError(malformed());
    try {
      r = proto::decode_reply(f.payload, req.op);
    } catch (const RemoteError& e) {
      throw RemoteError(malformed() + ": " + e.what());
    }
  } catch (const Error&) {
    sock_.close();  // the stream is out of step now; the next call reconnects
    throw;
  }
  // A refusal (key or value over the limits) leaves the connection usable.
  if (r.status == proto::Status::kError) throw RemoteError(peer_ + " refused the request: " + r.value);
  return r;
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  std::lock_guard lk(mu_);
  if (!sock_.valid()) connect();
  outbuf_.clear();
  wire::append_frame(outbuf_, proto::kRequest, proto::encode(proto::Request{Op::kSet, {key}, value, {}, 0}));
  try {
    wire::send_all(sock_, outbuf_, peer_);
  } catch (const Error& e) {
    rethrow_with(e, " (the set of key '" + key.substr(0, 200) + "' was not sent)" + drop_connection());
  }
  pending_.push_back(key);
  if (pending_.size() >= kMaxPendingSets) collect_pending(timeout());
}

Bytes TcpStore::get(const std::string& key) {
  auto r = call({Op::kGet, {key}, {}, {}, timeout().count()}, timeout() + kReplyGrace);
  if (r.status == proto::Status::kTimeout) throw TimeoutError(timeout_message(timeout(), r.keys));
  return r.value;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  return call({Op::kAdd, {key}, {}, {}, delta}, timeout()).number;
}

Bytes TcpStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return call({Op::kCas, {key}, expected, desired, 0}, timeout()).value;
}

void TcpStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  auto r = call({Op::kWait, keys, {}, {}, timeout.count()}, timeout + kReplyGrace);
  if (r.status == proto::Status::kTimeout) throw TimeoutError(timeout_message(timeout, r.keys));
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  return call({Op::kCheck, keys, {}, {}, 0}, timeout()).number != 0;
}

bool TcpStore::delete_key(const std::string& key) {
  return call({Op::kDelete, {key}, {}, {}, 0}, timeout()).number != 0;
}

int64_t TcpStore::barrier(const std::string& key, int64_t count, Millis timeout) {
  check_barrier_count(key, count);
  proto::Request req{Op::kBarrier, {key}, {}, {}, timeout.count()};
  req.count = count;
  auto r = call(req, timeout + kReplyGrace);
  if (r.status == proto::Status::kTimeout) throw TimeoutError(barrier_timeout_message(timeout, key, count));
  return r.number;
}

std::vector<Bytes> TcpStore::all_gather(const std::string& prefix, int64_t rank, int64_t count, const Bytes& value,
                                        Millis timeout) {
  check_all_gather(prefix, rank, count, value.size());
  proto::Request req{Op::kAllGather, {prefix}, value, {}, timeout.count()};
  req.count = count, req.rank = rank;
  auto r = call(req, timeout + kReplyGrace);
  if (r.status == proto::Status::kTimeout)
    throw TimeoutError(all_gather_timeout_message(timeout, prefix, count, r.keys));
  try {
    return proto::decode_values(r.value);
  } catch (const RemoteError& e) {
    throw RemoteError(peer_ + " sent a malformed all-gather reply: " + e.what());
  }
}

int64_t TcpStore::num_keys() { return call({Op::kNumKeys, {}, {}, {}, 0}, timeout()).number; }

}  // namespace dl::rdzv
