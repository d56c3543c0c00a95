#pragma once
// What a connecting rank sends first, decoded as the bytes arrive, with no
// I/O: the job-token handshake (wire/handshake.h, tag kHandshakeTag), then
// its rank number (u32 big-endian); the accepting rank answers with a
// kWelcome frame once it took the connection. The bytes come from anyone
// who can reach the listening port, so every length is checked before it is
// trusted and every refusal is a state, never an exception.
//
//   connecting rank -> accepting rank: hello frame, proof frame, u32 rank
//   accepting rank -> connecting rank: answer frame, then kWelcome (or kErrorText)
#include <chrono>
#include <string>
#include <string_view>

#include "wire/handshake.h"

namespace dl::coll::tcp {

// The greeting's protocol and version: a rank of a dlaunch that greets
// otherwise (without the welcome) is refused, naming both tags.
inline constexpr const char* kHandshakeTag = "coll/2";
// Payload of the kData frame that tells a connecting rank it was taken.
inline constexpr std::string_view kWelcome = "welcome";
// How long a connection may take from its accept to its rank number: a rank
// sends it at once, so one that takes longer is most likely not a rank, and
// is dropped (a rank that was only slow dials again).
inline constexpr std::chrono::milliseconds kGreetingTimeout{2000};

class Greeting {
 public:
  // Only moves forward.
  enum class State { kHello, kProof, kRank, kDone, kRefused };

  // For the accepting rank `rank` of `size`: only ranks above it connect.
  Greeting(std::string token, int rank, int size);
  // As above, with the server's nonce drawn by the caller (tests, fuzzing).
  Greeting(std::string token, int rank, int size, std::string nonce);

  // Bytes the next step still needs; 0 once done or refused. A caller that
  // reads at most this many leaves whatever follows in the socket.
  size_t wanted() const;
  // Takes the first min(in.size(), wanted()) bytes of `in`; returns how many.
  size_t feed(std::string_view in);
  // Bytes to send back (the handshake answer, or a refusal), taken out.
  std::string take_reply();

  State state() const { return state_; }
  // The connecting rank's number, once kDone.
  int peer() const { return peer_; }
  // Why the connection was refused, once kRefused.
  const std::string& error() const { return error_; }

 private:
  void step();
  void on_frame(uint8_t type, std::string_view payload);
  void refuse(const std::string& why, bool tell);

  wire::ServerHandshake hs_;
  int rank_, size_;
  State state_ = State::kHello;
  std::string buf_, reply_, error_;
  int peer_ = -1;
};

}  // namespace dl::coll::tcp
