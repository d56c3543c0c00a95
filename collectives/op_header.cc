#include "collectives/op_header.h"

namespace dl::coll {

const char* kind_name(OpKind k) {
  static const char* names[] = {"?", "broadcast", "all_reduce", "reduce", "all_gather", "all_gather_v",
                                "gather", "scatter", "reduce_scatter", "all_to_all", "barrier", "send", "recv"};
  auto i = static_cast<size_t>(k);
  return i < std::size(names) ? names[i] : "?";
}

std::string OpHeader::describe() const {
  if (magic != 0x31434c44) return "garbage (not a collectives header)";
  std::string s = std::string(kind_name(kind));
  if (kind == OpKind::kBarrier) return s + "() #" + std::to_string(seq);
  s += "(count=" + std::to_string(count) + ", " + dtype_name(dtype);
  if (kind == OpKind::kAllReduce || kind == OpKind::kReduce || kind == OpKind::kReduceScatter)
    s += std::string(", ") + op_name(op);
  if (root >= 0) s += ", root=" + std::to_string(root);
  if (kind == OpKind::kAllGatherV) s += ", counts hash=" + std::to_string(extra);
  return s + ") #" + std::to_string(seq);
}

}  // namespace dl::coll
