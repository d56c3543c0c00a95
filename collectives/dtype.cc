#include "collectives/dtype.h"

#include <utility>

#include "errors/error.h"

namespace dl::coll {

size_t dtype_size(DataType t) {
  switch (t) {
    case DataType::kInt8: case DataType::kUint8: return 1;
    case DataType::kFloat16: case DataType::kBFloat16: return 2;
    case DataType::kInt32: case DataType::kFloat32: return 4;
    case DataType::kInt64: case DataType::kFloat64: return 8;
  }
  throw UsageError("unknown collectives dtype " + std::to_string(static_cast<int>(t)));
}

const char* dtype_name(DataType t) {
  static const char* names[] = {"int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"};
  auto i = static_cast<size_t>(t);
  return i < std::size(names) ? names[i] : "invalid-dtype";
}

const char* op_name(ReduceOp op) {
  static const char* names[] = {"sum", "prod", "min", "max", "avg"};
  auto i = static_cast<size_t>(op);
  return i < std::size(names) ? names[i] : "invalid-op";
}

DataType parse_dtype(std::string_view s) {
  static const std::pair<std::string_view, DataType> table[] = {
      {"int8", DataType::kInt8},       {"char", DataType::kInt8},       {"uint8", DataType::kUint8},
      {"int32", DataType::kInt32},     {"int", DataType::kInt32},       {"int64", DataType::kInt64},
      {"float16", DataType::kFloat16}, {"half", DataType::kFloat16},    {"fp16", DataType::kFloat16},
      {"bfloat16", DataType::kBFloat16}, {"bf16", DataType::kBFloat16}, {"float32", DataType::kFloat32},
      {"float", DataType::kFloat32},   {"fp32", DataType::kFloat32},    {"float64", DataType::kFloat64},
      {"double", DataType::kFloat64},  {"fp64", DataType::kFloat64},
  };
  for (const auto& [name, t] : table)
    if (name == s) return t;
  throw UsageError("unknown dtype '" + std::string(s) +
                   "': use int8, uint8, int32, int64, float16, bfloat16, float32 or float64");
}

ReduceOp parse_op(std::string_view s) {
  for (int i = 0; i < kNumReduceOps; ++i)
    if (s == op_name(static_cast<ReduceOp>(i))) return static_cast<ReduceOp>(i);
  throw UsageError("unknown reduction op '" + std::string(s) + "': use sum, prod, min, max or avg");
}

}  // namespace dl::coll
