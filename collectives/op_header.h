#pragma once
// The per-operation header that catches mismatched calls. Before every
// collective each rank sends its header to rank+1 and compares the one from
// rank-1 with its own; point-to-point messages carry one before the data.
// Layout (native byte order; all ranks of a job share an architecture):
//   u32 magic "DLC1" | u8 kind | u8 dtype | u8 op | u8 0 | i32 root |
//   u64 sequence number | u64 count | u64 extra (hash of per-rank counts)
#include <cstdint>
#include <string>

#include "collectives/dtype.h"

namespace dl::coll {

enum class OpKind : uint8_t {
  kBroadcast = 1, kAllReduce, kReduce, kAllGather, kAllGatherV, kGather, kScatter,
  kReduceScatter, kAllToAll, kBarrier, kSend, kRecv,
};

const char* kind_name(OpKind k);

#pragma pack(push, 1)
struct OpHeader {
  uint32_t magic = 0x31434c44;  // "DLC1"
  OpKind kind{};
  DataType dtype{};
  ReduceOp op{};
  uint8_t pad = 0;
  int32_t root = -1;
  uint64_t seq = 0;
  uint64_t count = 0;
  uint64_t extra = 0;

  bool same_call(const OpHeader& o) const {
    return magic == o.magic && kind == o.kind && dtype == o.dtype && op == o.op && root == o.root &&
           seq == o.seq && count == o.count && extra == o.extra;
  }
  // "all_reduce(count=10, float32, sum) #4"
  std::string describe() const;
};
#pragma pack(pop)
static_assert(sizeof(OpHeader) == 36);

}  // namespace dl::coll
