#pragma once
// A client's way in to a server that may be starting, busy or flooded by
// someone else's connections (wire/admission.h): every try that is refused,
// reset, closed or left without a handshake answer is tried again after a
// pause, until the client's overall connect timeout. The pauses grow
// exponentially with "full jitter": each is drawn at random from [0, d] with
// d doubling per try, so that thousands of clients turned away together (a
// listen backlog overflowing in a connect storm) come back spread over the
// whole window instead of in a smaller wave at the same moment. A server
// that answers but is not ours (AuthError) is not tried again.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "wire/socket.h"

namespace dl::wire {

// The first pause between tries, and the longest.
inline constexpr Millis kRetryFirstPause{50};
inline constexpr Millis kRetryLongestPause{1000};
// How long the first try waits for the server's handshake answer; each
// later try waits twice as long as the one before, up to kRetryLongestWait.
inline constexpr Millis kRetryFirstWait{2000};
inline constexpr Millis kRetryLongestWait{8000};
// How long the first try waits for its TCP connect to complete; each later
// try waits twice as long, up to that try's handshake wait. A SYN that finds
// the server's listen backlog full is dropped and sent again by the kernel
// only after 1 s: a fresh try after 500 ms (and a jittered pause) gets in
// sooner, while a connect on a LAN or loopback takes well under a
// millisecond. Not shorter: with 250 ms, 16,384 clients on one 2-core host
// sent SYNs so often that the server, sharing the cores, took 15-40 s to
// let them all in (docs/benchmarks.md, "Store at scale").
inline constexpr Millis kRetryFirstConnectWait{500};

// One try's budget: `left` of the overall timeout, `connect_wait`, how long
// its TCP connect may take, and `wait`, how long it may wait for the
// server's handshake answer (neither more than left).
struct Try {
  int number = 1;
  Millis left{0};
  Millis connect_wait{0};
  Millis wait{0};
};

// Runs `attempt` until it returns or `timeout` has passed. A try that throws
// TimeoutError, IoError or RemoteError is tried again after a pause; any
// other error, and UnresolvedHost and NotListening, goes through at once. When time is up, throws TimeoutError:
// "no handshake with PEER within T ms (K tries; the last: WHY)".
void retry_until(const std::string& peer, Millis timeout, const std::function<void(const Try&)>& attempt);

// retry_until's message when time is up, for clients that retry on their
// own (wire/async_connect.h): `tries` tries in `waited`, the last failing
// because `last`.
std::string retry_timeout_message(const std::string& peer, Millis waited, int tries, const std::string& last);

// connect_tcp and client_handshake under retry_until: a connected socket
// that passed the token handshake with `peer` (host:port named in errors).
// `refused`: as connect_tcp's.
Socket connect_authenticated(const std::string& host, uint16_t port, std::string_view token, std::string_view tag,
                             const std::string& peer, Millis timeout, Refused refused = Refused::kRetried);

// The waits of try `number` (from 1) with `left` of the overall timeout.
Try try_budget(int number, Millis left);

// The pause before try `number` + 1: random in [0, d], with d
// kRetryFirstPause doubled per try up to kRetryLongestPause.
Millis retry_pause(int number);

}  // namespace dl::wire
