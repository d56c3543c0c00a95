#include "bench/store-scale/storm.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <queue>
#include <stdexcept>

#include "errors/error.h"
#include "rendezvous/store_protocol.h"
#include "wire/client_retry.h"
#include "wire/coding.h"
#include "wire/frame.h"
#include "wire/handshake.h"

namespace dl::bench {

namespace proto = dl::rdzv::proto;
using Clock = std::chrono::steady_clock;

std::string value_of(int rank, size_t size) {
  std::string v(size, '\0');
  for (size_t i = 0; i < size; ++i) v[i] = static_cast<char>('a' + (static_cast<size_t>(rank) * 7 + i) % 26);
  const std::string tag = std::to_string(rank) + ":";
  v.replace(0, std::min(tag.size(), size), tag.substr(0, size));
  return v;
}

namespace {

double monotonic(Clock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); }

// Every kVerifyEvery'th rank checks every value of an all-gather; the others
// check the reply's size and status and let the bytes go as they come (a
// thousand clients keeping 8,192 x 68 bytes each would be the bench's
// memory, not the store's).
constexpr int kVerifyEvery = 32;
// torch 1.13's client pauses this long before trying a refused connect again.
constexpr Millis kTorchRetryPause{1000};
// torch 1.13's QueryType and the reply of a finished wait.
enum TorchQuery : uint8_t { kTSet = 0, kTGet = 2, kTAdd = 3, kTWait = 5 };

enum class St { kIdle, kConnecting, kCallback, kHandshake, kReady, kWaiting, kFailed };

struct Client {
  int rank = 0;
  int fd = -1, fd2 = -1;  // fd2: torch's callback connection
  St st = St::kIdle;
  int tries = 0;
  Clock::time_point conn_deadline{}, due{};
  std::unique_ptr<wire::ClientHandshake> hs;
  std::string in;             // bytes of the reply being read
  uint64_t frame_left = 0;    // an all-gather reply's bytes still to come, when not kept
  int step = 0, next_get = 0;  // torch: where in the phase's exchange
  std::string error;
};

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }  // torch: host order
void put_tstr(std::string& out, const std::string& s) { put_u64(out, s.size()), out += s; }

}  // namespace

struct Storm::Impl {
  StormOptions o;
  int ep = -1;
  std::vector<Client> cs;
  sockaddr_in server{};
  using Timer = std::pair<Clock::time_point, int>;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers;
  int pending = 0;
  PhaseResult result;
  enum class Phase { kConnect, kBarrier, kGather } phase = Phase::kConnect;
  std::string key;  // the phase's barrier key or all-gather prefix
  std::string barrier_request;  // a dlaunch barrier's bytes, the same for every client: made once per phase
  std::vector<char> scratch = std::vector<char>(1 << 18);

