#pragma once
// The per-communicator checks shared by the thread-rank tests
// (collectives_test.cc) and the multi-host check program
// (tests/collectives_mh/check_main.cc): every collective against the
// reference of reference.h. They throw (RCHECK) on the first wrong result.
#include <cstddef>

#include "collectives/communicator.h"

namespace dl::coll::test {

inline constexpr DataType kTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,
                                      DataType::kInt64,   DataType::kFloat16,  DataType::kBFloat16,
                                      DataType::kFloat32, DataType::kFloat64};
inline constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kAvg};

// all_reduce (out of place and in place), reduce (input left untouched) and
// reduce_scatter of `count` elements per rank.
void check_reductions(Communicator& c, DataType t, ReduceOp op, size_t count);
// broadcast, all_gather, gather, scatter, all_to_all (both forms),
// all_gather_v (rank r gives count + r), send/recv around the ring, barrier.
void check_movement(Communicator& c, DataType t, size_t count);

}  // namespace dl::coll::test
