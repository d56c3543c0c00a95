#include "collectives/reduce.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "collectives/half.h"
#include "errors/error.h"

namespace dl::coll {
namespace {

struct Half { uint16_t bits; };
struct BF16 { uint16_t bits; };

template <class T> float to_f(T v) {
  if constexpr (std::is_same_v<T, Half>) return half_to_float(v.bits);
  else return bf16_to_float(v.bits);
}
template <class T> T from_f(float f) {
  if constexpr (std::is_same_v<T, Half>) return T{float_to_half(f)};
  else return T{float_to_bf16(f)};
}

// Integer arithmetic in the unsigned type of the same width wraps without UB.
template <class T> T apply(T a, T b, ReduceOp op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::kProd: return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case ReduceOp::kMin: return std::min(a, b);
      case ReduceOp::kMax: return std::max(a, b);
      default: return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    }
  } else {
    switch (op) {
      case ReduceOp::kProd: return a * b;
      case ReduceOp::kMin: return b < a ? b : a;
      case ReduceOp::kMax: return a < b ? b : a;
      default: return a + b;
    }
  }
}

template <class T>
void run_native(T* out, const T* a, const T* b, size_t n, ReduceOp op) {
  // One loop per op so the compiler vectorizes each.
  switch (op) {
    case ReduceOp::kProd: for (size_t i = 0; i < n; ++i) out[i] = apply(a[i], b[i], ReduceOp::kProd); break;
    case ReduceOp::kMin: for (size_t i = 0; i < n; ++i) out[i] = apply(a[i], b[i], ReduceOp::kMin); break;
    case ReduceOp::kMax: for (size_t i = 0; i < n; ++i) out[i] = apply(a[i], b[i], ReduceOp::kMax); break;
    default: for (size_t i = 0; i < n; ++i) out[i] = apply(a[i], b[i], ReduceOp::kSum); break;
  }
}

template <class T>
void run_16(T* out, const T* a, const T* b, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; ++i) out[i] = from_f<T>(apply(to_f(a[i]), to_f(b[i]), op));
}

template <class T>
void avg_native(T* p, size_t n, int k) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(k));
}

}  // namespace

void reduce_to(void* out, const void* a, const void* b, size_t n, DataType t, ReduceOp op) {
  switch (t) {
    case DataType::kInt8: return run_native((int8_t*)out, (const int8_t*)a, (const int8_t*)b, n, op);
    case DataType::kUint8: return run_native((uint8_t*)out, (const uint8_t*)a, (const uint8_t*)b, n, op);
    case DataType::kInt32: return run_native((int32_t*)out, (const int32_t*)a, (const int32_t*)b, n, op);
    case DataType::kInt64: return run_native((int64_t*)out, (const int64_t*)a, (const int64_t*)b, n, op);
    case DataType::kFloat32: return run_native((float*)out, (const float*)a, (const float*)b, n, op);
    case DataType::kFloat64: return run_native((double*)out, (const double*)a, (const double*)b, n, op);
    case DataType::kFloat16: return run_16((Half*)out, (const Half*)a, (const Half*)b, n, op);
    case DataType::kBFloat16: return run_16((BF16*)out, (const BF16*)a, (const BF16*)b, n, op);
  }
  throw UsageError("reduce: unknown dtype");
}

void reduce_into(void* dst, const void* src, size_t n, DataType t, ReduceOp op) {
  reduce_to(dst, dst, src, n, t, op);
}

void finish_avg(void* buf, size_t n, DataType t, ReduceOp op, int k) {
  if (op != ReduceOp::kAvg || k == 1) return;
  switch (t) {
    case DataType::kInt8: return avg_native((int8_t*)buf, n, k);
    case DataType::kUint8: return avg_native((uint8_t*)buf, n, k);
    case DataType::kInt32: return avg_native((int32_t*)buf, n, k);
    case DataType::kInt64: return avg_native((int64_t*)buf, n, k);
    case DataType::kFloat32: return avg_native((float*)buf, n, k);
    case DataType::kFloat64: return avg_native((double*)buf, n, k);
    case DataType::kFloat16: {
      auto* p = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < n; ++i) p[i] = float_to_half(half_to_float(p[i]) / static_cast<float>(k));
      return;
    }
    case DataType::kBFloat16: {
      auto* p = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < n; ++i) p[i] = float_to_bf16(bf16_to_float(p[i]) / static_cast<float>(k));
      return;
    }
  }
}

}  // namespace dl::coll
