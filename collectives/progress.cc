#include "collectives/progress.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "collectives/cpu_relax.h"
#include "errors/error.h"

namespace dl::coll {
namespace {

void notify(Transfer& t, bool final) {
  if (!t.on_recv || t.done == t.notified) return;
  if (final || t.done - t.notified >= (t.window ? t.window : t.notify_bytes)) {
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
    size_t k;
    if (t.send) {
      k = t.pair->try_send(t.buf + t.done, t.n - t.done);
    } else if (t.window) {
      const size_t at = t.done % t.window;
      k = t.pair->try_recv(t.buf + at, std::min(t.n - t.done, t.window - at));
    } else {
      k = t.pair->try_recv(t.buf + t.done, t.n - t.done);
    }
    if (k > 0) {
      moved = true;
      t.done += k;
      if (!t.send) notify(t, t.done == t.n);
    }
    if (t.done < t.n) ++pending;
  }
  return moved;
}

[[noreturn]] void throw_timeout(std::span<Transfer> xfers, Millis timeout, const std::function<std::string()>& what) {
  std::string who;
  for (auto& t : xfers) {
    if (t.done == t.n) continue;
    if (!who.empty()) who += ", ";
    who += t.pair->peer().describe() + (t.send ? " to accept " : " to send ") +
           std::to_string(t.n - t.done) + " more bytes";
  }
  throw TimeoutError(what() + " timed out after " + std::to_string(timeout.count()) + " ms waiting for " + who +
                     "; is that rank still calling the same collective? (raise the timeout if it is just slow)");
}

// Blocks in poll() until a pending transfer may progress: sockets of TCP
// pairs, doorbells of armed spinning pairs. Drains the doorbells that rang
// (which throws when their peer is gone).
void wait_ready(std::span<Transfer> xfers, Clock::time_point deadline) {
  std::vector<pollfd> fds;
  std::vector<Pair*> who;
  for (auto& t : xfers) {
    if (t.done == t.n) continue;
    const bool bell = t.pair->spins();
    fds.push_back(pollfd{t.pair->poll_fd(), short(bell ? POLLIN : t.send ? POLLOUT : POLLIN), 0});
    who.push_back(t.pair);
  }
  auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
  int ms = static_cast<int>(std::clamp<long long>(left, 0, 1000));
  if (::poll(fds.data(), fds.size(), ms) < 0 && errno != EINTR) throw_errno("poll on collective sockets");
  for (size_t i = 0; i < fds.size(); ++i)
    if (fds[i].revents && who[i]->spins()) who[i]->drain();
}

}  // namespace

void run_transfers(std::span<Transfer> xfers, Clock::time_point deadline, Millis timeout,
                   const std::function<std::string()>& what, const WaitPolicy& wait) {
  for (auto& t : xfers)
    if (!t.send && t.n == 0) notify(t, true);
  size_t pending = 0;
  unsigned idle = 0;
  Clock::time_point idle_since;
  for (;;) {
    if (progress(xfers, pending)) { idle = 0; continue; }
    if (pending == 0) return;
    bool spinning = false;
    for (auto& t : xfers)
      if (t.done < t.n && t.pair->spins()) spinning = true;
    if (spinning) {
      // Spin (a peer on another core answers within microseconds), then
      // yield the core to a peer that may need it, then sleep on the
      // doorbells; check liveness and the deadline every so often.
      if (idle++ == 0) idle_since = Clock::now();
      const bool check = idle % 256 == 0;
      const auto spent = check ? Clock::now() - idle_since : Clock::duration::zero();
      if (!check || spent < wait.spin) {
        cpu_relax();
        continue;
      }
      for (auto& t : xfers)
        if (t.done < t.n && t.pair->spins()) t.pair->check_alive();
      if (Clock::now() >= deadline) throw_timeout(xfers, timeout, what);
      if (spent < wait.spin + wait.yield) {
        sched_yield();
        continue;
      }
      for (auto& t : xfers)
        if (t.done < t.n && t.pair->spins()) t.pair->arm(t.send);
      if (progress(xfers, pending)) { idle = 0; continue; }
      if (pending == 0) return;
    }
    if (!spinning && wait.tcp_spin.count() > 0) {
      // Sockets: a reply that comes within tcp_spin is picked up without a
      // wake-up. Only while receiving; a full send buffer drains slowly.
      bool receiving = false;
      for (auto& t : xfers)
        if (t.done < t.n && !t.send) receiving = true;
      if (receiving) {
        if (idle++ == 0) idle_since = Clock::now();
        if (idle % 16 != 0 || Clock::now() - idle_since < wait.tcp_spin) {
          cpu_relax();
          continue;
        }
      }
    }
    if (Clock::now() >= deadline) throw_timeout(xfers, timeout, what);
    wait_ready(xfers, deadline);
    idle = 0;
  }
}

}  // namespace dl::coll
