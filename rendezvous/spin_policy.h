#pragma once
// The store's busy-poll policy (docs/rendezvous.md, "Busy-polling"), shared
// by the client (tcp_store.cc) and the server (tcp_store_server.cc), so each
// includes this instead of the other's header.
//
// A client whose last round trip took under kSpinWhenFaster polls for the
// next reply for up to store_spin() before it sleeps; the server, after
// answering a client whose request came within kSpinWhenFaster of its
// previous reply, polls that client's socket for up to store_spin() for the
// next request, at most kMaxSpins requests in a row so other clients and
// handlers wait at most that long. Waits and barriers never spin.
#include <algorithm>
#include <chrono>

namespace dl::rdzv {

// The window when DLAUNCH_STORE_SPIN_US is not set (or not a number).
inline constexpr std::chrono::microseconds kDefaultSpin{50};
// The largest DLAUNCH_STORE_SPIN_US honoured.
inline constexpr std::chrono::microseconds kMaxSpin{10000};
// Only a round trip (client) or a request gap (server) under this spins.
inline constexpr std::chrono::microseconds kSpinWhenFaster{200};
// The server spins for at most this many requests of one client in a row.
inline constexpr int kMaxSpins = 64;
// After a spin that found nothing, the next 1, 2, 4, ... up to this many
// chances to spin are skipped (where client and server share one CPU, every
// spin fails: then one request in this many pays for one).
inline constexpr int kMaxSpinBackoff = 64;

// The spin window: DLAUNCH_STORE_SPIN_US (0 turns spinning off, at most
// kMaxSpin), else kDefaultSpin. Read once at start-up.
std::chrono::microseconds store_spin();

// The back-off after failed spins, one per client connection (each side
// keeps its own).
class SpinBackoff {
 public:
  // False while skipping chances after a spin that found nothing (and
  // counts this chance as skipped); true when this one may spin.
  bool take() {
    if (skip_ == 0) return true;
    --skip_;
    return false;
  }
  // A spin found what it polled for: spin at every chance again.
  void succeeded() { backoff_ = 0; }
  // A spin found nothing: skip twice as many chances as last time.
  void failed() { skip_ = backoff_ = std::min(std::max(1, 2 * backoff_), kMaxSpinBackoff); }

 private:
  int backoff_ = 0;  // chances skipped after the last failed spin (doubles)
  int skip_ = 0;     // of those, left
};

}  // namespace dl::rdzv
