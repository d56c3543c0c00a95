#pragma once
// The collective algorithms, written against Context/Pair only (no
// transport). Buffers are host memory. Each function is called by every rank
// of the context with matching arguments (the communicator checks that first).
// On failure they throw the Pair's RemoteError or a TimeoutError; the
// communicator then aborts. Bytes on the wire per algorithm are in
// docs/collectives.md.
#include <cstddef>
#include <vector>

#include "collectives/context.h"
#include "collectives/dtype.h"

namespace dl::coll::algo {

// Into buf (count elements) from `in` (nullptr or buf: in place). Recursive
// doubling (with a fold for non-powers of two) below
// tuning().allreduce_ring_bytes, else ring reduce-scatter + ring all-gather,
// which reads `in` directly (no copy into buf first). Applies avg's division.
void all_reduce(Context& c, void* buf, size_t count, DataType t, ReduceOp op, const void* in = nullptr);
// With c.header() set, every doubling message carries the op header and the
// receiver checks it (the communicator then skips its separate check).
void all_reduce_doubling(Context& c, void* buf, size_t count, DataType t, ReduceOp op);
// True when all_reduce of this many elements takes recursive doubling.
bool all_reduce_uses_doubling(const Context& c, size_t count, DataType t);
void all_reduce_ring(Context& c, void* buf, size_t count, DataType t, ReduceOp op, const void* in = nullptr);

// buf holds `bytes` at root; on return every rank holds them. Binomial tree
// below tuning().bcast_chain_bytes, else a pipelined chain.
void broadcast(Context& c, void* buf, size_t bytes, int root);

// Reduces `in` of every rank into `out` at root (out unused elsewhere; may
// equal in). Binomial tree, or ring reduce-scatter + gather when large.
void reduce(Context& c, const void* in, void* out, size_t count, DataType t, ReduceOp op, int root);

// in: size()*count elements; out: count elements, the reduction of block
// rank() (out may be in + rank()*count). Ring.
void reduce_scatter(Context& c, const void* in, void* out, size_t count, DataType t, ReduceOp op);

// out receives every rank's block, rank r's bytes[r] bytes at offset
// sum(bytes[0..r)). `in` (bytes[rank()] bytes) may already be at its place in
// out. Ring.
void all_gather_v(Context& c, const void* in, void* out, const std::vector<size_t>& bytes);

// Root's out receives rank r's bytes[r] bytes at offset sum(bytes[0..r)).
void gather_v(Context& c, const void* in, void* out, const std::vector<size_t>& bytes, int root);

// Rank r receives `bytes` bytes from offset r*bytes of root's in.
void scatter(Context& c, const void* in, void* out, size_t bytes, int root);

// Block j (bytes each) of in goes to rank j's block rank(); in may equal out.
void all_to_all(Context& c, const void* in, void* out, size_t bytes);

// Dissemination barrier: ceil(log2 size) rounds of one byte.
void barrier(Context& c);

// Segment layout of `count` elements over `parts` parts: part i starts at
// offset(i) and has size(i) elements (the first count%parts get one more).
struct Segments {
  size_t count, parts;
  size_t size(size_t i) const { return count / parts + (i < count % parts ? 1 : 0); }
  size_t offset(size_t i) const { return i * (count / parts) + std::min(i, count % parts); }
};

}  // namespace dl::coll::algo
