#include "wire/sha256.h"

#include <nettle/hmac.h>

namespace dl::wire {

namespace {
// An empty view may hold a null pointer, which nettle would pass to memcpy.
const uint8_t* bytes(std::string_view s) {
  static const uint8_t none = 0;
  return s.empty() ? &none : reinterpret_cast<const uint8_t*>(s.data());
}

std::string as_string(const std::array<uint8_t, Sha256::kDigestSize>& d) {
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}
}  // namespace

Sha256::Sha256() { sha256_init(&ctx_); }

void Sha256::update(std::string_view data) { sha256_update(&ctx_, data.size(), bytes(data)); }

std::array<uint8_t, Sha256::kDigestSize> Sha256::finish() {
  std::array<uint8_t, kDigestSize> out{};
  sha256_digest(&ctx_, out.size(), out.data());
  return out;
}

std::string sha256(std::string_view data) {
  Sha256 s;
  s.update(data);
  return as_string(s.finish());
}

std::array<uint8_t, Sha256::kDigestSize> hmac_sha256(std::string_view key,
                                                     std::initializer_list<std::string_view> parts) {
  hmac_sha256_ctx ctx;
  hmac_sha256_set_key(&ctx, key.size(), bytes(key));
  for (std::string_view p : parts) hmac_sha256_update(&ctx, p.size(), bytes(p));
  std::array<uint8_t, Sha256::kDigestSize> out{};
  hmac_sha256_digest(&ctx, out.size(), out.data());
  return out;
}

std::string hmac_sha256(std::string_view key, std::string_view msg) { return as_string(hmac_sha256(key, {msg})); }

}  // namespace dl::wire
