#include "rendezvous/tcp_store_server.h"

#include <fcntl.h>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "errors/error.h"
#include "rendezvous/spin_policy.h"
#include "rendezvous/store_protocol.h"
#include "rendezvous/store_state.h"
#include "wire/admission.h"
#include "wire/coding.h"
#include "wire/frame.h"
#include "wire/handshake.h"
#include "wire/helper_pool.h"
#include "wire/socket.h"

namespace dl::rdzv {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

namespace {
struct Session;
// A session's input buffer starts this big (not zero-filled) and grows to
// hold the largest frame being received.
constexpr size_t kReadChunk = 16384;
// While a session's handling is held up (a parked request, or replies the
// client is not reading), reading stops once this much input is buffered.
constexpr size_t kMaxHeldInput = 1u << 20;
// A session stops handling requests while more than this of its own
// replies wait to be sent (lists shared with other sessions not counted).
constexpr size_t kMaxHeldReplies = 1u << 20;
// A store/2 client whose unread replies to parked requests pass this is
// closed: its parked gets of one large value would otherwise queue a copy each.
constexpr size_t kMaxUnsentReplies = 256u << 20;
// Over net.core.somaxconn, so the kernel's cap is what applies.
constexpr int kListenBacklog = 65535;
// Connections accepted in one round before their handshakes are served.
constexpr size_t kAcceptsPerWake = 16384;

using WaiterPtr = StoreState::WaiterPtr;
// Nonces drawn per getrandom call for the handshakes of a burst of clients.
constexpr size_t kNoncesPerDraw = 64;
// A client whose request came within kSpinWhenFaster of our last reply is in
// a loop of requests: after answering, the server polls its socket for up to
// store_spin() before going back to the event loop, at most kMaxSpins
// requests in a row (spin_policy.h).
// A barrier answered at once releases a session per rank, and on loopback
// each release's send also runs the receiver's TCP input: past this many in
// one wake the sends are shared with helper threads.
constexpr size_t kParallelSendsFrom = 256;
}  // namespace

struct TcpStoreServer::Impl : std::enable_shared_from_this<Impl> {
  asio::io_context& io;
  tcp::acceptor acceptor;
  std::string token;
  std::function<void(const std::string&)> log;
  bool stopped = false;
  // The data, parked requests and their deadlines (store_state.h); answers
  // to parked requests go to their sessions through answer().
  StoreState state{[this](const WaiterPtr& w, const proto::Reply& r) { answer(w, r); }};
  std::unordered_set<std::shared_ptr<Session>> sessions;
  tcp protocol = tcp::v4();
  // One timer for the earliest deadline of a parked request: a thousand
  // waits cost no timer each (and no cancelled handler each when they are
  // answered together).
  asio::steady_timer wait_timer;
  Clock::time_point wait_timer_at = Clock::time_point::max();
  // Sessions still in the handshake, in accept order (so in deadline order),
  // with one timer for the oldest.
  std::deque<std::pair<Clock::time_point, std::weak_ptr<Session>>> handshaking;
  asio::steady_timer hs_timer;
  bool hs_timer_armed = false;
  std::string nonces;  // kNoncesPerDraw handshake nonces, used from the front
  size_t nonce_at = 0;
  // Unauthenticated connections per peer, and accept's spare descriptor.
  wire::Admission admission;
  std::atomic<uint64_t> accepted{0};

