#pragma once
// Element types and reduction operators of the collectives, with their sizes
// and names. The numeric values are part of the C API (dlcoll.h) and of the
// per-operation header on the wire: never renumber them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dl::coll {

enum class DataType : uint8_t {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kInt64 = 3,
  kFloat16 = 4, kBFloat16 = 5, kFloat32 = 6, kFloat64 = 7,
};
inline constexpr int kNumDataTypes = 8;

// avg is sum followed by a division by the group size (integer division for
// integer types, like NCCL).
enum class ReduceOp : uint8_t { kSum = 0, kProd = 1, kMin = 2, kMax = 3, kAvg = 4 };
inline constexpr int kNumReduceOps = 5;

// Bytes per element.
size_t dtype_size(DataType t);
// "int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64".
const char* dtype_name(DataType t);
// "sum", "prod", "min", "max", "avg".
const char* op_name(ReduceOp op);
// Parses a name above (also nccl-tests' short forms: half, bf16, float, double,
// int, char, uint8...); throws UsageError listing the valid names.
DataType parse_dtype(std::string_view s);
ReduceOp parse_op(std::string_view s);

}  // namespace dl::coll
