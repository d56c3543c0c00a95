#pragma once
// Many real store clients in one thread: a connect storm, a barrier and an
// all-gather driven over epoll, up to a few thousand connections per
// process, for bench/store-scale and for the storm test of
// tests/rendezvous. Two protocols:
//   - dlaunch: the store protocol (rendezvous/store_protocol.h) after the
//     token handshake; a refused, reset or unanswered try is tried again
//     with the TcpStore client's pauses and waits (wire/client_retry.h).
//     Barrier and all-gather are one request each. Through hosts' doors
//     (door_dir), the same protocol over AF_UNIX.
//   - torch: torch 1.13's TCPStore wire protocol (no handshake; two
//     connections per client, as its TCPStore opens a callback connection
//     beside the main one). A refused or reset connect is tried again after
//     1 s, as its client does. Barrier: add(key, 1), the last sets
//     "<key>/go", all wait for it. All-gather: set "<prefix>/<rank>", the
//     same barrier, then one get per rank, one at a time (torch elastic's
//     get_all).
// Each rank's value is value_of(rank): what every all-gather checks it got.
//
// Thread-safety: none; one Storm per thread.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dl::bench {

using Millis = std::chrono::milliseconds;

enum class StormMode { kDlaunch, kTorch };

struct StormOptions {
  StormMode mode = StormMode::kDlaunch;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string token;  // dlaunch mode
  int first_rank = 0, clients = 0, world = 0;  // this storm's ranks [first_rank, first_rank + clients) of world
  // Loopback source addresses, one per kRanksPerSource ranks (by rank): one
  // address has only ~28k ephemeral ports toward one server port.
  bool spread_sources = false;
  Millis connect_timeout{60000};  // per client, all tries together
  Millis op_timeout{60000};       // per barrier or all-gather
  size_t value_size = 64;
  // dlaunch mode through hosts' store doors (rendezvous/host/host_store.h): when
  // set, rank r connects to the AF_UNIX socket door_path(door_dir, r / ranks_per_door)
  // instead of host:port.
  std::string door_dir;
  int ranks_per_door = 8;
};

// The door of simulated host h under dir.
inline std::string door_path(const std::string& dir, int h) { return dir + "/host-" + std::to_string(h) + ".sock"; }

inline constexpr int kRanksPerSource = 12000;

struct PhaseResult {
  int failed = 0;
  double last_done = 0;     // CLOCK_MONOTONIC seconds when the last client finished
  std::string first_error;  // of the first client that failed, "" when none
  int retries = 0;          // connect: tries after the first, all clients together
};

// Rank r's all-gather value: `size` bytes that differ per rank.
std::string value_of(int rank, size_t size);

class Storm {
 public:
  explicit Storm(StormOptions o);
  ~Storm();
  Storm(const Storm&) = delete;
  Storm& operator=(const Storm&) = delete;

  // Every client connects (and passes the handshake); returns at once for
  // those connected already. Then a barrier at `key` of all world ranks, and
  // an all-gather under `prefix`; each waits for every client of this storm.
  PhaseResult connect();
  PhaseResult barrier(const std::string& key);
  PhaseResult all_gather(const std::string& prefix);
  // Connections this storm holds open.
  int open_connections() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dl::bench
