#pragma once
// The job-token handshake that opens every dlaunch connection: mutual
// challenge-response with HMAC-SHA256 over fresh nonces, so the token itself
// never crosses the wire. Messages (payloads of kHandshake frames):
//
//   server -> client  hello:    "DLH1" | u8 len | protocol tag | nonce_s[32]
//   client -> server  response: mac_c[32] | nonce_c[32] | u8 len | protocol tag
//   server -> client  accept:   mac_s[32]       (or a kErrorText frame, then close)
//
//   mac_c = HMAC(token, "dlaunch-client" | tag | nonce_s | nonce_c)
//   mac_s = HMAC(token, "dlaunch-server" | tag | nonce_c | nonce_s)
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
// A fresh job token: 32 random bytes as 64 hex characters.
std::string new_token();
std::string to_hex(std::string_view bytes);
// HMAC-SHA256(key, msg), 32 raw bytes (wire/sha256.h: no OpenSSL start-up).
std::string hmac_sha256(std::string_view key, std::string_view msg);
// Constant-time comparison of equal-length strings (no libcrypto: a forked
// client would fault its pages in just for this).
bool equal_ct(std::string_view a, std::string_view b);

// The server's half, pure (no I/O) so Asio sessions and tests drive it.
class ServerHandshake {
 public:
  ServerHandshake(std::string token, std::string tag);
  // With a nonce drawn by the caller (kNonceSize bytes from the OS's CSPRNG,
  // e.g. many at once with random_bytes): a server taking a burst of clients
  // saves a getrandom call per connection.
  ServerHandshake(std::string token, std::string tag, std::string nonce);
  // The hello payload to send first.
  const std::string& hello() const { return hello_; }
  // Checks the client's response. On success returns the accept payload;
  // on failure returns nullopt and sets error() to a message for the log
  // (never revealing the token).
  std::optional<std::string> verify(std::string_view response);
  const std::string& error() const { return error_; }

 private:
  std::string token_, tag_, nonce_, hello_, error_;
};

// The client's half, pure (no I/O), for clients that do their own reads
// (the store client reads a frame with one recv). client_handshake() below
// drives it over a blocking Socket.
class ClientHandshake {
 public:
  // `peer` names the server in error messages.
  ClientHandshake(std::string token, std::string tag, std::string peer);
  // Checks the server's hello frame and returns the response payload to
  // send. Throws AuthError when the server is not ours (unexpected greeting,
  // other protocol or version).
  std::string respond(const Frame& hello);
  // Checks the server's answer to the response: its accept, or its refusal
  // (a kErrorText frame). Throws AuthError unless the server proved it holds
  // the token.
  void check_accept(const Frame& accept) const;

 private:
  std::string token_, tag_, peer_, nonce_s_, nonce_c_;
};

// Blocking client side on a connected socket. Throws AuthError when the
// server is not ours (wrong token, wrong protocol or version), naming `peer`.
void client_handshake(const Socket& s, std::string_view token, std::string_view tag,
                      const std::string& peer, Millis timeout = kDefaultHandshakeTimeout);

// Blocking server side, for peers that accept with plain sockets (collectives).
void server_handshake(const Socket& s, std::string_view token, std::string_view tag,
                      const std::string& peer, Millis timeout = kDefaultHandshakeTimeout);

}  // namespace dl::wire
