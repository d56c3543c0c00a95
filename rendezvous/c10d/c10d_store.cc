#include "rendezvous/c10d/c10d_store.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include "errors/error.h"
#include "rendezvous/c10d/c10d_keyspace.h"
#include "wire/socket_owner.h"

namespace dl::rdzv {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {
// Input a query may take before it is whole (a MULTI_SET of many values),
// and replies a client may leave unread, before it is closed.
constexpr size_t kMaxInput = 32u << 20;
constexpr size_t kMaxUnread = 64u << 20;
struct Conn;
}  // namespace

struct C10dStore::Impl : std::enable_shared_from_this<Impl> {
  asio::io_context& io;
  tcp::acceptor acceptor;
  Options opts;
  c10d::Keyspace keys;
  std::unordered_map<uint64_t, std::shared_ptr<Conn>> conns;
  std::map<std::string, int> clients;  // Seen::clients
  uint64_t next_id = 0;
  bool stopped = false;
  // Every client is read on readiness into this one buffer, so an idle
  // connection holds no read buffer (a job opens up to two per rank).
  std::array<char, 65536> scratch;

  Impl(asio::io_context& c, Options o)
      : io(c), acceptor(c), opts(std::move(o)), keys({opts.max_keys, opts.max_bytes}) {}
  void accept();
  bool admitted(tcp::socket& s, std::string& who);
  void wake();
  void note(const std::string& line) { if (opts.log) opts.log("c10d store: " + line); }
  // A connection closed at accept: told once per peer and second (a flood
  // is counted, not echoed).
  void closed_at_accept(const std::string& peer, const std::string& why);
  struct Untold {
    size_t count = 0;
    std::chrono::steady_clock::time_point told{};
  };
  std::unordered_map<std::string, Untold> untold;
};

namespace {
using Impl = C10dStore::Impl;

// One client: reads what it sends, handles each whole query, writes the replies.
struct Conn : std::enable_shared_from_this<Conn> {
  std::shared_ptr<Impl> srv;
  tcp::socket sock;
  uint64_t id;
  std::string peer;  // its address
  c10d::Dialect dialect = c10d::Dialect::kUnknown;
  std::string in, out, sending;
  bool counted = false, closed = false;

  Conn(std::shared_ptr<Impl> s, tcp::socket so, uint64_t i, std::string p)
      : srv(std::move(s)), sock(std::move(so)), id(i), peer(std::move(p)) {}

  // Waits until the client sent something, then reads what is there.
  void read() {
    sock.async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
      if (self->closed) return;
      if (ec) return self->close();
      const size_t n = self->sock.read_some(asio::buffer(self->srv->scratch), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) return self->read();
      if (ec) return self->close();
      self->in.append(self->srv->scratch.data(), n);
      if (self->handle_all()) self->read();
    });
  }

  // Handles every whole query in `in`; false when the client was refused.
  bool handle_all() {
    size_t at = 0;
    while (true) {
      auto p = c10d::parse(std::string_view(in).substr(at), dialect, srv->opts.limits);
      if (p.status == c10d::Parsed::Status::kRefused) return refuse(p.why), false;
      if (p.status == c10d::Parsed::Status::kNeedMore) break;
      at += p.used;
      count(p.query.op);
      if (auto why = srv->keys.handle(id, p.query, out); !why.empty())
        return refuse("torch's TCPStore client (" + c10d::dialect_name(dialect) + " protocol) was refused: " + why), false;
    }
    in.erase(0, at);
    if (in.size() > kMaxInput) return refuse("a query over " + std::to_string(kMaxInput >> 20) + " MiB"), false;
    srv->wake();
    flush();
    return !closed;
  }

  // A connection counts as a client once it asks something: torch 1.x opens
  // a second, silent connection per rank.
  void count(c10d::Op op) {
    if (counted || op == c10d::Op::kValidate || op == c10d::Op::kPing) return;
    counted = true;
    ++srv->clients[peer];
  }

  void flush() {
    if (closed || out.empty() || !sending.empty()) return;
    if (out.size() > kMaxUnread) return refuse("over " + std::to_string(kMaxUnread >> 20) + " MiB of replies unread");
    sending.swap(out);
    asio::async_write(sock, asio::buffer(sending), [self = shared_from_this()](error_code ec, size_t) {
      self->sending.clear();
      if (ec) return self->close();
      self->flush();
    });
  }

