#include "wire/handshake.h"

#include <sys/random.h>

#include <cerrno>

#include "errors/error.h"
#include "wire/sha256.h"

namespace dl::wire {

namespace {
constexpr std::string_view kMagic = "DLH1";

std::string mac(std::string_view token, std::string_view role, std::string_view tag,
                std::string_view first, std::string_view second) {
  std::string msg;
  msg.reserve(role.size() + tag.size() + first.size() + second.size());
  msg.append(role).append(tag).append(first).append(second);
  return hmac_sha256(token, msg);
}

std::string with_tag(std::string_view tag) {
  std::string s(1, static_cast<char>(tag.size()));
  s.append(tag);
  return s;
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

std::string new_token() { return to_hex(random_bytes(32)); }

bool equal_ct(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;  // every byte is looked at, whatever differs
  for (size_t i = 0; i < a.size(); ++i) diff = diff | static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

ServerHandshake::ServerHandshake(std::string token, std::string tag)
    : ServerHandshake(std::move(token), std::move(tag), random_bytes(kNonceSize)) {}

ServerHandshake::ServerHandshake(std::string token, std::string tag, std::string nonce)
    : token_(std::move(token)), tag_(std::move(tag)), nonce_(std::move(nonce)) {
  hello_.append(kMagic).append(with_tag(tag_)).append(nonce_);
}

std::optional<std::string> ServerHandshake::verify(std::string_view r) {
  if (r.size() < kMacSize + kNonceSize + 1) {
    error_ = "malformed handshake response";
    return std::nullopt;
  }
  auto client_tag = read_tag(r, kMacSize + kNonceSize);
  if (!client_tag) {
    error_ = "malformed handshake response";
    return std::nullopt;
  }
  if (*client_tag != tag_) {
    error_ = "client speaks '" + *client_tag + "', this server speaks '" + tag_ + "'";
    return std::nullopt;
  }
  std::string_view mac_c = r.substr(0, kMacSize), nonce_c = r.substr(kMacSize, kNonceSize);
  if (!equal_ct(mac_c, mac(token_, "dlaunch-client", tag_, nonce_, nonce_c))) {
    error_ = "client does not hold this job's token";
    return std::nullopt;
  }
  return mac(token_, "dlaunch-server", tag_, nonce_c, nonce_);
}

ClientHandshake::ClientHandshake(std::string token, std::string tag, std::string peer)
    : token_(std::move(token)), tag_(std::move(tag)), peer_(std::move(peer)) {}

std::string ClientHandshake::respond(const Frame& hello) {
  std::string_view h = hello.payload;
  auto server_tag = h.substr(0, kMagic.size()) == kMagic ? read_tag(h, kMagic.size()) : std::nullopt;
  if (hello.type != kHandshake || !server_tag ||
      h.size() != kMagic.size() + 1 + server_tag->size() + kNonceSize) {
    throw AuthError(peer_ + " is not a dlaunch server (unexpected greeting)");
  }
  if (*server_tag != tag_) {
    throw AuthError(peer_ + " speaks '" + *server_tag + "' but this program speaks '" + tag_ +
                    "': a different dlaunch version or the wrong port");
  }
  nonce_s_ = std::string(h.substr(h.size() - kNonceSize));
  nonce_c_ = random_bytes(kNonceSize);
  std::string resp = mac(token_, "dlaunch-client", tag_, nonce_s_, nonce_c_);
  resp.append(nonce_c_).append(with_tag(tag_));
  return resp;
}

void ClientHandshake::check_accept(const Frame& accept) const {
  if (accept.type == kErrorText) throw AuthError(peer_ + " refused the connection: " + accept.payload);
  if (accept.type != kHandshake || nonce_c_.empty() ||
      !equal_ct(accept.payload, mac(token_, "dlaunch-server", tag_, nonce_c_, nonce_s_)))
    throw AuthError(peer_ + " does not hold this job's token (server authentication failed)");
}

void client_handshake(const Socket& s, std::string_view token, std::string_view tag,
                      const std::string& peer, Millis timeout) {
  ClientHandshake hs{std::string(token), std::string(tag), peer};
  write_frame(s, kHandshake, hs.respond(read_frame(s, kMaxHandshakePayload, timeout, peer)), peer);
  hs.check_accept(read_frame(s, kMaxHandshakePayload, timeout, peer));
}

void server_handshake(const Socket& s, std::string_view token, std::string_view tag,
                      const std::string& peer, Millis timeout) {
  ServerHandshake hs{std::string(token), std::string(tag)};
  write_frame(s, kHandshake, hs.hello(), peer);
  Frame resp = read_frame(s, kMaxHandshakePayload, timeout, peer);
  auto accept = resp.type == kHandshake ? hs.verify(resp.payload) : std::nullopt;
  if (!accept) {
    std::string why = resp.type == kHandshake ? hs.error() : "unexpected frame during handshake";
    try { write_frame(s, kErrorText, why, peer); } catch (const Error&) {}
    throw AuthError(peer + " failed the token handshake: " + why);
  }
  write_frame(s, kHandshake, *accept, peer);
}

}  // namespace dl::wire
