// hmac_bench: HMAC-SHA256 speed, wire/sha256.cc against nettle's, on what
// the token handshake hashes (~100 bytes) and on 1 MiB; checks that both
// give the same digests (CPU time per HMAC, median of the rounds). (hmac_once.cc is the start-up half.)
//
//   hmac_bench [rounds]
#include <nettle/hmac.h>

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

std::string nettle_hmac(const std::string& key, const std::string& msg) {
  hmac_sha256_ctx ctx;
  hmac_sha256_set_key(&ctx, key.size(), reinterpret_cast<const uint8_t*>(key.data()));
  hmac_sha256_update(&ctx, msg.size(), reinterpret_cast<const uint8_t*>(msg.data()));
  std::string out(SHA256_DIGEST_SIZE, '\0');
  hmac_sha256_digest(&ctx, out.size(), reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const std::string key(32, 'k');
  int wrong = 0;
  std::printf("%-10s %9s %11s %11s %7s %10s %10s\n", "#message", "bytes", "ours_us", "nettle_us", "ratio", "ours_MBps",
              "nettle_MBps");
  for (size_t bytes : {size_t{100}, size_t{1} << 20}) {
    std::string msg(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) msg[i] = static_cast<char>(i * 131 + 7);
    if (dl::wire::hmac_sha256(key, msg) != nettle_hmac(key, msg)) {
      std::printf("# WRONG: the digests of %zu bytes differ\n", bytes);
      ++wrong;
    }
    const double o = time_ns([&] { (void)dl::wire::hmac_sha256(key, msg); }, rounds);
    const double n = time_ns([&] { (void)nettle_hmac(key, msg); }, rounds);
    std::printf("%-10s %9zu %11.3f %11.3f %7.2f %10.0f %10.0f\n", bytes == 100 ? "handshake" : "1MiB", bytes, o / 1e3,
                n / 1e3, n / o, bytes / o * 1e3, bytes / n * 1e3);
  }
  return wrong ? 1 : 0;
}
