#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/reduce.h"
#include "collectives/ring.h"

namespace dl::coll::algo {
namespace {

// Binomial tree towards root: log2(p) rounds of the whole buffer.
void reduce_tree(Context& c, char* work, size_t count, DataType t, ReduceOp op, int root) {
  const int p = c.size(), vr = (c.rank() - root + p) % p;
  const size_t bytes = count * dtype_size(t);
  char* tmp = c.temp(0, bytes);
  for (int mask = 1; mask < p; mask <<= 1) {
    if (vr & mask) {
      c.send((vr - mask + root) % p, work, bytes);
      return;
    }
    if (vr + mask < p) {
      c.recv((vr + mask + root) % p, tmp, bytes);
      reduce_into(work, tmp, count, t, op);
    }
  }
}

// Ring reduce-scatter, then every rank sends its reduced segment to root.
void reduce_ring(Context& c, char* work, size_t count, DataType t, ReduceOp op, int root) {
  const size_t esz = dtype_size(t);
  Segments seg{count, size_t(c.size())};
  ring_reduce_scatter(c, work, seg, t, op);
  std::vector<Transfer> x;
  if (c.rank() != root) {
    x.push_back(Transfer::sending(c.pair(root), work + seg.offset(c.rank()) * esz, seg.size(c.rank()) * esz));
  } else {
    for (int j = 0; j < c.size(); ++j)
      if (j != root) x.push_back(Transfer::receiving(c.pair(j), work + seg.offset(j) * esz, seg.size(j) * esz));
  }
  c.run(x);
}

}  // namespace

void reduce(Context& c, const void* in, void* out, size_t count, DataType t, ReduceOp op, int root) {
  const size_t bytes = count * dtype_size(t);
  char* work = c.rank() == root ? static_cast<char*>(out) : c.temp(1, bytes);
  if (work != in && bytes) std::memcpy(work, in, bytes);
  if (c.size() > 1 && count > 0) {
    if (bytes < c.tuning().reduce_ring_bytes || count < size_t(c.size())) reduce_tree(c, work, count, t, op, root);
    else reduce_ring(c, work, count, t, op, root);
  }
  if (c.rank() == root) finish_avg(out, count, t, op, c.size());
}

void reduce_scatter(Context& c, const void* in, void* out, size_t count, DataType t, ReduceOp op) {
  const size_t esz = dtype_size(t), p = c.size();
  char* work = c.temp(1, p * count * esz);
  if (count) std::memcpy(work, in, p * count * esz);
  if (p > 1 && count > 0) ring_reduce_scatter(c, work, Segments{p * count, p}, t, op);
  if (count) std::memmove(out, work + c.rank() * count * esz, count * esz);
  finish_avg(out, count, t, op, c.size());
}

}  // namespace dl::coll::algo
