#pragma once
// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), self-contained.
//
// Why not OpenSSL's: libcrypto 3 loads its configuration and providers on
// the first digest of every process, 2-7 ms here, and every rank and agent
// pays it on its first authenticated connection (1024 store clients: seconds
// of CPU). Hashing the handshake's ~100 bytes takes about a microsecond.
// Checked against the FIPS and RFC 4231 test vectors (tests/wire).
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace dl::wire {

class Sha256 {
 public:
  static constexpr size_t kDigestSize = 32;
  static constexpr size_t kBlockSize = 64;

  Sha256();
  void update(std::string_view data);
  // The digest of everything updated so far; the object must not be used after.
  std::array<uint8_t, kDigestSize> finish();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, kBlockSize> buf_{};
  size_t used_ = 0;   // bytes in buf_
  uint64_t total_ = 0;  // bytes hashed
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
