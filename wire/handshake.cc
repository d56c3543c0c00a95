#include "wire/handshake.h"

#include <sys/random.h>

#include <cerrno>

#include "errors/error.h"
#include "wire/sha256.h"

namespace dl::wire {

namespace {
constexpr std::string_view kMagic = "DLH2";

// HMAC(token, role | tag | first | second), with no heap allocation.
std::array<uint8_t, kMacSize> mac(std::string_view token, std::string_view role, std::string_view tag,
                                  std::string_view first, std::string_view second) {
  return hmac_sha256(token, {role, tag, first, second});
}

std::string_view view(const std::array<uint8_t, kMacSize>& m) {
  return {reinterpret_cast<const char*>(m.data()), m.size()};
}

// Reads "u8 len | tag" at offset `at`; nullopt when malformed.
std::optional<std::string> read_tag(std::string_view p, size_t at) {
  if (p.size() <= at) return std::nullopt;
  size_t len = static_cast<unsigned char>(p[at]);
  if (p.size() < at + 1 + len) return std::nullopt;
  return std::string(p.substr(at + 1, len));
}
}  // namespace

std::string random_bytes(size_t n) {
  // The kernel's CSPRNG directly: OpenSSL's RAND_bytes costs milliseconds
  // on its first call (DRBG set-up) in every launcher, agent and rank.
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::getrandom(out.data() + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_errno("getrandom");
    got += static_cast<size_t>(r);
  }
  return out;
}

std::string to_hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out.push_back(digits[c >> 4]), out.push_back(digits[c & 15]);
  return out;
}

std::string new_token() { return to_hex(random_bytes(kTokenBytes)); }

bool equal_ct(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;  // every byte is looked at, whatever differs
  for (size_t i = 0; i < a.size(); ++i) diff = diff | static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

ServerHandshake::ServerHandshake(std::string token, std::string tag)
    : ServerHandshake(std::move(token), std::move(tag), random_bytes(kNonceSize)) {}

ServerHandshake::ServerHandshake(std::string token, std::string tag, std::string nonce)
    : token_(std::move(token)), tag_(std::move(tag)), nonce_(std::move(nonce)) {}

std::optional<std::string> ServerHandshake::answer(std::string_view h) {
  auto client_tag = h.substr(0, kMagic.size()) == kMagic ? read_tag(h, kMagic.size()) : std::nullopt;
  if (!client_tag || h.size() != kMagic.size() + 1 + client_tag->size() + kNonceSize) {
    error_ = h.substr(0, 3) == "DLH" ? "the client speaks another dlaunch handshake (" + std::string(h.substr(0, 4)) +
                                           ", this server " + std::string(kMagic) + "): mixed dlaunch versions"
                                     : "malformed handshake hello";
    return std::nullopt;
  }
  if (*client_tag != tag_) {
    error_ = "client speaks '" + *client_tag + "', this server speaks '" + tag_ + "'";
    return std::nullopt;
  }
  nonce_c_ = std::string(h.substr(h.size() - kNonceSize));
  std::string answer;
  answer.reserve(kNonceSize + kMacSize);
  return answer.append(nonce_).append(view(mac(token_, "dlaunch-server", tag_, nonce_c_, nonce_)));
}

bool ServerHandshake::verify(std::string_view proof) {
  if (!answered() || proof.size() != kMacSize) {
    error_ = "malformed handshake proof";
    return false;
  }
  if (!equal_ct(proof, view(mac(token_, "dlaunch-client", tag_, nonce_, nonce_c_)))) {
    error_ = "client does not hold this job's token";
    return false;
  }
  return true;
}

ClientHandshake::ClientHandshake(std::string_view token, std::string_view tag, std::string_view peer)
    : token_(token), tag_(tag), peer_(peer), nonce_c_(random_bytes(kNonceSize)) {
  hello_.reserve(kMagic.size() + 1 + tag_.size() + kNonceSize);
  hello_.append(kMagic).push_back(static_cast<char>(tag_.size()));
  hello_.append(tag_).append(nonce_c_);
}

std::string ClientHandshake::finish(const Frame& a) {
  if (a.type == kErrorText) throw AuthError(std::string(peer_) + " refused the connection: " + a.payload);
  if (a.type != kHandshake || a.payload.size() != kNonceSize + kMacSize) {
    // A server of the first handshake speaks first, whatever we send.
    if (a.type == kHandshake && a.payload.substr(0, 4) == "DLH1")
      throw AuthError(std::string(peer_) + " speaks an older dlaunch handshake (DLH1): run the same dlaunch version everywhere");
    throw AuthError(std::string(peer_) + " is not a dlaunch server (unexpected answer to the handshake)");
  }
  std::string_view p = a.payload;
  std::string_view nonce_s = p.substr(0, kNonceSize), mac_s = p.substr(kNonceSize);
  if (!equal_ct(mac_s, view(mac(token_, "dlaunch-server", tag_, nonce_c_, nonce_s))))
    throw AuthError(std::string(peer_) + " does not hold this job's token (the server's proof did not verify): is "
                    "DLAUNCH_TOKEN this job's, and is this the job's port?");
  return std::string(view(mac(token_, "dlaunch-client", tag_, nonce_s, nonce_c_)));
}

void client_handshake(const Socket& s, std::string_view token, std::string_view tag,
                      const std::string& peer, Millis timeout) {
  ClientHandshake hs{token, tag, peer};
  write_frame(s, kHandshake, hs.hello(), peer);
  std::string proof;
  try {
    proof = hs.finish(read_frame(s, kMaxHandshakePayload, timeout, peer));
  } catch (const AuthError&) {
    try { write_frame(s, kErrorText, std::string(ClientHandshake::refusal()), peer); } catch (const Error&) {}
    throw;
  }
  write_frame(s, kHandshake, proof, peer);
}

void server_handshake(const Socket& s, std::string_view token, std::string_view tag,
                      const std::string& peer, Millis timeout) {
  ServerHandshake hs{std::string(token), std::string(tag)};
  auto refuse = [&](const std::string& why) {
    try { write_frame(s, kErrorText, why, peer); } catch (const Error&) {}
    throw AuthError(peer + " failed the token handshake: " + why);
  };
  Frame hello = read_frame(s, kMaxHandshakePayload, timeout, peer);
  auto answer = hello.type == kHandshake ? hs.answer(hello.payload) : std::nullopt;
  if (!answer) refuse(hello.type == kHandshake ? hs.error() : "unexpected frame before the handshake");
  write_frame(s, kHandshake, *answer, peer);
  Frame proof = read_frame(s, kMaxHandshakePayload, timeout, peer);
  if (proof.type == kErrorText) throw AuthError(peer + " failed the token handshake: it says " + proof.payload);
  if (proof.type != kHandshake || !hs.verify(proof.payload))
    refuse(proof.type == kHandshake ? hs.error() : "unexpected frame during the handshake");
}

}  // namespace dl::wire
