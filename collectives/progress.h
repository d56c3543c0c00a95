#pragma once
// The progress engine: moves a set of sends and receives over Pairs at once,
// in any mix of transports, until all complete or the deadline passes.
// Running sends and receives together is what keeps rings and all-to-all
// from deadlocking on full socket buffers.
#include <chrono>
#include <functional>
#include <span>
#include <string>

#include "collectives/pair.h"

namespace dl::coll {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

struct Transfer {
  Pair* pair = nullptr;
  char* buf = nullptr;  // read from (send) or written to (recv)
  size_t n = 0;
  bool send = false;
  // Receives only: called with [from, to) byte ranges as they complete, in
  // order, at least every `notify_bytes` bytes and at the end; lets callers
  // reduce while the rest is still in flight.
  std::function<void(size_t from, size_t to)> on_recv;
  size_t notify_bytes = 256 << 10;
  // Receives only, with on_recv: when not 0, buf holds only `window` bytes
  // and byte k of the stream lands at buf[k % window]. Receives stop at each
  // window boundary and on_recv runs there, before the window is refilled,
  // so it must consume buf[from % window, ...) at once (notify_bytes is
  // ignored). Keeps a large incoming stream in a cache-sized buffer.
  size_t window = 0;
  size_t done = 0, notified = 0;

  static Transfer sending(Pair& p, const void* buf, size_t n) {
    return Transfer{&p, static_cast<char*>(const_cast<void*>(buf)), n, true, {}};
  }
  static Transfer receiving(Pair& p, void* buf, size_t n) {
    return Transfer{&p, static_cast<char*>(buf), n, false, {}};
  }
};

// How long to wait actively on spinning transports (shm) before sleeping:
// spin with cpu_relax() for `spin`, then sched_yield() for `yield`, then arm the
// doorbells and sleep in poll(). Communicators take it from Tuning.
struct WaitPolicy {
  std::chrono::microseconds spin{50};
  std::chrono::microseconds yield{100000};
  // Sockets: while a receive is pending, retry for this long before poll().
  std::chrono::microseconds tcp_spin{0};
};

// Runs every transfer to completion. Throws TimeoutError at `deadline`
// ("<what> timed out after <timeout> ms waiting for rank 3 on host h to send
// 1024 more bytes"), or the Pair's RemoteError when a peer fails.
// `what` is called only to build an error message.
void run_transfers(std::span<Transfer> xfers, Clock::time_point deadline, Millis timeout,
                   const std::function<std::string()>& what, const WaitPolicy& wait = WaitPolicy{});

}  // namespace dl::coll
