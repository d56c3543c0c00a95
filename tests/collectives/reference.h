#pragma once
// The independent reference for collective tests: a dtype encoder/decoder
// that does not use collectives/half.h, inputs chosen so every reduction is
// exact, the expected results computed from them, and RCHECK/CTX, which
// throw (thread-safe, unlike Catch2's macros) so they work in rank threads
// and in rank processes (tests/collectives_mh) alike.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/dtype.h"

namespace dl::coll::test {

// Rank threads and processes use RCHECK, which throws
// (failing that rank, and through its closed connections the others), and
// CTX, which adds context to the message. The main thread reports per rank.
inline thread_local std::vector<std::string> tl_context;
struct Ctx {
  explicit Ctx(std::string s) { tl_context.push_back(std::move(s)); }
  ~Ctx() { tl_context.pop_back(); }
};
inline std::string context_string() {
  std::string s;
  for (auto& c : tl_context) s += " [" + c + "]";
  return s;
}
#define DLC_CAT2(a, b) a##b
#define DLC_CAT(a, b) DLC_CAT2(a, b)
#define CTX(stream) ::dl::coll::test::Ctx DLC_CAT(ctx_, __LINE__)((std::ostringstream() << stream).str())
#define RCHECK(cond)                                                                                       \
  do {                                                                                                     \
    if (!(cond))                                                                                           \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": check failed: " \
                               #cond + ::dl::coll::test::context_string());                                \
  } while (0)

// --- independent dtype codec (does not use collectives/half.h) ---------------

inline uint16_t bf16_nearest(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t lo = bits & 0xffff0000u, hi = lo + 0x10000u;
  float flo, fhi;
  std::memcpy(&flo, &lo, 4);
  std::memcpy(&fhi, &hi, 4);
  double dlo = std::fabs(double(f) - flo), dhi = std::fabs(double(fhi) - f);
  if (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1) == 0)) return uint16_t(lo >> 16);
  return uint16_t(hi >> 16);
}

// Stores v (already exactly representable or rounded as the dtype's own
// arithmetic would) into element i of buf.
inline void put(void* buf, size_t i, DataType t, double v) {
  switch (t) {
    case DataType::kInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(static_cast<int64_t>(v)); break;
    case DataType::kUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
    case DataType::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(static_cast<int64_t>(v)); break;
    case DataType::kInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case DataType::kFloat16: { _Float16 h = static_cast<_Float16>(static_cast<float>(v)); std::memcpy(static_cast<char*>(buf) + 2 * i, &h, 2); break; }
    case DataType::kBFloat16: { uint16_t b = bf16_nearest(static_cast<float>(v)); std::memcpy(static_cast<char*>(buf) + 2 * i, &b, 2); break; }
    case DataType::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(buf)[i] = v; break;
  }
}

inline double get(const void* buf, size_t i, DataType t) {
  switch (t) {
    case DataType::kInt8: return static_cast<const int8_t*>(buf)[i];
    case DataType::kUint8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(buf)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::kFloat16: { _Float16 h; std::memcpy(&h, static_cast<const char*>(buf) + 2 * i, 2); return static_cast<double>(h); }
    case DataType::kBFloat16: { uint16_t b; std::memcpy(&b, static_cast<const char*>(buf) + 2 * i, 2); uint32_t bits = uint32_t(b) << 16; float f; std::memcpy(&f, &bits, 4); return f; }
    case DataType::kFloat32: return static_cast<const float*>(buf)[i];
    case DataType::kFloat64: return static_cast<const double*>(buf)[i];
  }
  return 0;
}

inline bool is_float(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64;
}

// Input value of element i on `rank`, small enough that every reduction
// over 7 ranks is exact in every dtype (prod may wrap int8, identically).
inline double input(int rank, size_t i, DataType t, ReduceOp op) {
  const bool uns = t == DataType::kUint8;
  switch (op) {
    case ReduceOp::kProd: { static const double v[] = {1, 2, -1}; return uns ? 1 + (rank + i) % 2 : v[(rank + i) % 3]; }
    case ReduceOp::kMin: case ReduceOp::kMax: return double((rank * 5 + i * 13) % 17) - (uns ? 0 : 8);
    default: return double((rank * 7 + i * 3) % 11) - (uns ? 0 : 5);
  }
}

// The reduction of input(r, i) over ranks 0..n-1, rounded as dtype t would.
inline double expected(int n, size_t i, DataType t, ReduceOp op) {
  double acc = input(0, i, t, op);
  for (int r = 1; r < n; ++r) {
    double v = input(r, i, t, op);
    if (op == ReduceOp::kProd) acc *= v;
    else if (op == ReduceOp::kMin) acc = std::min(acc, v);
    else if (op == ReduceOp::kMax) acc = std::max(acc, v);
    else acc += v;
  }
  if (op == ReduceOp::kAvg) {
    if (!is_float(t)) return static_cast<double>(static_cast<int64_t>(acc) / n);
    if (t == DataType::kFloat64) return acc / n;
    return static_cast<float>(acc) / static_cast<float>(n);  // fp32 division, then the dtype's rounding in put()
  }
  return acc;
}

// expected() stored and read back through the dtype (wraps ints, rounds floats).
inline double as_dtype(double v, DataType t) {
  char b[8];
  put(b, 0, t, v);
  return get(b, 0, t);
}

}  // namespace dl::coll::test