  Impl(asio::io_context& c, std::string tok)
      : io(c), acceptor(c), token(std::move(tok)), wait_timer(c), hs_timer(c) {}
  std::string next_nonce() {
    if (nonce_at >= nonces.size()) nonces = wire::random_bytes(kNoncesPerDraw * wire::kNonceSize), nonce_at = 0;
    nonce_at += wire::kNonceSize;
    return nonces.substr(nonce_at - wire::kNonceSize, wire::kNonceSize);
  }
  void arm_wait_timer();
  void on_wait_timer();
  void watch_handshake(const std::shared_ptr<Session>& s);
  void arm_hs_timer();
  void on_hs_timer();
  void accept_ready();
  void start_session(wire::Admission::Accepted& a);
  void wait_accept();
  void note(const std::string& line) { if (log) log("store: " + line); }
  void answer(const WaiterPtr& w, const proto::Reply& r);
  // While a request is executed, the sessions its answers released wait
  // here, and are flushed together once it is done (flush_released).
  bool collecting = false;
  std::vector<std::shared_ptr<Session>> released;
  std::unique_ptr<wire::HelperPool> helpers;
  void flush_released();
  void flush_soon(const std::shared_ptr<Session>& s);
  void shutdown();
  // The reply frame of `r`, whose list many sessions send: framed once per
  // list while its sessions still hold it.
  std::shared_ptr<const std::string> shared_frame(const proto::Reply& r, proto::Op op) {
    auto frame = framed.lock();
    if (frame && framed_list.lock() == r.list) return frame;
    std::string f;
    wire::append_frame(f, proto::kReply, proto::encode(r, op));
    frame = std::make_shared<const std::string>(std::move(f));
    framed = frame, framed_list = r.list;
    return frame;
  }
  std::weak_ptr<const std::string> framed, framed_list;
};

namespace {
using Impl = TcpStoreServer::Impl;

// One client connection. Reads on readiness into `in` ([head, tail) not yet
// handled), handles every whole frame there, and sends the replies gathered
// in `out` with one send; only when the socket is full does it wait to write.
struct Session : std::enable_shared_from_this<Session> {
  std::shared_ptr<Impl> srv;
  tcp::socket sock;
  int fd;
  std::string peer_;
  std::optional<wire::ServerHandshake> hs;  // engaged until the client proved it holds the token
  wire::PreAuthSlot slot;  // its place among its peer's unauthenticated connections, until then
  std::unique_ptr<char[]> in;
  size_t cap = 0, head = 0, tail = 0;
  std::string out;
  // Bytes shared with other sessions (an all-gather's list: a store/1
  // reply frame, or a store/2 reply's body whose head is in `out`), sent
  // after `out`; replies made meanwhile wait in `behind`, so they stay in order.
  std::shared_ptr<const std::string> shared_out;
  size_t shared_at = 0;
  std::string behind;
  WaiterPtr parked;  // at most one store/1 request is parked
  // Parked store/2 requests by id (at most proto::kMaxParked): they hold
  // nothing up.
  std::unordered_map<uint32_t, WaiterPtr> parked2;
  Clock::time_point replied_at{};  // when the last reply was queued
  // Until when the client may take to prove it holds the token: from its
  // accept, and again from our answer, so a server that answers late (a
  // connect storm) does not refuse clients for its own delay.
  Clock::time_point hs_deadline{};
  bool read_waiting = false, write_waiting = false, closing = false, closed = false;
  bool spoke = false;  // a request came (the log says which protocol the first one spoke)
  bool in_released = false;  // queued in srv->released

  Session(std::shared_ptr<Impl> s, tcp::socket so, wire::PreAuthSlot sl)
      : srv(std::move(s)), sock(std::move(so)), fd(sock.native_handle()), slot(std::move(sl)) {}

  // "address:port" of the client, for log lines only (so not looked up for
  // clients that never cause one).
  const std::string& peer() {
    if (peer_.empty()) {
      error_code ec;
      auto ep = sock.remote_endpoint(ec);
      peer_ = ec ? "client" : ep.address().to_string() + ":" + std::to_string(ep.port());
    }
    return peer_;
  }

  void start() {
    hs.emplace(srv->token, std::string(proto::kStoreTag), srv->next_nonce());
    hs_deadline = Clock::now() + wire::kPreAuthDeadline;
    srv->watch_handshake(shared_from_this());
    on_readable();  // the client speaks first: its hello may be here already
  }

  // Handling waits while a store/1 request is parked (its reply must come
  // before the next one's), or while more than kMaxHeldReplies of this
  // session's own replies are unsent (a client that sends and never reads).
  // A shared list on its way out holds nothing up: replies queue behind it
  // in order, and a store/2 client may pipeline the request that completes
  // another list it waits for (a host's forwarder, whose next arrival is
  // in its socket while the last list is still being sent to it).
  bool held() const { return parked || out.size() + behind.size() > kMaxHeldReplies; }

