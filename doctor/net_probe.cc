#include "doctor/net_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "doctor/records.h"
#include "errors/error.h"
#include "wire/handshake.h"
#include "wire/record.h"
#include "wire/socket.h"

namespace dl::doctor {

namespace {
[[noreturn]] void raise_remote(const std::string& what) { throw RemoteError(what); }

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;
constexpr Millis kIdle{60000};

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A bounded send buffer: on a slow link the queued bytes drain in well
// under a second, so a bandwidth test ends soon after its time is up.
void bound_send_buffer(int fd) {
  int sz = 1 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
}

// Streams kChunk frames for `seconds`, and at least kMinStreamFrames of
// them, then an "end" frame. The receiver times the frames after its first
// (sink, Listener::serve): a stream cut by the clock after one frame (a
// sender that lost the CPU for `seconds` right after its first write, as a
// loaded machine's peers often do) measured nothing, and read as 0 B/s.
void stream(const wire::Socket& s, double seconds, const std::string& peer) {
  static const std::string chunk(kChunk, 'd');
  bound_send_buffer(s.fd());
  const auto start = Clock::now();
  for (size_t sent = 0; sent < kMinStreamFrames || since(start) < seconds; ++sent) wire::write_frame(s, wire::kData, chunk, peer);
  wire::write_frame(s, wire::kJson, R"({"op":"end"})", peer);
}

// Reads a stream until its "end" frame: bytes per second from the first
// data frame to the end.
double sink(const wire::Socket& s, Millis timeout, const std::string& peer) {
  size_t bytes = 0;
  Clock::time_point first{};
  for (;;) {
    wire::Frame f = wire::read_frame(s, kMaxFrame, timeout, peer);
    if (f.type == wire::kJson) break;
    if (f.type != wire::kData) throw RemoteError(peer + ": unexpected frame type " + std::to_string(f.type) + " in a stream");
    if (first == Clock::time_point{}) first = Clock::now();
    else bytes += f.payload.size();  // the first frame starts the clock
  }
  const double t = first == Clock::time_point{} ? 0 : since(first);
  return t > 0 ? bytes / t : 0;
}

std::string numeric(const sockaddr* sa) {
  char buf[NI_MAXHOST];
  socklen_t len = sa->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  return ::getnameinfo(sa, len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) == 0 ? buf : "";
}

std::string host_port(const Endpoint& e) {
  return (e.addr.find(':') != std::string::npos ? "[" + e.addr + "]" : e.addr) + ":" + std::to_string(e.port);
}

// connect_tcp from the IPv4 address `from` ("" : the kernel's choice of
// source), one attempt within `timeout`.
wire::Socket connect_from(const Endpoint& e, Millis timeout, const std::string& from) {
  if (from.empty()) return wire::connect_tcp(e.addr, e.port, timeout);
  const std::string hp = host_port(e);
  sockaddr_in src{}, dst{};
  src.sin_family = dst.sin_family = AF_INET;
  dst.sin_port = htons(e.port);
  if (::inet_pton(AF_INET, from.c_str(), &src.sin_addr) != 1 || ::inet_pton(AF_INET, e.addr.c_str(), &dst.sin_addr) != 1)
    throw IoError("could not connect to " + hp + " from " + from + ": not IPv4 addresses");
  wire::Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid() || ::bind(s.fd(), reinterpret_cast<sockaddr*>(&src), sizeof src) != 0)
    throw_errno("binding a connection to " + hp + " to " + from);
  if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0 && errno != EINPROGRESS)
    throw_errno("could not connect to " + hp);
  pollfd p{s.fd(), POLLOUT, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1)
    throw TimeoutError("could not connect to " + hp + " within " + std::to_string(timeout.count()) + " ms");
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err) throw IoError("could not connect to " + hp + ": " + std::strerror(err));
  ::fcntl(s.fd(), F_SETFL, ::fcntl(s.fd(), F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}
}  // namespace

std::vector<Endpoint> local_addresses() {
  std::vector<Endpoint> out;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    const int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr)) continue;
    std::string a = numeric(i->ifa_addr);
    if (!a.empty()) out.push_back({i->ifa_name, a, 0});
  }
  ::freeifaddrs(ifs);
  return out;
}

Listener::Listener(std::string token, std::string name, const std::vector<Endpoint>& only)
    : token_(std::move(token)), name_(std::move(name)) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) throw_errno("creating the listener's wake pipe");
  for (Endpoint e : only.empty() ? local_addresses() : only) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
    hints.ai_socktype = SOCK_STREAM;
    if (::getaddrinfo(e.addr.c_str(), "0", &hints, &res) != 0) continue;
    int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd >= 0 && ::bind(fd, res->ai_addr, res->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      e.port = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                             : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
      listen_fds_.push_back(fd);
      endpoints_.push_back(e);
    } else if (fd >= 0) {
      ::close(fd);
    }
    ::freeaddrinfo(res);
  }
  acceptor_ = std::thread([this] { accept_loop(); });
}

Listener::~Listener() {
  (void)!::write(wake_[1], "x", 1);
  acceptor_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& s : sessions_)
      if (!s.done) ::shutdown(s.fd, SHUT_RDWR);
  }
  for (auto& s : sessions_) s.thread.join();
  for (int fd : listen_fds_) ::close(fd);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

size_t Listener::sessions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

