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
  size_t done = 0, notified = 0;

  static Transfer sending(Pair& p, const void* buf, size_t n) {
    return Transfer{&p, static_cast<char*>(const_cast<void*>(buf)), n, true, {}};
  }
  static Transfer receiving(Pair& p, void* buf, size_t n) {
    return Transfer{&p, static_cast<char*>(buf), n, false, {}};
  }
};

// Runs every transfer to completion. Throws TimeoutError at `deadline`
// ("<what> timed out after <timeout> ms waiting for rank 3 on host h to send
// 1024 more bytes"), or the Pair's RemoteError when a peer fails.
void run_transfers(std::span<Transfer> xfers, Clock::time_point deadline, Millis timeout,
                   const std::string& what);

}  // namespace dl::coll
