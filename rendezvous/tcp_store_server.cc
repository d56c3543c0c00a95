#include "rendezvous/tcp_store_server.h"

#include <algorithm>
#include <array>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include "errors/error.h"
#include "rendezvous/store_protocol.h"
#include "wire/frame.h"
#include "wire/handshake.h"

namespace dl::rdzv {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
using Strand = asio::strand<asio::io_context::executor_type>;

namespace {
struct Session;
constexpr size_t kReadChunk = 65536;

// A request parked until its keys exist or its timeout passes.
struct Waiter {
  std::weak_ptr<Session> session;
  proto::Request req;
  asio::steady_timer timer;
  bool done = false;
  Waiter(Strand& s, proto::Request r) : req(std::move(r)), timer(s) {}
};
using WaiterPtr = std::shared_ptr<Waiter>;
}  // namespace

struct TcpStoreServer::Impl : std::enable_shared_from_this<Impl> {
  Strand strand;
  tcp::acceptor acceptor;
  std::string token;
  std::function<void(const std::string&)> log;
  bool stopped = false;
  std::unordered_map<std::string, std::string> data;
  std::unordered_map<std::string, std::vector<WaiterPtr>> waiters;  // by missing key
  std::unordered_set<std::shared_ptr<Session>> sessions;

  Impl(asio::io_context& io, std::string tok) : strand(asio::make_strand(io)), acceptor(strand), token(std::move(tok)) {}
  void accept();
  void note(const std::string& line) { if (log) log("store: " + line); }
  bool has_all(const std::vector<std::string>& keys) const {
    return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return data.count(k) > 0; });
  }
  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& k : keys) if (!data.count(k)) out.push_back(k);
    return out;
  }
  void park(const std::shared_ptr<Session>& s, proto::Request req);
  void unpark(const WaiterPtr& w);
  void notify(const std::string& key);
  void finish(const WaiterPtr& w, bool timed_out);
  proto::Reply execute(const proto::Request& r, bool& parked, const std::shared_ptr<Session>& s);
  void shutdown();
};

namespace {
using Impl = TcpStoreServer::Impl;

struct Session : std::enable_shared_from_this<Session> {
  std::shared_ptr<Impl> srv;
  tcp::socket sock;
  std::string peer;
  wire::ServerHandshake hs;
  asio::steady_timer hs_timer;
  std::array<char, 5> header{};
  std::string hs_payload;
  // Not zero-filled: a thousand clients joining at once should not each cost
  // a 64 KiB memset in the server's thread.
  std::unique_ptr<char[]> rbuf{new char[kReadChunk]};
  wire::FrameParser parser{proto::kMaxFramePayload};
  std::deque<wire::Frame> pending;     // requests received while one is parked
  WaiterPtr parked;                    // at most one request is parked
  std::deque<std::string> outq;
  bool writing = false, closing = false, closed = false;

  Session(std::shared_ptr<Impl> s, tcp::socket so)
      : srv(std::move(s)), sock(std::move(so)), hs(srv->token, std::string(proto::kStoreTag)), hs_timer(srv->strand) {
    error_code ec;
    auto ep = sock.remote_endpoint(ec);
    peer = ec ? "client" : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  void start() {
    sock.set_option(tcp::no_delay(true));
    send(wire::kHandshake, hs.hello());
    hs_timer.expires_after(wire::kDefaultHandshakeTimeout);
    hs_timer.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->refuse("no handshake within " + std::to_string(wire::kDefaultHandshakeTimeout.count()) + " ms");
    });
    asio::async_read(sock, asio::buffer(header), [self = shared_from_this()](error_code ec, size_t) {
      self->on_hs_header(ec);
    });
  }

  void on_hs_header(error_code ec) {
    if (ec) return close();
    const auto* p = reinterpret_cast<const unsigned char*>(header.data());
    size_t len = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
    if (p[4] != wire::kHandshake || len > wire::kMaxHandshakePayload)
      return refuse("expected a store/1 token handshake, got something else");
    hs_payload.resize(len);
    asio::async_read(sock, asio::buffer(hs_payload), [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->close();
      auto accept = self->hs.verify(self->hs_payload);
      if (!accept) return self->refuse(self->hs.error());
      self->hs_timer.cancel();
      self->send(wire::kHandshake, *accept);
      self->read();
    });
  }

