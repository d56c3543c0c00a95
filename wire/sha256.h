#pragma once
// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the one adapter over
// nettle's (libnettle8, linked shared), so that no other file names nettle.
//
// Why nettle and not OpenSSL's libcrypto: libcrypto 3 loads its
// configuration and providers on the first digest of every process, 2-7 ms
// here, and every rank and agent pays it on its first authenticated
// connection. nettle has no such start (a fresh process with one HMAC costs
// the same CPU as with no library at all), it uses the CPU's SHA
// instructions, and it is a maintained, reviewed implementation where a
// hand-written one is one more file to keep correct (docs/design.md,
// "Libraries and what we write by hand"). Checked against the FIPS and
// RFC 4231 test vectors and OpenSSL in tests/wire.
#include <nettle/sha2.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace dl::wire {

class Sha256 {
 public:
  static constexpr size_t kDigestSize = SHA256_DIGEST_SIZE;
  static constexpr size_t kBlockSize = SHA256_BLOCK_SIZE;

  Sha256();
  void update(std::string_view data);
  // The digest of everything updated so far; the object must not be used after.
  std::array<uint8_t, kDigestSize> finish();

 private:
  sha256_ctx ctx_;
};

// SHA-256 of data, 32 raw bytes.
std::string sha256(std::string_view data);
// HMAC-SHA256(key, msg), 32 raw bytes (also declared in wire/handshake.h).
std::string hmac_sha256(std::string_view key, std::string_view msg);
// HMAC-SHA256 of the concatenation of `parts`, with no heap allocation:
// the handshake computes it in every freshly started rank, where each new
// heap page is a page fault.
std::array<uint8_t, Sha256::kDigestSize> hmac_sha256(std::string_view key,
                                                     std::initializer_list<std::string_view> parts);

}  // namespace dl::wire
