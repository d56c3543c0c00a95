// wire/sha256 (the adapter over nettle): the FIPS 180-4 and RFC 4231
// vectors, the parts form against the whole message, and agreement with
// OpenSSL's HMAC on every key and message length around the block edges.
#include <catch2/catch.hpp>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <random>

#include "wire/handshake.h"
#include "wire/sha256.h"

using namespace dl::wire;

namespace {
std::string hex(std::string_view s) { return to_hex(s); }
std::string unhex(std::string_view h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
  return out;
}
std::string openssl_hmac(std::string_view key, std::string_view msg) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}
}  // namespace

TEST_CASE("sha256 matches the FIPS 180-4 examples", "[wire]") {
  CHECK(hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 s;  // a million 'a', fed in uneven pieces
  std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    size_t n = std::min(left, chunk.size());
    s.update(std::string_view(chunk).substr(0, n));
    left -= n;
  }
  auto d = s.finish();
  CHECK(hex(std::string(d.begin(), d.end())) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("hmac_sha256 matches RFC 4231 test cases 1 to 7", "[wire]") {
  CHECK(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex(hmac_sha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hex(hmac_sha256(std::string(20, '\xaa'), std::string(50, '\xdd'))) ==
        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  CHECK(hex(hmac_sha256(unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"), std::string(50, '\xcd'))) ==
        "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Case 5 gives only the first 128 bits.
  CHECK(hex(hmac_sha256(std::string(20, '\x0c'), "Test With Truncation")).substr(0, 32) ==
        "a3b6167473100ee06e0c796c2955552b");
  const std::string big_key(131, '\xaa');
  CHECK(hex(hmac_sha256(big_key, "Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(hex(hmac_sha256(big_key, "This is a test using a larger than block-size key and a larger than block-size "
                                 "data. The key needs to be hashed before being used by the HMAC algorithm.")) ==
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST_CASE("hmac_sha256 of parts is the HMAC of their concatenation, empty parts and keys included", "[wire]") {
  const std::string key = "job token";
  const auto whole = hmac_sha256(key, "dlaunch-server" "tag" "nonce-c" "nonce-s");
  const auto parts = hmac_sha256(key, {"dlaunch-server", "", "tag", "nonce-c", std::string_view(), "nonce-s"});
  CHECK(std::string(parts.begin(), parts.end()) == whole);
  // An empty key and message (a view with no pointer at all): RFC 2104's zero-padded key.
  const auto empty = hmac_sha256(std::string_view(), {std::string_view()});
  CHECK(hex(std::string(empty.begin(), empty.end())) ==
        "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
  CHECK(hex(sha256(std::string_view())) == hex(sha256("")));
}

TEST_CASE("hmac_sha256 agrees with OpenSSL for keys and messages of 0-200 bytes", "[wire]") {
  std::mt19937 rng(42);
  auto random_string = [&](size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  };
  for (size_t klen : {0, 1, 32, 63, 64, 65, 128, 200})
    for (size_t mlen = 0; mlen <= 200; ++mlen) {
      std::string k = random_string(klen), m = random_string(mlen);
      INFO("key " << klen << " bytes, message " << mlen << " bytes");
      REQUIRE(hmac_sha256(k, m) == openssl_hmac(k, m));
    }
}
