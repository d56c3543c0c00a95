#pragma once
// The peers' data-plane tests (stages 4 and 5). Every host listens on port 0
// on each of its addresses; every other host connects to each of them (the
// job-token handshake, protocol tag "doctor/1", then "who are you"), which
// tells which interfaces really carry traffic between hosts. Then pairs
// measure latency (ping-pong of tiny frames) and bandwidth (a stream of 256
// KiB frames for a set time, each way). Frames: wire/frame.h; the extra
// types are below. docs/doctor.md describes the exchange.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dl::doctor {

inline constexpr const char* kDoctorTag = "doctor/1";
inline constexpr uint8_t kPing = 16, kPong = 17;  // wire frame types of this protocol
inline constexpr size_t kChunk = 256 << 10;       // bandwidth frames
inline constexpr size_t kMaxFrame = kChunk + 64;
// A stream is at least this many frames however short its time: the rate is
// timed over all but the first (1 MiB: 0.4 s at 20 Mbit/s).
inline constexpr size_t kMinStreamFrames = 4;

struct Endpoint {
  std::string ifname;  // "eth0"
  std::string addr;    // numeric
  uint16_t port = 0;
};

// This host's interface addresses that other hosts might reach: up, not
// loopback, not IPv6 link-local.
std::vector<Endpoint> local_addresses();

// A connection must finish the job-token handshake within this.
inline constexpr std::chrono::milliseconds kHandshakeDeadline{2000};
// At most this many connections wait in the handshake at once: one more
// closes the oldest that waits, so silent connections hold a bounded number
// of threads, and a real peer, whose handshake takes a round trip, gets in.
inline constexpr size_t kMaxPendingHandshakes = 64;

// Listens on every local address, serves each connection on its own thread
// until the peer hangs up (60 s without a frame ends it too). Connections
// that fail the handshake, or miss its deadline, are closed; the threads of
// ended sessions are joined within kReapEvery. Destruction stops and joins
// all. Thread-safe.
class Listener {
 public:
  static constexpr std::chrono::milliseconds kReapEvery{250};

  // `name` is what "who" answers: the host as the doctor's hostfile names it.
  // `only`: listen on these addresses (their port ignored) instead of every
  // local address (the test bed's simulated host: its own loopback address).
  Listener(std::string token, std::string name, const std::vector<Endpoint>& only = {});
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  const std::vector<Endpoint>& endpoints() const { return endpoints_; }
  // Sessions whose threads are not joined yet (for tests).
  size_t sessions() const;

 private:
  struct Session {
    int fd = -1;
    std::thread thread;
    bool greeted = false;  // past the handshake
    bool dropped = false;  // shut down to make room for a newer connection
    bool done = false;     // serve() is over: the thread can be joined
  };
  void accept_loop();
  void admit(int fd);
  void reap();
  void serve(Session& s);
  std::string token_, name_;
  std::vector<Endpoint> endpoints_;
  std::vector<int> listen_fds_;
  int wake_[2] = {-1, -1};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::list<Session> sessions_;  // guarded by mu_; in the order they came
};

// Connects to `e` (from the local address `from`, when not "": a
// simulated host's own), runs the handshake and asks who answers. Returns ""
// when `expected` answered, else one line saying what failed (naming addr:port).
std::string probe(const Endpoint& e, const std::string& expected, const std::string& token,
                  std::chrono::milliseconds timeout, const std::string& from = "");

struct LinkResult {
  double latency_us = 0;  // the fastest of `pings` round trips of a tiny frame
  double out_Bps = 0;     // this host -> the other, bytes per second
  double in_Bps = 0;      // the other -> this host
};

// Measures the link to `e`: `pings` round trips (none: latency 0), then
// `seconds` of streaming each way, kMinStreamFrames frames at least (0
// seconds: no bandwidth test); from `from` as probe() connects. Throws
// dl::Error naming addr:port on failure.
LinkResult link_test(const Endpoint& e, const std::string& token, double seconds, int pings,
                     std::chrono::milliseconds timeout, const std::string& from = "");

}  // namespace dl::doctor