  // Sends a refusal the client can print, then closes.
  void refuse(const std::string& why) {
    if (closing || closed) return;
    srv->note(peer + " refused: " + why);
    send(wire::kErrorText, why);
    closing = true;
    if (!writing) close();
  }

  void read() {
    if (closing || closed) return;
    sock.async_read_some(asio::buffer(rbuf.get(), kReadChunk), [self = shared_from_this()](error_code ec, size_t n) {
      if (ec) return self->close();
      try {
        self->parser.feed(self->rbuf.get(), n);
        while (auto f = self->parser.next()) self->pending.push_back(std::move(*f));
      } catch (const Error& e) {
        return self->refuse(e.what());
      }
      self->drain();
      // Back-pressure: a client that pipelines without reading waits for us.
      if (self->pending.size() < 64) self->read();
    });
  }

  // Handles queued requests until one parks.
  void drain() {
    bool was_full = pending.size() >= 64;
    while (!parked && !pending.empty() && !closing && !closed) {
      wire::Frame f = std::move(pending.front());
      pending.pop_front();
      handle(f);
    }
    if (was_full && pending.size() < 64) read();
  }

  void handle(const wire::Frame& f) {
    auto req = f.type == proto::kRequest ? proto::decode_request(f.payload) : std::nullopt;
    if (!req) return refuse("malformed store request (frame type " + std::to_string(f.type) + ")");
    std::string bad = proto::check_limits(*req);
    if (!bad.empty()) {
      srv->note(peer + ": " + bad);
      return reply({proto::Status::kError, bad, 0, {}}, req->op);
    }
    bool now_parked = false;
    proto::Reply r = srv->execute(*req, now_parked, shared_from_this());
    if (!now_parked) reply(r, req->op);
  }

  void reply(const proto::Reply& r, proto::Op op) { send(proto::kReply, proto::encode(r, op)); }

  void send(uint8_t type, std::string_view payload) {
    if (closed) return;
    outq.push_back(wire::encode_frame(type, payload));
    if (!writing) write_next();
  }

  void write_next() {
    if (outq.empty() || closed) {
      writing = false;
      if (closing) close();
      return;
    }
    writing = true;
    asio::async_write(sock, asio::buffer(outq.front()), [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->close();
      self->outq.pop_front();
      self->write_next();
    });
  }

  void close() {
    if (closed) return;
    closed = true;
    if (parked) srv->unpark(parked), parked.reset();
    hs_timer.cancel();
    error_code ignored;
    sock.shutdown(tcp::socket::shutdown_both, ignored);
    sock.close(ignored);
    srv->sessions.erase(shared_from_this());
  }
};
}  // namespace

void Impl::accept() {
  acceptor.async_accept(strand, [self = shared_from_this()](error_code ec, tcp::socket sock) {
    if (self->stopped) return;
    if (ec) {
      // Out of descriptors or a transient error: say so, retry shortly.
      self->note("accept failed: " + ec.message());
      auto t = std::make_shared<asio::steady_timer>(self->strand, std::chrono::milliseconds(50));
      return t->async_wait([self, t](error_code) { if (!self->stopped) self->accept(); });
    }
    auto s = std::make_shared<Session>(self, std::move(sock));
    self->sessions.insert(s);
    s->start();
    self->accept();
  });
}

proto::Reply Impl::execute(const proto::Request& r, bool& parked, const std::shared_ptr<Session>& s) {
  using proto::Op;
  proto::Reply out;
  const std::string& key = r.keys.empty() ? token : r.keys[0];  // token: never read for key-less ops
  switch (r.op) {
    case Op::kSet: data[key] = r.value; notify(key); break;
    case Op::kGet: case Op::kWait:
      if (!has_all(r.keys)) { parked = true; park(s, r); break; }
      if (r.op == Op::kGet) out.value = data[key];
      break;
    case Op::kAdd: {
      auto it = data.find(key);
      int64_t v = 0;
      if (it != data.end()) {
        try { size_t pos = 0; v = std::stoll(it->second, &pos); if (pos != it->second.size()) throw 0; }
        catch (...) { return {proto::Status::kError, "add: the value at key '" + key + "' is not an integer", 0, {}}; }
      }
      out.number = v + r.number;
      data[key] = std::to_string(out.number);
      notify(key);
      break;
    }
    case Op::kCas: {
      auto it = data.find(key);
      if (it == data.end() && !r.value.empty()) { out.value = r.value; break; }
      if (it != data.end() && it->second != r.value) { out.value = it->second; break; }
      data[key] = r.desired;
      out.value = r.desired;
      notify(key);
      break;
    }
    case Op::kCheck: out.number = has_all(r.keys); break;
    case Op::kDelete: out.number = data.erase(key) > 0; break;
    case Op::kNumKeys: out.number = static_cast<int64_t>(data.size()); break;
  }
  return out;
}