  void wait_readable() {
    if (read_waiting || closing || closed) return;
    read_waiting = true;
    sock.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
      self->read_waiting = false;
      if (ec) {
        if (ec != asio::error::operation_aborted) self->close(false);
        return;
      }
      self->on_readable();
    });
  }

  // Reads until the socket is drained (a read shorter than the room offered
  // means it is: more data raises a new readiness event), handling input as
  // it comes; then waits for more. Stops reading, without waiting, while
  // handling is held up and kMaxHeldInput is buffered: resume() goes on.
  void on_readable() {
    for (;;) {
      if (closing || closed) return;
      if (held() && tail - head >= kMaxHeldInput) return;
      make_room();
      const size_t room = cap - tail;
      ssize_t n = ::recv(fd, in.get() + tail, room, 0);
      if (n > 0) {
        const bool hot = Clock::now() - replied_at < kSpinWhenFaster;
        tail += static_cast<size_t>(n);
        serve_input();
        if (static_cast<size_t>(n) < room) {
          const bool may_spin = hot && spins < kMaxSpins && store_spin().count() > 0 && !held() && out.empty() && !shared_out;
          if (may_spin && backoff.take()) {
            if (next_request_soon()) {
              ++spins;
              backoff.succeeded();
              continue;
            }
            backoff.failed();
          }
          spins = 0;
          break;
        }
        continue;
      }
      if (n == 0) return close(false);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return close(false);
    }
    wait_readable();
  }

  // Polls (without sleeping, up to store_spin()) for the client's next
  // request once its replies are sent; true when one arrived.
  int spins = 0;
  SpinBackoff backoff;  // chances skipped after a spin found nothing
  bool next_request_soon() {
    const auto until = Clock::now() + store_spin();
    char c;
    do {
      ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
      // Data, EOF or an error: the read loop deals with each.
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return true;
    } while (Clock::now() < until);
    return false;
  }

  // Goes on after a parked request was answered or the replies were sent.
  void resume() {
    if (closing || closed || held()) return;
    serve_input();
    if (!read_waiting) on_readable();
  }

  // Room to read at least a chunk: compacts, grows for a large frame, and
  // gives a grown buffer back once it is empty.
  void make_room() {
    if (head == tail) {
      head = tail = 0;
      if (cap > 4 * kReadChunk) in.reset(), cap = 0;
    }
    if (!in) in.reset(new char[kReadChunk]), cap = kReadChunk;
    if (cap - tail >= kReadChunk / 4) return;
    if (head > 0) {
      std::memmove(in.get(), in.get() + head, tail - head);
      tail -= head;
      head = 0;
    }
    size_t want = cap;
    if (tail >= wire::kHeaderSize)
      want = std::max(want, wire::kHeaderSize + wire::decode_frame_header(in.get()).length);
    if (want - tail < kReadChunk / 4) want = tail + kReadChunk;
    if (want <= cap) return;
    std::unique_ptr<char[]> bigger(new char[want]);
    std::memcpy(bigger.get(), in.get(), tail);
    in = std::move(bigger);
    cap = want;
  }

  // Handles the whole frames buffered and sends the replies. A shared reply
  // sent at once no longer holds the requests behind it: go on with them.
  void serve_input() {
    do {
      handle_input();
      flush();
    } while (!held() && has_frame() && !closing && !closed);
  }

  bool has_frame() const {
    return tail - head >= wire::kHeaderSize &&
           tail - head >= wire::kHeaderSize + wire::decode_frame_header(in.get() + head).length;
  }

