#pragma once
// The two halves of the bandwidth-optimal ring, shared by all_reduce, reduce,
// reduce_scatter and all_gather. Rank r sends to r+1 and receives from r-1.
#include "collectives/algorithms.h"

namespace dl::coll::algo {

// After p-1 steps, segment rank() of buf holds the reduction of that segment
// over all ranks (other segments hold partial sums). Received data is reduced
// while the rest of the segment is still arriving. `src`, when not null, is
// this rank's input (same layout as buf) and buf only receives results, so an
// out-of-place all_reduce needs no copy; segment rank()-1 of buf is then left
// unwritten (the all-gather fills it).
void ring_reduce_scatter(Context& c, char* buf, const Segments& seg, DataType t, ReduceOp op,
                         const char* src = nullptr);

// Given segment rank() of buf, fills every other segment from the ring.
void ring_all_gather(Context& c, char* buf, const Segments& seg, size_t elem_size);

}  // namespace dl::coll::algo