void Listener::accept_loop() {
  std::vector<pollfd> p{{wake_[0], POLLIN, 0}};
  for (int fd : listen_fds_) p.push_back({fd, POLLIN, 0});
  for (;;) {
    if (::poll(p.data(), p.size(), static_cast<int>(kReapEvery.count())) < 0 && errno != EINTR) return;
    if (p[0].revents) return;
    reap();
    for (size_t i = 1; i < p.size(); ++i) {
      if (!(p[i].revents & POLLIN)) continue;
      int fd = ::accept4(p[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) admit(fd);
    }
  }
}

// A new connection's session, after the oldest one still in its handshake
// was shut down if kMaxPendingHandshakes wait already.
void Listener::admit(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::lock_guard<std::mutex> lock(mu_);
  size_t pending = 0;
  Session* oldest = nullptr;
  for (auto& s : sessions_)
    if (!s.greeted && !s.dropped && !s.done && pending++ == 0) oldest = &s;
  if (pending >= kMaxPendingHandshakes) {
    oldest->dropped = true;
    ::shutdown(oldest->fd, SHUT_RDWR);  // its handshake read ends at once
  }
  Session& s = sessions_.emplace_back();
  s.fd = fd;
  try {
    s.thread = std::thread([this, &s] { serve(s); });
  } catch (const std::system_error&) {  // no thread to be had (RLIMIT_NPROC): this connection is refused
    sessions_.pop_back();
    ::close(fd);
  }
}

// Joins the threads of the sessions that are over.
void Listener::reap() {
  std::list<Session> over;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      auto next = std::next(it);
      if (it->done) over.splice(over.end(), sessions_, it);
      it = next;
    }
  }
  for (auto& s : over) s.thread.join();
}

void Listener::serve(Session& session) {
  wire::Socket s(session.fd);
  // `done` is set on every way out, before `s` closes the descriptor: no
  // shutdown() of another thread's can reach the number once it is reused.
  struct Over {
    Listener& l;
    Session& s;
    ~Over() {
      std::lock_guard<std::mutex> lock(l.mu_);
      s.done = true;
    }
  } over{*this, session};
  const std::string peer = "a doctor peer";
  try {
    wire::server_handshake(s, token_, kDoctorTag, peer, kHandshakeDeadline);
    {
      std::lock_guard<std::mutex> lock(mu_);
      session.greeted = true;
    }
    for (;;) {
      wire::Frame f = wire::read_frame(s, kMaxFrame, kIdle, peer);
      if (f.type == kPing) {
        wire::write_frame(s, kPong, f.payload, peer);
      } else if (f.type == wire::kData) {
        // A stream from the peer: the first frame is here; time the rest.
        const auto first = Clock::now();
        size_t bytes = 0;
        for (;;) {
          wire::Frame g = wire::read_frame(s, kMaxFrame, kIdle, peer);
          if (g.type != wire::kData) break;
          bytes += g.payload.size();
        }
        const double t = since(first);
        wire::write_frame(s, wire::kJson, wire::encode_record(RateReply{t > 0 ? bytes / t : 0}), peer);
      } else if (f.type == wire::kJson) {
        const auto req = wire::decode_record<PeerOp>(f.payload, {peer + "'s request"});
        if (req.op == "who") wire::write_frame(s, wire::kJson, wire::encode_record(WhoReply{name_}), peer);
        else if (req.op == "send") stream(s, req.seconds.value_or(0.25), peer);
        else return;
      }
    }
  } catch (const std::exception&) {
    // The peer hung up or failed the handshake: this session is over.
  }
}

std::string probe(const Endpoint& e, const std::string& expected, const std::string& token, Millis timeout,
                  const std::string& from) {
  const std::string hp = host_port(e);
  try {
    wire::Socket s = connect_from(e, timeout, from);
    wire::client_handshake(s, token, kDoctorTag, hp, timeout);
    wire::write_frame(s, wire::kJson, wire::encode_record(PeerOp{"who", std::nullopt}), hp);
    wire::Frame f = wire::read_frame(s, kMaxFrame, timeout, hp);
    std::string name;
    try {
      name = wire::decode_record<WhoReply>(f.payload, {hp + "'s answer"}).name;
    } catch (const wire::RecordError&) {
    }
    if (name != expected) return hp + " is answered by " + (name.empty() ? "something else" : name) + ", not " + expected;
    return "";
  } catch (const std::exception& ex) {
    return ex.what();
  }
}

LinkResult link_test(const Endpoint& e, const std::string& token, double seconds, int pings, Millis timeout,
                     const std::string& from) {
  const std::string hp = host_port(e);
  wire::Socket s = connect_from(e, timeout, from);
  wire::client_handshake(s, token, kDoctorTag, hp, timeout);
  LinkResult r;
  // The fastest round trip: scheduling delays on a busy host only add to a
  // round trip, while a slow link slows every one of them.
  for (int i = 0; i < pings; ++i) {
    const auto t0 = Clock::now();
    wire::write_frame(s, kPing, "p", hp);
    if (wire::read_frame(s, kMaxFrame, timeout, hp).type != kPong) throw RemoteError(hp + ": no pong");
    const double us = since(t0) * 1e6;
    r.latency_us = i == 0 ? us : std::min(r.latency_us, us);
  }
  if (seconds <= 0) return r;
  stream(s, seconds, hp);
  r.out_Bps = wire::decode_record<RateReply>(wire::read_frame(s, kMaxFrame, Millis(60000), hp).payload,
                                             {hp + "'s measured rate", &raise_remote})
                  .Bps;
  wire::write_frame(s, wire::kJson, wire::encode_record(PeerOp{"send", seconds}), hp);
  r.in_Bps = sink(s, Millis(60000), hp);
  return r;
}

}  // namespace dl::doctor
