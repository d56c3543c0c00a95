// hmac_bench: HMAC-SHA256 speed, dlaunch's (wire/sha256.cc, nettle's)
// against OpenSSL's libcrypto, on what the token handshake hashes (~100
// bytes) and on 1 MiB; checks that both give the same digests (CPU time per
// HMAC, median of the rounds). (hmac_once.cc is the start-up half.)
//
//   hmac_bench [rounds]
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "wire/sha256.h"

namespace {

// This thread's CPU time in nanoseconds: on a shared machine, wall time
// also counts the other processes' turns.
double cpu_ns() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// Median CPU nanoseconds per call of `f` over `rounds` rounds of about 30 ms.
double time_ns(const std::function<void()>& f, int rounds) {
  size_t n = 1;
  for (;;) {
    const double t0 = cpu_ns();
    for (size_t i = 0; i < n; ++i) f();
    if (cpu_ns() - t0 > 10e6) break;
    n *= 2;
  }
  n *= 3;
  std::vector<double> per;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = cpu_ns();
    for (size_t i = 0; i < n; ++i) f();
    per.push_back((cpu_ns() - t0) / static_cast<double>(n));
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

std::string openssl_hmac(const std::string& key, const std::string& msg) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const std::string key(32, 'k');
  int wrong = 0;
  std::printf("%-10s %9s %11s %11s %7s %10s %10s\n", "#message", "bytes", "ours_us", "openssl_us", "ratio",
              "ours_MBps", "openssl_MBps");
  for (size_t bytes : {size_t{100}, size_t{1} << 20}) {
    std::string msg(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) msg[i] = static_cast<char>(i * 131 + 7);
    if (dl::wire::hmac_sha256(key, msg) != openssl_hmac(key, msg)) {
      std::printf("# WRONG: the digests of %zu bytes differ\n", bytes);
      ++wrong;
    }
    const double o = time_ns([&] { (void)dl::wire::hmac_sha256(key, msg); }, rounds);
    const double n = time_ns([&] { (void)openssl_hmac(key, msg); }, rounds);
    std::printf("%-10s %9zu %11.3f %11.3f %7.2f %10.0f %10.0f\n", bytes == 100 ? "handshake" : "1MiB", bytes, o / 1e3,
                n / 1e3, n / o, bytes / o * 1e3, bytes / n * 1e3);
  }
  return wrong ? 1 : 0;
}