void Impl::park(const std::shared_ptr<Session>& s, proto::Request req) {
  auto w = std::make_shared<Waiter>(strand, std::move(req));
  w->session = s;
  s->parked = w;
  for (const auto& k : missing(w->req.keys)) waiters[k].push_back(w);
  w->timer.expires_after(std::chrono::milliseconds(std::max<int64_t>(w->req.number, 0)));
  w->timer.async_wait([self = shared_from_this(), w](error_code ec) {
    if (!ec && !w->done) self->finish(w, true);
  });
}

void Impl::unpark(const WaiterPtr& w) {
  w->done = true;
  w->timer.cancel();
  for (const auto& k : w->req.keys) {
    auto it = waiters.find(k);
    if (it == waiters.end()) continue;
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), w), v.end());
    if (v.empty()) waiters.erase(it);
  }
}

void Impl::notify(const std::string& key) {
  auto it = waiters.find(key);
  if (it == waiters.end()) return;
  std::vector<WaiterPtr> ws = std::move(it->second);
  waiters.erase(it);
  for (const auto& w : ws)
    if (!w->done && has_all(w->req.keys)) finish(w, false);
}

void Impl::finish(const WaiterPtr& w, bool timed_out) {
  unpark(w);
  auto s = w->session.lock();
  if (!s || s->closed) return;
  proto::Reply r;
  if (timed_out) r.status = proto::Status::kTimeout, r.keys = missing(w->req.keys);
  else if (w->req.op == proto::Op::kGet) r.value = data[w->req.keys[0]];
  s->parked.reset();
  s->reply(r, w->req.op);
  // Continue with requests that arrived meanwhile, outside this call chain.
  asio::post(strand, [s] { s->drain(); });
}

void Impl::shutdown() {
  if (stopped) return;
  stopped = true;
  error_code ignored;
  acceptor.close(ignored);
  auto all = sessions;
  for (const auto& s : all) s->close();
}

TcpStoreServer::TcpStoreServer(asio::io_context& io, const std::string& bind_host, uint16_t port, std::string token)
    : impl_(std::make_shared<Impl>(io, std::move(token))) {
  const std::string where = (bind_host.empty() ? "0.0.0.0" : bind_host) + ":" + std::to_string(port);
  try {
    auto addr = asio::ip::make_address(bind_host.empty() ? "0.0.0.0" : bind_host);
    tcp::endpoint ep(addr, port);
    impl_->acceptor.open(ep.protocol());
    impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    impl_->acceptor.bind(ep);
    impl_->acceptor.listen(asio::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    throw IoError("store server cannot listen on " + where + ": " + e.code().message() +
                  " (is another server on that port, or is the address not this host's?)");
  }
  port_ = impl_->acceptor.local_endpoint().port();
  asio::post(impl_->strand, [impl = impl_] { impl->accept(); });
}

TcpStoreServer::~TcpStoreServer() { stop(); }

void TcpStoreServer::stop() {
  asio::dispatch(impl_->strand, [impl = impl_] { impl->shutdown(); });
}

void TcpStoreServer::set_logger(std::function<void(const std::string&)> log) {
  asio::dispatch(impl_->strand, [impl = impl_, log = std::move(log)]() mutable { impl->log = std::move(log); });
}

BackgroundStoreServer::BackgroundStoreServer(const std::string& bind_host, uint16_t port, std::string token)
    : server_(std::make_unique<TcpStoreServer>(io_, bind_host, port, std::move(token))) {
  thread_ = std::thread([this] { io_.run(); });
}

BackgroundStoreServer::~BackgroundStoreServer() {
  server_->stop();
  io_.stop();
  thread_.join();
}

}  // namespace dl::rdzv