  // Handles whole frames in order until one parks or replies back up.
  void handle_input() {
    while (!held() && !closing && !closed && tail - head >= wire::kHeaderSize) {
      const char* h = in.get() + head;
      const auto [len32, type] = wire::decode_frame_header(h);
      const size_t len = len32;
      if (hs && ((type != wire::kHandshake && type != wire::kErrorText) || len > wire::kMaxHandshakePayload))
        return refuse("expected a store/1 token handshake, got something else");
      if (len > proto::kMaxFramePayload)
        return refuse("peer sent a frame of " + std::to_string(len) + " bytes, over the limit of " +
                      std::to_string(proto::kMaxFramePayload) + " bytes");
      if (tail - head < wire::kHeaderSize + len) return;
      std::string_view payload(h + wire::kHeaderSize, len);
      head += wire::kHeaderSize + len;
      if (hs) {
        if (type == wire::kErrorText) return refuse("the client left the handshake: " + std::string(payload));
        if (!hs->answered()) {
          auto answer = hs->answer(payload);
          if (!answer) return refuse(hs->error());
          wire::append_frame(out, wire::kHandshake, *answer);
          hs_deadline = Clock::now() + wire::kPreAuthDeadline;
          continue;
        }
        // Nothing after the proof is looked at before this check passes.
        if (!hs->verify(payload)) return refuse(hs->error());
        hs.reset();
        slot.release();
        continue;
      }
      handle(type, payload);
    }
    if (head == tail) head = tail = 0;
  }

  // A store/1 request (kRequest) or a store/2 one (kRequest2: led by its id).
  void handle(uint8_t type, std::string_view payload) {
    if (!spoke && srv->log) srv->note(peer() + (type == proto::kRequest2 ? " is a host's store/2 link" : " is a store/1 client"));
    spoke = true;
    auto malformed = [&] { return "malformed store request (frame type " + std::to_string(type) + ")"; };
    if (type != proto::kRequest && type != proto::kRequest2) return refuse(malformed());
    std::optional<uint32_t> id;
    proto::Request req;
    try {
      if (type == proto::kRequest2) {
        auto tagged = proto::split_id(payload);
        id = tagged.id, payload = tagged.payload;
      }
      req = proto::decode_request(payload);
    } catch (const RemoteError& e) {
      return refuse(malformed() + ": " + e.what());
    }
    std::string bad = id ? id_error(*id) : std::string();
    if (bad.empty()) bad = proto::check_limits(req);
    if (!bad.empty()) {
      srv->note(peer() + ": " + bad);
      return reply({proto::Status::kError, bad, 0, {}, nullptr}, req.op, id);
    }
    StoreState::Result r;
    {
      // Flushed however execute() leaves: a reply held back past it would
      // wait for the next request, and a timer's answer after it too.
      struct Collect {
        Impl& srv;
        explicit Collect(Impl& s) : srv(s) { srv.collecting = true; }
        ~Collect() { srv.flush_released(); }
      } collect(*srv);
      r = srv->state.execute(req);
    }
    if (r.parked) return park(std::move(r.parked), id);
    reply(r.reply, req.op, id);
  }

  // Why a store/2 request with this id is refused ("" when it is not).
  std::string id_error(uint32_t id) const {
    if (parked2.count(id)) return "store/2 request id " + std::to_string(id) + " is in use by a parked request";
    if (parked2.size() >= proto::kMaxParked)
      return "over " + std::to_string(proto::kMaxParked) + " requests parked on one store/2 connection";
    return {};
  }

  void park(WaiterPtr w, std::optional<uint32_t> id) {
    w->owner = weak_from_this();
    if (id) w->id = *id, w->tagged = true, parked2.emplace(*id, w);
    else parked = std::move(w);
    srv->arm_wait_timer();
  }

  // Queues r's frame: store/1's in order, store/2's with its id. An
  // all-gather's list is sent from the one copy every session shares
  // (framed once for store/1; after a per-session head for store/2), unless
  // another shared list is on its way out here.
  void reply(const proto::Reply& r, proto::Op op, std::optional<uint32_t> id = {}) {
    replied_at = Clock::now();
    if (r.list && !shared_out && id) {
      out += proto::frame_with_id(proto::kReply2, *id, std::string_view());
      wire::put_be32(out.data() + out.size() - 4 - wire::kHeaderSize, static_cast<uint32_t>(4 + 1 + r.list->size()));
      out.push_back(static_cast<char>(proto::Status::kOk));
      shared_out = r.list, shared_at = 0;
      return;
    }
    if (r.list && !shared_out) {
      shared_out = srv->shared_frame(r, op), shared_at = 0;
      return;
    }
    std::string& q = shared_out ? behind : out;
    if (id) q += proto::frame_with_id(proto::kReply2, *id, proto::encode(r, op));
    else wire::append_frame(q, proto::kReply, proto::encode(r, op));
  }

