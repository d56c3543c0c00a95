#pragma once
// Element-wise reduction kernels used by every algorithm and transport.
#include <cstddef>

#include "collectives/dtype.h"

namespace dl::coll {

// dst[i] = dst[i] op src[i] for i < count. kAvg reduces as kSum (see
// finish_avg). Integer sums and products wrap around (two's complement);
// float16/bfloat16 are computed in float and rounded back.
void reduce_into(void* dst, const void* src, size_t count, DataType t, ReduceOp op);

// out[i] = a[i] op b[i]; out may alias a or b.
void reduce_to(void* out, const void* a, const void* b, size_t count, DataType t, ReduceOp op);

// For kAvg: buf[i] /= n (integer division for integer types); no-op otherwise.
void finish_avg(void* buf, size_t count, DataType t, ReduceOp op, int n);

}  // namespace dl::coll
