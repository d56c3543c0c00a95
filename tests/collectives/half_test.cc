// float16/bfloat16 conversions against the compiler's _Float16 and an
// independent nearest-bfloat16 search.
#include <random>

#include "collectives/half.h"
#include "collectives/reduce.h"
#include "tests/collectives/rank_threads.h"

using namespace dl::coll;

TEST_CASE("collectives: half_to_float matches _Float16 for all 65536 patterns", "[collectives]") {
  size_t bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 ref;
    uint16_t b = static_cast<uint16_t>(h);
    std::memcpy(&ref, &b, 2);
    float want = static_cast<float>(ref), got = half_to_float(b);
    if (std::isnan(want) ? !std::isnan(got) : std::memcmp(&want, &got, 4) != 0) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("collectives: float_to_half and float_to_bf16 round to nearest even", "[collectives]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  size_t bad_h = 0, bad_b = 0;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = bits(rng);
    if (i % 2) u = (u & 0x8fffffffu) | 0x30000000u;  // half the samples near the half range
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    _Float16 ref = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &ref, 2);
    if (float_to_half(f) != want) ++bad_h;
    if (std::isfinite(f) && std::fabs(f) < 3e38f && float_to_bf16(f) != test::bf16_nearest(f)) ++bad_b;
  }
  CHECK(bad_h == 0);
  CHECK(bad_b == 0);
  CHECK(std::isnan(half_to_float(float_to_half(NAN))));
  CHECK(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  CHECK(half_to_float(float_to_half(1e6f)) == INFINITY);
}

TEST_CASE("collectives: reduce kernels wrap integers and compute fp16 through float", "[collectives]") {
  int8_t a[3] = {127, -128, 5}, b[3] = {1, -1, -7};
  reduce_into(a, b, 3, DataType::kInt8, ReduceOp::kSum);
  CHECK(a[0] == -128);
  CHECK(a[1] == 127);
  CHECK(a[2] == -2);
  uint16_t h[2] = {float_to_half(1.5f), float_to_half(-2.0f)}, k[2] = {float_to_half(2.0f), float_to_half(3.0f)};
  reduce_into(h, k, 2, DataType::kFloat16, ReduceOp::kProd);
  CHECK(half_to_float(h[0]) == 3.0f);
  CHECK(half_to_float(h[1]) == -6.0f);
  int32_t v[2] = {7, -7};
  finish_avg(v, 2, DataType::kInt32, ReduceOp::kAvg, 2);
  CHECK(v[0] == 3);
  CHECK(v[1] == -3);
}