  // Sends a refusal the client can print, then closes. Input not yet
  // handled is dropped.
  void refuse(const std::string& why) {
    if (closing || closed) return;
    srv->note(peer() + " refused: " + why);
    wire::append_frame(out, wire::kErrorText, why);
    closing = true;
    head = tail = 0;
    flush();
  }

  // Sends what `out` holds (then shared_out) with non-blocking sends; waits
  // for room only when the client is not reading fast enough.
  void flush() {
    if (write_waiting || closed) return;
    while (!out.empty() || shared_out) {
      const std::string_view next =
          !out.empty() ? std::string_view(out) : std::string_view(*shared_out).substr(shared_at);
      ssize_t n = ::send(fd, next.data(), next.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return close(false);
      const size_t sent = n > 0 ? static_cast<size_t>(n) : 0;
      if (!out.empty()) out.erase(0, sent);
      else if ((shared_at += sent) == shared_out->size()) shared_out.reset(), shared_at = 0, out.append(behind), behind.clear();
      if (sent == next.size()) continue;
      write_waiting = true;
      sock.async_wait(tcp::socket::wait_write, [self = shared_from_this()](error_code ec) {
        self->write_waiting = false;
        if (ec) {
          if (ec != asio::error::operation_aborted) self->close(false);
          return;
        }
        self->flush();
        self->resume();
      });
      return;
    }
    if (out.capacity() > kMaxHeldInput) std::string().swap(out);
    if (closing) close();
  }

  // `ours`: we end the connection (refusal, stop), so shut it down first;
  // otherwise the client is gone already.
  void close(bool ours = true) {
    if (closed) return;
    closed = true;
    if (parked) srv->state.cancel(parked), parked.reset();
    for (const auto& [id, w] : parked2) srv->state.cancel(w);
    parked2.clear();
    error_code ignored;
    if (ours) sock.shutdown(tcp::socket::shutdown_both, ignored);
    sock.close(ignored);
    shared_out.reset();
    slot.release();
    srv->sessions.erase(shared_from_this());
  }
};
}  // namespace

// Accepts what is pending (one readiness event serves a burst of clients),
// closing those of a peer over its limit of unauthenticated ones
// (wire/admission.h), then starts the handshakes of those admitted.
// Accepting comes first, up to kAcceptsPerWake connections: accept4 costs
// a few microseconds and a handshake tens, and a connect storm that finds
// the backlog full loses its SYNs (the kernel sends them again after 1 s),
// so the backlog is emptied before the handshakes are served. Asio's reactor
// is edge-triggered: when the last batch was full (more may be pending) the
// next round is posted rather than waited for, so a storm larger than one
// round never sits in the backlog waiting for an edge that only a new
// connection would raise; posted, not looped, so the sessions accepted
// meanwhile are served between rounds and neither side starves.
void Impl::accept_ready() {
  if (stopped) return;
  std::vector<wire::Admission::Accepted> admitted;
  wire::Admission::Batch batch;
  for (size_t taken = 0; taken < kAcceptsPerWake;) {
    batch = admission.accept_pending(acceptor.native_handle());
    for (const auto& line : batch.notes) note(line);
    for (auto& a : batch.admitted) admitted.push_back(std::move(a));
    taken += batch.taken;
    if (batch.starved || batch.taken < wire::Admission::kMaxBatch) break;
  }
  for (auto& a : admitted) start_session(a);
  if (batch.starved) {
    // Out of descriptors or a transient error: retry shortly.
    auto t = std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(50));
    t->async_wait([self = shared_from_this(), t](error_code) { self->accept_ready(); });
    return;
  }
  if (batch.taken < wire::Admission::kMaxBatch) return wait_accept();
  asio::post(io, [self = shared_from_this()] { self->accept_ready(); });
}

void Impl::start_session(wire::Admission::Accepted& a) {
  // TCP_NODELAY comes from the listening socket (Linux copies it to
  // accepted sockets), so no setsockopt per client.
  tcp::socket sock(io);
  error_code ec;
  sock.assign(protocol, a.fd, ec);
  if (ec) {
    ::close(a.fd);
    note("cannot serve a client: " + ec.message());
    return;
  }
  auto s = std::make_shared<Session>(shared_from_this(), std::move(sock), std::move(a.slot));
  sessions.insert(s);
  accepted.fetch_add(1, std::memory_order_relaxed);
  s->start();
}

