#pragma once
// The job-token handshake that opens every dlaunch connection: mutual
// challenge-response with HMAC-SHA256 over fresh nonces, so the token itself
// never crosses the wire. The client speaks first, and the server proves it
// holds the token in its first answer, so the client waits for one round
// trip, not two. Messages (payloads of kHandshake frames):
//
//   client -> server  hello:  "DLH2" | u8 len | protocol tag | nonce_c[32]
//   server -> client  answer: nonce_s[32] | mac_s[32]   (or kErrorText, then close)
//   client -> server  proof:  mac_c[32]                 (or kErrorText, then close)
//
//   mac_s = HMAC(token, "dlaunch-server" | tag | nonce_c | nonce_s)
//   mac_c = HMAC(token, "dlaunch-client" | tag | nonce_s | nonce_c)
//
// After the answer, a client holding the same token knows the server does
// (a wrong token fails there, at once), and it sends its proof and its first
// message without waiting: the server checks the proof before it looks at
// anything that follows it, and on a wrong proof sends a kErrorText frame and
// closes. The role labels keep one side's MAC from serving as the other's.
//
// The protocol tag ("control/1", "store/1", ...) carries the protocol name and
// version, so a client that reaches the wrong server, or another version of
// dlaunch, is refused with a message naming both.
#include <optional>
#include <string>
#include <string_view>

#include "wire/socket.h"

namespace dl::wire {

inline constexpr size_t kNonceSize = 32;
inline constexpr size_t kMacSize = 32;
inline constexpr size_t kMaxHandshakePayload = 512;
inline constexpr Millis kDefaultHandshakeTimeout{10000};

// n bytes from the OS's CSPRNG.
std::string random_bytes(size_t n);
// A fresh job token: kTokenBytes random bytes as kTokenChars hex characters.
inline constexpr size_t kTokenBytes = 32;
inline constexpr size_t kTokenChars = 2 * kTokenBytes;
std::string new_token();
std::string to_hex(std::string_view bytes);
// HMAC-SHA256(key, msg), 32 raw bytes (wire/sha256.h: no OpenSSL start-up).
std::string hmac_sha256(std::string_view key, std::string_view msg);
// Constant-time comparison of equal-length strings (no libcrypto: a forked
// client would fault its pages in just for this).
bool equal_ct(std::string_view a, std::string_view b);

// The server's half, pure (no I/O) so event-driven servers and tests drive it.
class ServerHandshake {
 public:
  ServerHandshake(std::string token, std::string tag);
  // With a nonce drawn by the caller (kNonceSize bytes from the OS's CSPRNG,
  // e.g. many at once with random_bytes): a server taking a burst of clients
  // saves a getrandom call per connection.
  ServerHandshake(std::string token, std::string tag, std::string nonce);
  // Checks the client's hello and returns the answer payload to send. On a
  // malformed hello or another protocol returns nullopt and sets error().
  std::optional<std::string> answer(std::string_view hello);
  // After answer(): checks the client's proof. On failure returns false and
  // sets error() to a message for the log (never revealing the token).
  bool verify(std::string_view proof);
  // True once answer() succeeded: the next handshake frame is the proof.
  bool answered() const { return !nonce_c_.empty(); }
  const std::string& error() const { return error_; }

 private:
  std::string token_, tag_, nonce_, nonce_c_, error_;
};

// The client's half, pure (no I/O), for clients that do their own reads
// (the store client reads a frame with one recv). client_handshake() below
// drives it over a blocking Socket.
class ClientHandshake {
 public:
  // `peer` names the server in error messages. Draws the client's nonce.
  ClientHandshake(std::string_view token, std::string_view tag, std::string_view peer);
  // The hello payload to send first.
  const std::string& hello() const { return hello_; }
  // Checks the server's answer (or its refusal, a kErrorText frame) and
  // returns the proof payload to send. Throws AuthError when the server is
  // not ours: another program, protocol or version, or a server that could
  // not prove it holds this token. Then refusal() is what to send instead,
  // so the server's log says why the client left.
  std::string finish(const Frame& answer);
  static constexpr std::string_view refusal() {
    return "the client's token differs from this server's (the server's proof did not verify)";
  }

 private:
  std::string token_, tag_, peer_, nonce_c_, hello_;
};

// Blocking client side on a connected socket. Throws AuthError when the
// server is not ours (wrong token, wrong protocol or version), naming `peer`.
void client_handshake(const Socket& s, std::string_view token, std::string_view tag,
                      const std::string& peer, Millis timeout = kDefaultHandshakeTimeout);

// Blocking server side, for peers that accept with plain sockets (collectives).
void server_handshake(const Socket& s, std::string_view token, std::string_view tag,
                      const std::string& peer, Millis timeout = kDefaultHandshakeTimeout);

}  // namespace dl::wire
