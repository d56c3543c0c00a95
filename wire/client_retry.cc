#include "wire/client_retry.h"

#include <algorithm>
#include <random>
#include <thread>

#include "errors/error.h"
#include "wire/handshake.h"

namespace dl::wire {

using Clock = std::chrono::steady_clock;

Millis retry_pause(int number) {
  const int doublings = std::clamp(number - 1, 0, 20);
  const auto d = std::min(kRetryFirstPause * (int64_t{1} << doublings), kRetryLongestPause);
  thread_local std::mt19937 gen(std::random_device{}());
  return Millis(std::uniform_int_distribution<int64_t>(0, d.count())(gen));
}

Try try_budget(int number, Millis left) {
  Try t;
  t.number = number;
  t.left = std::max(left, Millis(1));
  const int doublings = std::clamp(number - 1, 0, 20);
  t.wait = std::min({kRetryFirstWait * (int64_t{1} << doublings), kRetryLongestWait, t.left});
  t.connect_wait = std::min(kRetryFirstConnectWait * (int64_t{1} << doublings), t.wait);
  return t;
}

void retry_until(const std::string& peer, Millis timeout, const std::function<void(const Try&)>& attempt) {
  const auto start = Clock::now(), deadline = start + timeout;
  Try t;
  std::string last;
  for (;; ++t.number) {
    t = try_budget(t.number, std::chrono::duration_cast<Millis>(deadline - Clock::now()));
    try {
      return attempt(t);
    } catch (const UnresolvedHost&) {
      throw;
    } catch (const NotListening&) {
      throw;
    } catch (const Error& e) {
      const auto k = e.kind();
      if (k != ErrorKind::kTimeout && k != ErrorKind::kIo && k != ErrorKind::kRemote) throw;
      last = e.what();
    }
    const auto pause = retry_pause(t.number);
    if (Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
  }
  throw TimeoutError(retry_timeout_message(peer, std::chrono::duration_cast<Millis>(Clock::now() - start), t.number, last));
}

std::string retry_timeout_message(const std::string& peer, Millis waited, int tries, const std::string& last) {
  return "no handshake with " + peer + " within " + std::to_string(waited.count()) + " ms (" + std::to_string(tries) +
         (tries == 1 ? " try" : " tries") + "; the last: " + last + ")";
}

Socket connect_authenticated(const std::string& host, uint16_t port, std::string_view token, std::string_view tag,
                             const std::string& peer, Millis timeout, Refused refused) {
  Socket s;
  retry_until(peer, timeout, [&](const Try& t) {
    s = connect_tcp(host, port, t.connect_wait, refused);
    client_handshake(s, token, tag, peer, t.wait);
  });
  return s;
}

}  // namespace dl::wire