void Impl::watch_handshake(const std::shared_ptr<Session>& s) {
  handshaking.emplace_back(Clock::now() + wire::kPreAuthDeadline, s);
  if (!hs_timer_armed) arm_hs_timer();
}

// Points the handshake timer at the oldest handshake's deadline.
void Impl::arm_hs_timer() {
  hs_timer_armed = true;
  hs_timer.expires_at(handshaking.front().first);
  hs_timer.async_wait([self = shared_from_this()](error_code ec) {
    self->hs_timer_armed = false;
    if (!ec && !self->stopped) self->on_hs_timer();
  });
}

// Refuses the clients whose handshake is overdue; forgets those done.
void Impl::on_hs_timer() {
  const auto now = Clock::now();
  while (!handshaking.empty()) {
    auto [deadline, weak] = handshaking.front();
    auto s = weak.lock();
    if (s && s->hs && !s->closed) {
      if (deadline > now) break;
      if (s->hs_deadline > now) {
        // Answered since: watched again until its later deadline (queued
        // behind later accepts, which may then be refused up to that much late).
        handshaking.pop_front();
        handshaking.emplace_back(s->hs_deadline, weak);
        continue;
      }
      s->refuse("no handshake within " + std::to_string(wire::kPreAuthDeadline.count()) + " ms");
    }
    handshaking.pop_front();
  }
  if (!handshaking.empty()) arm_hs_timer();
}

void Impl::wait_accept() {
  acceptor.async_wait(tcp::acceptor::wait_read, [self = shared_from_this()](error_code ec) {
    if (self->stopped || ec == asio::error::operation_aborted) return;
    self->accept_ready();
  });
}

// Points the one wait timer at the earliest deadline when that moved earlier.
void Impl::arm_wait_timer() {
  const auto next = state.next_deadline();
  if (next == Clock::time_point::max() || next >= wait_timer_at) return;
  wait_timer_at = next;
  wait_timer.expires_at(wait_timer_at);  // cancels the wait for a later one
  wait_timer.async_wait([self = shared_from_this()](error_code ec) {
    if (ec == asio::error::operation_aborted || self->stopped) return;
    self->on_wait_timer();
  });
}

// Answers every parked request whose deadline passed with its missing keys.
void Impl::on_wait_timer() {
  wait_timer_at = Clock::time_point::max();
  state.expire(Clock::now());
  arm_wait_timer();
}

// Sends a parked request's answer to its session, if it is still there.
void Impl::answer(const WaiterPtr& w, const proto::Reply& r) {
  auto s = std::static_pointer_cast<Session>(w->owner.lock());
  if (!s || s->closed) return;
  if (w->tagged) {
    s->parked2.erase(w->id);
    s->reply(r, w->req.op, w->id);
    if (s->out.size() + s->behind.size() > kMaxUnsentReplies) {
      note(s->peer() + " closed: over " + std::to_string(kMaxUnsentReplies >> 20) + " MiB of replies unread");
      return s->close();
    }
    return flush_soon(s);
  }
  s->parked.reset();
  s->reply(r, w->req.op);
  flush_soon(s);
  // Continue with requests that arrived meanwhile, outside this call chain.
  if (s->tail > s->head || !s->read_waiting) asio::post(io, [s] { s->resume(); });
}

void Impl::flush_soon(const std::shared_ptr<Session>& s) {
  if (!collecting) return s->flush();
  if (!s->in_released) s->in_released = true, released.push_back(s);
}

