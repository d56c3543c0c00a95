// hmac_once: one HMAC-SHA256 of the handshake's size and exit, the start-up
// cost of each way of computing it; built three ways (CMakeLists.txt):
// dlaunch's (wire/sha256.cc over nettle, linked shared as dlaunch links it),
// nettle linked statically, and OpenSSL's libcrypto (which loads its
// configuration and providers on the first digest). bench/libs/run.sh times
// them with hyperfine.
#include <cstdint>
#include <string_view>

#if DL_HMAC_NETTLE
#include <nettle/hmac.h>
#elif DL_HMAC_OPENSSL
#include <openssl/evp.h>
#include <openssl/hmac.h>
#else
#include "wire/sha256.h"
#endif

int main(int argc, char** argv) {
  const std::string_view key = "0123456789abcdef0123456789abcdef";
  const std::string_view msg = argc > 1 ? argv[1] : "dlaunch handshake: a nonce of 32 bytes and the peer's role";
#if DL_HMAC_NETTLE
  hmac_sha256_ctx ctx;
  hmac_sha256_set_key(&ctx, key.size(), reinterpret_cast<const uint8_t*>(key.data()));
  hmac_sha256_update(&ctx, msg.size(), reinterpret_cast<const uint8_t*>(msg.data()));
  uint8_t d[SHA256_DIGEST_SIZE];
  hmac_sha256_digest(&ctx, sizeof d, d);
  return d[0] == 0x100;  // never: the digest is used, not optimized away
#elif DL_HMAC_OPENSSL
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), d, &len);
  return d[0] == 0x100;
#else
  const auto d = dl::wire::hmac_sha256(key, {msg});
  return d[0] == 0x100;
#endif
}
