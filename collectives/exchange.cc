#include "collectives/exchange.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "errors/error.h"

namespace dl::coll {
namespace {

void notify(Transfer& t, bool final) {
  if (!t.on_recv || t.done == t.notified) return;
  if (final || t.done - t.notified >= t.notify_bytes) {
    size_t from = t.notified;
    t.notified = t.done;
    t.on_recv(from, t.done);
  }
}

// One pass over the pending transfers; returns true when any moved bytes.
bool progress(std::span<Transfer> xfers, size_t& pending) {
  bool moved = false;
  pending = 0;
  for (auto& t : xfers) {
    if (t.done == t.n) continue;
    size_t k = t.send ? t.pair->try_send(t.buf + t.done, t.n - t.done)
                      : t.pair->try_recv(t.buf + t.done, t.n - t.done);
    if (k > 0) {
      moved = true;
      t.done += k;
      if (!t.send) notify(t, t.done == t.n);
    }
    if (t.done < t.n) ++pending;
  }
  return moved;
}

[[noreturn]] void throw_timeout(std::span<Transfer> xfers, Millis timeout, const std::string& what) {
  std::string who;
  for (auto& t : xfers) {
    if (t.done == t.n) continue;
    if (!who.empty()) who += ", ";
    who += t.pair->peer().describe() + (t.send ? " to accept " : " to send ") +
           std::to_string(t.n - t.done) + " more bytes";
  }
  throw TimeoutError(what + " timed out after " + std::to_string(timeout.count()) + " ms waiting for " + who +
                     "; is that rank still calling the same collective? (raise the timeout if it is just slow)");
}

// Blocks in poll() until a socket of a pending transfer is ready (all
// pending transfers are on pollable transports).
void wait_ready(std::span<Transfer> xfers, Clock::time_point deadline) {
  std::vector<pollfd> fds;
  for (auto& t : xfers)
    if (t.done < t.n) fds.push_back(pollfd{t.pair->poll_fd(), short(t.send ? POLLOUT : POLLIN), 0});
  auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
  int ms = static_cast<int>(std::clamp<long long>(left, 0, 1000));
  if (::poll(fds.data(), fds.size(), ms) < 0 && errno != EINTR) throw_errno("poll on collective sockets");
}

}  // namespace

void run_transfers(std::span<Transfer> xfers, Clock::time_point deadline, Millis timeout,
                   const std::string& what) {
  for (auto& t : xfers)
    if (!t.send && t.n == 0) notify(t, true);
  size_t pending = 0;
  unsigned idle = 0;
  bool yielding = false;
  Clock::time_point spin_start;
  for (;;) {
    if (progress(xfers, pending)) { idle = 0; yielding = false; continue; }
    if (pending == 0) return;
    bool pollable = true;
    for (auto& t : xfers)
      if (t.done < t.n && t.pair->poll_fd() < 0) pollable = false;
    if (pollable) {
      if (Clock::now() >= deadline) throw_timeout(xfers, timeout, what);
      wait_ready(xfers, deadline);
      continue;
    }
    // Spinning transports: spin about 50 us (a peer on another core answers
    // within that), then yield the core to a peer that may need it; check
    // liveness and the deadline about every thousand idle passes.
    if (idle++ == 0) spin_start = Clock::now();
    if (idle % 64 == 0 && Clock::now() - spin_start > std::chrono::microseconds(50)) yielding = true;
    if (yielding) sched_yield();
    else __builtin_ia32_pause();
    if (idle % 1024 == 0) {
      for (auto& t : xfers)
        if (t.done < t.n) t.pair->check_alive();
      if (Clock::now() >= deadline) throw_timeout(xfers, timeout, what);
    }
  }
}

}  // namespace dl::coll