// Sends what the sessions released by one request hold. Many at once: the
// first send of each session's plain replies (no shared list, no wait for
// room) runs on the helper threads too, each session's on one thread; then
// flush() here deals with what is left, a full socket, an error or a close.
void Impl::flush_released() {
  collecting = false;
  if (released.empty()) return;
  auto batch = std::move(released);
  released.clear();
  if (batch.size() >= kParallelSendsFrom) {
    if (!helpers) helpers = std::make_unique<wire::HelperPool>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u) - 1);
    std::vector<ssize_t> sent(batch.size(), 0);
    for (size_t i = 0; i < batch.size(); ++i) {
      const Session& s = *batch[i];
      if (s.closed || s.write_waiting || s.shared_out || s.out.empty()) sent[i] = -1;
    }
    if (helpers->max_helpers() > 0) {
      const std::function<void(size_t)> send_one = [&](size_t i) {
        if (sent[i] < 0) return;
        const Session& s = *batch[i];
        sent[i] = ::send(s.fd, s.out.data(), s.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      };
      helpers->for_each_index(batch.size(), send_one);
      for (size_t i = 0; i < batch.size(); ++i)
        if (sent[i] > 0) batch[i]->out.erase(0, static_cast<size_t>(sent[i]));
    }
  }
  for (const auto& s : batch) s->in_released = false, s->flush();
}

void Impl::shutdown() {
  if (stopped) return;
  stopped = true;
  error_code ignored;
  acceptor.close(ignored);
  wait_timer.cancel();
  hs_timer.cancel();
  auto all = sessions;
  for (const auto& s : all) s->close();
}

TcpStoreServer::TcpStoreServer(asio::io_context& io, const std::string& bind_host, uint16_t port, std::string token)
    : impl_(std::make_shared<Impl>(io, std::move(token))) {
  // A descriptor per client: the usual soft limit of 1024 would turn a
  // thousand ranks away (rank 0 hosting the store has not raised it).
  wire::raise_descriptor_limit();
  const std::string where = (bind_host.empty() ? "0.0.0.0" : bind_host) + ":" + std::to_string(port);
  try {
    auto addr = asio::ip::make_address(bind_host.empty() ? "0.0.0.0" : bind_host);
    tcp::endpoint ep(addr, port);
    impl_->acceptor.open(ep.protocol());
    // Not inherited by the processes the server's host starts (the launcher's agent and ranks).
    ::fcntl(impl_->acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
    impl_->protocol = ep.protocol();
    impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    // Inherited by every accepted socket: replies are small and must not wait.
    impl_->acceptor.set_option(tcp::no_delay(true));
    impl_->acceptor.non_blocking(true);
    impl_->acceptor.bind(ep);
    // The kernel caps the backlog at net.core.somaxconn: asking for more
    // gets the system's whole allowance (4096 by default since Linux 5.4),
    // with no tuning asked of users; clients turned away when even that
    // overflows try again with backoff (wire/client_retry.h).
    impl_->acceptor.listen(kListenBacklog);
  } catch (const boost::system::system_error& e) {
    throw IoError("store server cannot listen on " + where + ": " + e.code().message() +
                  " (is another server on that port, or is the address not this host's?)");
  }
  port_ = impl_->acceptor.local_endpoint().port();
  asio::post(io, [impl = impl_] { impl->accept_ready(); });
}

TcpStoreServer::~TcpStoreServer() { stop(); }

uint64_t TcpStoreServer::connections_accepted() const { return impl_->accepted.load(std::memory_order_relaxed); }

size_t TcpStoreServer::erase_all_but(const std::string& keep) { return impl_->state.erase_all_but(keep); }

void TcpStoreServer::stop() {
  asio::dispatch(impl_->io, [impl = impl_] { impl->shutdown(); });
}

void TcpStoreServer::set_logger(std::function<void(const std::string&)> log) {
  asio::dispatch(impl_->io, [impl = impl_, log = std::move(log)]() mutable { impl->log = std::move(log); });
}

BackgroundStoreServer::BackgroundStoreServer(const std::string& bind_host, uint16_t port, std::string token)
    : server_(std::make_unique<TcpStoreServer>(io_, bind_host, port, std::move(token))) {
  thread_ = std::thread([this] { io_.run(); });
}

BackgroundStoreServer::~BackgroundStoreServer() {
  server_->stop();
  io_.stop();
  thread_.join();
  // The thread may have stopped before running the posted shutdown: run it
  // (and the handlers it cancels) here, so every client socket is closed.
  io_.restart();
  io_.poll();
}

}  // namespace dl::rdzv