  explicit Impl(StormOptions opt) : o(std::move(opt)) {
    ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) throw std::runtime_error("epoll_create1: " + std::string(std::strerror(errno)));
    server.sin_family = AF_INET;
    server.sin_port = htons(o.port);
    if (::inet_pton(AF_INET, o.host.c_str(), &server.sin_addr) != 1) throw std::runtime_error("bad host " + o.host);
    cs.resize(static_cast<size_t>(o.clients));
    for (int i = 0; i < o.clients; ++i) cs[i].rank = o.first_rank + i;
  }
  ~Impl() {
    for (auto& c : cs) close_client(c);
    ::close(ep);
  }

  bool torch() const { return o.mode == StormMode::kTorch; }
  void close_fd(int& fd) {
    if (fd >= 0) ::close(fd), fd = -1;
  }
  void close_client(Client& c) { close_fd(c.fd), close_fd(c.fd2); }
  void arm(Client& c, Clock::time_point at) {
    c.due = at;
    timers.emplace(at, static_cast<int>(&c - cs.data()));
  }
  void watch(int fd, uint32_t events, size_t idx, bool second, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = (static_cast<uint64_t>(idx) << 1) | (second ? 1 : 0);
    ::epoll_ctl(ep, op, fd, &ev);
  }

  // A finished client of the phase: counted, stamped.
  void finish(Client& c, bool ok, const std::string& why = {}) {
    c.st = ok ? St::kReady : St::kFailed;
    c.due = {};  // its timer, if any, is stale now
    if (!ok) {
      close_client(c);
      if (result.failed++ == 0) result.first_error = "rank " + std::to_string(c.rank) + ": " + why;
    }
    result.last_done = monotonic(Clock::now());
    --pending;
  }

  // ---- connect ----
  int open_door_socket(const Client& c) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const std::string path = door_path(o.door_dir, c.rank / o.ranks_per_door);
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS)
      return ::close(fd), -1;
    return fd;
  }

  int open_socket(const Client& c) {
    if (!o.door_dir.empty()) return open_door_socket(c);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (o.spread_sources) {
      ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
      sockaddr_in src{};
      src.sin_family = AF_INET;
      src.sin_addr.s_addr = htonl(0x7f000001u + static_cast<uint32_t>(c.rank / kRanksPerSource));
      if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) return ::close(fd), -1;
    }
    if (::connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server) != 0 && errno != EINPROGRESS)
      return ::close(fd), -1;
    return fd;
  }

  void start_connect(Client& c) {
    const auto now = Clock::now();
    if (c.tries == 0) c.conn_deadline = now + o.connect_timeout;
    ++c.tries;
    c.in.clear();
    c.fd = open_socket(c);
    if (c.fd < 0) return retry(c, std::string("connect: ") + std::strerror(errno));
    watch(c.fd, EPOLLOUT | EPOLLIN, &c - cs.data(), false, EPOLL_CTL_ADD);
    c.st = St::kConnecting;
    // As wire::retry_until: each try waits longer for its connect, then for
    // the handshake answer. torch's client waits out the kernel's SYN tries.
    if (torch()) return arm(c, c.conn_deadline);
    arm(c, now + budget(c).connect_wait);
  }

  wire::Try budget(const Client& c) const {
    return wire::try_budget(c.tries, std::chrono::duration_cast<Millis>(c.conn_deadline - Clock::now()));
  }

  void retry(Client& c, const std::string& why) {
    close_client(c);
    ++result.retries;
    c.error = why;
    const auto pause = torch() ? kTorchRetryPause : wire::retry_pause(c.tries);
    const auto at = Clock::now() + pause;
    if (at >= c.conn_deadline)
      return finish(c, false, "no connection within " + std::to_string(o.connect_timeout.count()) + " ms (" +
                                  std::to_string(c.tries) + " tries; the last: " + why + ")");
    c.st = St::kIdle;
    arm(c, at);
  }

  static int socket_error(int fd) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    return err;
  }

  void on_connected(Client& c) {
    if (const int err = socket_error(c.fd)) return retry(c, std::string("connect: ") + std::strerror(err));
    watch(c.fd, EPOLLIN, &c - cs.data(), false, EPOLL_CTL_MOD);
    if (torch()) {
      c.fd2 = open_socket(c);
      if (c.fd2 < 0) return retry(c, std::string("connect (callback): ") + std::strerror(errno));
      watch(c.fd2, EPOLLOUT, &c - cs.data(), true, EPOLL_CTL_ADD);
      c.st = St::kCallback;
      return;
    }
    c.hs = std::make_unique<wire::ClientHandshake>(o.token, proto::kStoreTag, "the store");
    std::string hello;
    wire::append_frame(hello, wire::kHandshake, c.hs->hello());
    if (!send_all(c.fd, hello)) return retry(c, std::string("sending the hello: ") + std::strerror(errno));
    c.st = St::kHandshake;
    arm(c, Clock::now() + budget(c).wait);
  }

  void on_callback_connected(Client& c) {
    if (const int err = socket_error(c.fd2)) return retry(c, std::string("connect (callback): ") + std::strerror(err));
    ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd2, nullptr);
    finish(c, true);
  }

  // A whole dlaunch frame at the front of c.in, or false.
  static bool take_frame(Client& c, wire::Frame& f) {
    if (c.in.size() < wire::kHeaderSize) return false;
    const auto h = wire::decode_frame_header(c.in.data());
    if (c.in.size() < wire::kHeaderSize + h.length) return false;
    f = {h.type, c.in.substr(wire::kHeaderSize, h.length)};
    c.in.erase(0, wire::kHeaderSize + h.length);
    return true;
  }

  void on_handshake_bytes(Client& c) {
    wire::Frame f;
    if (!take_frame(c, f)) return;
    if (f.type == wire::kErrorText) return retry(c, "refused: " + f.payload);
    std::string proof;
    try {
      proof = c.hs->finish(f);
    } catch (const Error& e) {
      return finish(c, false, e.what());  // not our server: no retry
    }
    std::string out;
    wire::append_frame(out, wire::kHandshake, proof);
    if (!send_all(c.fd, out)) return retry(c, std::string("sending the proof: ") + std::strerror(errno));
    c.hs.reset();
    finish(c, true);
  }

  // ---- requests ----
  bool send_all(int fd, std::string_view b) {
    while (!b.empty()) {
      const ssize_t n = ::send(fd, b.data(), b.size(), MSG_NOSIGNAL);
      if (n > 0) {
        b.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 1000);
        continue;
      }
      return false;
    }
    return true;
  }

  std::string dlaunch_request(const Client& c) {
    proto::Request r{phase == Phase::kBarrier ? proto::Op::kBarrier : proto::Op::kAllGather, {key}, {}, {},
                     o.op_timeout.count()};
    r.count = o.world;
    if (phase == Phase::kGather) r.rank = c.rank, r.value = value_of(c.rank, o.value_size);
    std::string out;
    wire::append_frame(out, proto::kRequest, proto::encode(r));
    return out;
  }

  static std::string torch_add(const std::string& k) {
    std::string out(1, static_cast<char>(kTAdd));
    put_tstr(out, k);
    put_u64(out, 1);
    return out;
  }
  static std::string torch_set(const std::string& k, const std::string& v) {
    std::string out(1, static_cast<char>(kTSet));
    put_tstr(out, k), put_tstr(out, v);
    return out;
  }
  static std::string torch_wait(const std::string& k) {
    std::string out(1, static_cast<char>(kTWait));
    put_u64(out, 1), put_tstr(out, k);
    return out;
  }
  static std::string torch_get(const std::string& k) {
    std::string out(1, static_cast<char>(kTGet));
    put_tstr(out, k);
    return out;
  }

  void start_op(Client& c) {
    c.in.clear(), c.step = 0, c.next_get = 0, c.frame_left = 0;
    std::string req;
    if (!torch() && phase == Phase::kBarrier) return send_request(c, barrier_request);
    if (!torch()) req = dlaunch_request(c);
    else if (phase == Phase::kBarrier) req = torch_add(key);
    else req = torch_set(key + "/" + std::to_string(c.rank), value_of(c.rank, o.value_size)) + torch_add(key);
    send_request(c, req);
  }

  void send_request(Client& c, std::string_view req) {
    c.st = St::kWaiting;
    ++pending;
    arm(c, Clock::now() + o.op_timeout + Millis(10000));
    if (!send_all(c.fd, req)) finish(c, false, std::string("sending: ") + std::strerror(errno));
  }

  // dlaunch: the one reply of a barrier or all-gather.
  void on_dlaunch_bytes(Client& c) {
    const bool keep = phase != Phase::kGather || c.rank % kVerifyEvery == 0;
    if (!keep && c.frame_left > 0) {
      const uint64_t used = std::min<uint64_t>(c.frame_left, c.in.size());
      c.frame_left -= used, c.in.erase(0, used);
      if (c.frame_left == 0 && c.in.empty()) finish(c, true);
      return;
    }
    if (c.in.size() < wire::kHeaderSize + 1) return;
    const auto h = wire::decode_frame_header(c.in.data());
    if (h.type != proto::kReply || c.in[wire::kHeaderSize] != static_cast<char>(proto::Status::kOk)) {
      wire::Frame f;
      if (!take_frame(c, f)) return;
      return finish(c, false, "the store answered: " + f.payload.substr(0, 300));
    }
    if (!keep) {
      const uint64_t want = proto::values_list_size(o.world, o.world * o.value_size) + 1;
      if (h.length != want) return finish(c, false, "an all-gather reply of " + std::to_string(h.length) + " bytes");
      c.frame_left = wire::kHeaderSize + h.length;
      return on_dlaunch_bytes(c);
    }
    wire::Frame f;
    if (!take_frame(c, f)) return;
    if (phase == Phase::kBarrier) return finish(c, true);
    check_values(c, proto::decode_values(proto::decode_reply(f.payload, proto::Op::kAllGather).value));
  }

  void check_values(Client& c, const std::vector<std::string>& values) {
    if (values.size() != static_cast<size_t>(o.world))
      return finish(c, false, "all-gather gave " + std::to_string(values.size()) + " values");
    for (int r = 0; r < o.world; ++r)
      if (values[r] != value_of(r, o.value_size)) return finish(c, false, "wrong value of rank " + std::to_string(r));
    finish(c, true);
  }

  // torch: add's i64, wait's u8, get's u64 length + bytes, in the phase's order.
  void on_torch_bytes(Client& c) {
    for (;;) {
      if (c.step == 0) {  // add
        if (c.in.size() < 8) return;
        int64_t v;
        std::memcpy(&v, c.in.data(), 8);
        c.in.erase(0, 8);
        const std::string go = key + "/go";
        std::string next = v == o.world ? torch_set(go, "1") : std::string();
        next += torch_wait(go);
        c.step = 1;
        if (!send_all(c.fd, next)) return finish(c, false, "sending the wait");
      } else if (c.step == 1) {  // wait
        if (c.in.empty()) return;
        c.in.erase(0, 1);
        if (phase == Phase::kBarrier) return finish(c, true);
        c.step = 2;
        if (!send_all(c.fd, torch_get(key + "/0"))) return finish(c, false, "sending a get");
      } else {  // get, one rank at a time
        if (c.in.size() < 8) return;
        uint64_t len;
        std::memcpy(&len, c.in.data(), 8);
        if (c.in.size() < 8 + len) return;
        const bool ok = c.rank % kVerifyEvery != 0 ? len == o.value_size
                                                   : c.in.compare(8, len, value_of(c.next_get, o.value_size)) == 0;
        c.in.erase(0, 8 + len);
        if (!ok) return finish(c, false, "wrong value of rank " + std::to_string(c.next_get));
        if (++c.next_get == o.world) return finish(c, true);
        if (!send_all(c.fd, torch_get(key + "/" + std::to_string(c.next_get)))) return finish(c, false, "sending a get");
      }
    }
  }

  // ---- the loop ----
  void on_event(size_t idx, bool second) {
    Client& c = cs[idx];
    if (second) {
      if (c.st == St::kCallback) on_callback_connected(c);
      return;
    }
    if (c.st == St::kConnecting) return on_connected(c);
    if (c.st != St::kHandshake && c.st != St::kWaiting) return;
    for (;;) {
      const ssize_t n = ::recv(c.fd, scratch.data(), scratch.size(), 0);
      if (n > 0) {
        size_t skip = 0;
        if (c.frame_left > 0 && c.in.empty()) {  // the body of a reply not kept: let it go as it comes
          skip = static_cast<size_t>(std::min<uint64_t>(c.frame_left, static_cast<uint64_t>(n)));
          c.frame_left -= skip;
          if (c.frame_left == 0 && skip == static_cast<size_t>(n)) finish(c, true);
        }
        c.in.append(scratch.data() + skip, static_cast<size_t>(n) - skip);
        if (c.in.empty()) {
          if (c.st != St::kWaiting || static_cast<size_t>(n) < scratch.size()) return;
          continue;
        }
        if (c.st == St::kHandshake) on_handshake_bytes(c);
        else if (torch()) on_torch_bytes(c);
        else on_dlaunch_bytes(c);
        if (c.st != St::kHandshake && c.st != St::kWaiting) return;
        if (static_cast<size_t>(n) < scratch.size()) return;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      const std::string why = n == 0 ? "the store closed the connection" : std::strerror(errno);
      if (c.st == St::kHandshake) return retry(c, why);
      return finish(c, false, why);
    }
  }

  void on_timer(Client& c) {
    switch (c.st) {
      case St::kIdle: return start_connect(c);
      case St::kConnecting:
      case St::kCallback:
      case St::kHandshake: return retry(c, "no answer in time");
      case St::kWaiting: return finish(c, false, "no reply within the timeout");
      default: return;
    }
  }

  void run() {
    epoll_event evs[256];
    while (pending > 0) {
      int wait_ms = 1000;
      while (!timers.empty()) {
        auto [at, idx] = timers.top();
        if (cs[idx].due != at) {  // superseded
          timers.pop();
          continue;
        }
        const auto left = std::chrono::duration_cast<Millis>(at - Clock::now()).count();
        if (left > 0) {
          wait_ms = static_cast<int>(std::min<int64_t>(left, 1000));
          break;
        }
        timers.pop();
        cs[idx].due = {};
        on_timer(cs[idx]);
      }
      if (pending == 0) break;
      const int n = ::epoll_wait(ep, evs, 256, wait_ms);
      for (int i = 0; i < n; ++i)
        on_event(static_cast<size_t>(evs[i].data.u64 >> 1), (evs[i].data.u64 & 1) != 0);
    }
  }

  PhaseResult go(Phase p, const std::string& k) {
    phase = p, key = k, result = {}, pending = 0;
    if (!torch() && p == Phase::kBarrier && !cs.empty()) barrier_request = dlaunch_request(cs[0]);
    for (auto& c : cs) {
      if (p == Phase::kConnect && c.st == St::kIdle && c.tries == 0) ++pending, start_connect(c);
      else if (p != Phase::kConnect && c.st == St::kReady) start_op(c);
    }
    run();
    return result;
  }
};

Storm::Storm(StormOptions o) : impl_(std::make_unique<Impl>(std::move(o))) {}
Storm::~Storm() = default;
PhaseResult Storm::connect() { return impl_->go(Impl::Phase::kConnect, ""); }
PhaseResult Storm::barrier(const std::string& key) { return impl_->go(Impl::Phase::kBarrier, key); }
PhaseResult Storm::all_gather(const std::string& prefix) { return impl_->go(Impl::Phase::kGather, prefix); }
int Storm::open_connections() const {
  int n = 0;
  for (const auto& c : impl_->cs) n += (c.fd >= 0) + (c.fd2 >= 0);
  return n;
}

}  // namespace dl::bench