  // Answers what came before the refused query (best effort, never
  // blocking), then closes.
  void refuse(const std::string& why) {
    if (srv->opts.refused) srv->opts.refused(why, peer, srv->keys.is_rank(id));
    if (sending.empty() && !out.empty() && out.size() <= kMaxUnread)
      (void)::send(sock.native_handle(), out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    close();
  }

  void close() {
    if (closed) return;
    closed = true;
    error_code ignored;
    sock.close(ignored);
    srv->keys.forget(id);
    srv->conns.erase(id);
  }
};
}  // namespace

// Torch's client carries no credential: a local peer must be this user's, a
// remote one at an address of the job's hosts.
bool Impl::admitted(tcp::socket& s, std::string& who) {
  error_code ec;
  const auto ep = s.remote_endpoint(ec);
  if (ec) return false;
  who = ep.address().to_string();
  const auto owner = wire::local_peer_owners({s.native_handle()}).at(0);
  if (owner.local) {
    // An owner the kernel does not know (a client that already closed) is
    // nobody's: refused, even in a job of root's.
    if (owner.uid && *owner.uid == ::geteuid()) return true;
    closed_at_accept(who + " of " + (owner.uid ? wire::describe_uid(*owner.uid) : "an unknown user"),
                     "only the job's user may connect");
    return false;
  }
  if (opts.remote_allowed && opts.remote_allowed(who)) return true;
  closed_at_accept(who, "not one of the job's hosts");
  return false;
}

void Impl::closed_at_accept(const std::string& peer, const std::string& why) {
  const auto now = std::chrono::steady_clock::now();
  if (untold.size() > 4096) untold.clear();  // many peers: the counts restart, the lines still come
  Untold& u = untold[peer];
  ++u.count;
  if (now - u.told < std::chrono::seconds(1)) return;
  note("closed " + (u.count == 1 ? std::string("a connection") : std::to_string(u.count) + " connections") +
       " from " + peer + ": " + why);
  u.count = 0, u.told = now;
}

void Impl::accept() {
  acceptor.async_accept([self = shared_from_this()](error_code ec, tcp::socket s) {
    if (self->stopped) return;
    if (ec == asio::error::operation_aborted) return;
    std::string who;
    if (!ec && self->conns.size() >= self->opts.max_connections) {
      self->note("closed a connection: " + std::to_string(self->conns.size()) + " clients are connected, the most");
    } else if (!ec && self->admitted(s, who)) {
      s.set_option(tcp::no_delay(true), ec);
      s.non_blocking(true, ec);
      ::fcntl(s.native_handle(), F_SETFD, FD_CLOEXEC);
      const uint64_t id = ++self->next_id;
      auto c = std::make_shared<Conn>(self, std::move(s), id, who);
      self->conns.emplace(id, c);
      c->read();
    }
    self->accept();
  });
}

// Answers the WAITs the last queries completed.
void Impl::wake() {
  for (uint64_t id : keys.take_woken()) {
    auto it = conns.find(id);
    if (it == conns.end()) continue;
    c10d::put_u8(it->second->out, c10d::kStopWaiting);
    it->second->flush();
  }
}

C10dStore::C10dStore(asio::io_context& io, Options opts) : impl_(std::make_shared<Impl>(io, std::move(opts))) {
  const std::string where = impl_->opts.bind_host + ":" + std::to_string(impl_->opts.port);
  try {
    tcp::endpoint ep(asio::ip::make_address(impl_->opts.bind_host), impl_->opts.port);
    impl_->acceptor.open(ep.protocol());
    // Not inherited by the processes the launcher starts (its local agent and ranks).
    ::fcntl(impl_->acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
    impl_->acceptor.bind(ep);
    impl_->acceptor.listen(asio::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    throw IoError("torch's c10d store cannot listen on " + where + ": " + e.code().message());
  }
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->accept();
}

C10dStore::~C10dStore() { stop(); }

void C10dStore::clear() {
  impl_->keys.clear();
  impl_->clients.clear();
  for (auto& [id, c] : impl_->conns) c->counted = false;
}

C10dStore::Seen C10dStore::seen() const {
  return Seen{impl_->clients, impl_->keys.ranks, impl_->keys.registered, impl_->keys.barrier, impl_->keys.at_barrier};
}

void C10dStore::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  error_code ignored;
  impl_->acceptor.close(ignored);
  auto all = impl_->conns;
  for (auto& [id, c] : all) c->close();
}

}  // namespace dl::rdzv
