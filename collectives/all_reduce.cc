#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/reduce.h"
#include "collectives/ring.h"

namespace dl::coll::algo {

void all_reduce(Context& c, void* buf, size_t count, DataType t, ReduceOp op) {
  if (c.size() > 1 && count > 0) {
    if (count * dtype_size(t) < c.tuning().allreduce_ring_bytes || count < size_t(c.size()))
      all_reduce_doubling(c, buf, count, t, op);
    else
      all_reduce_ring(c, buf, count, t, op);
  }
  finish_avg(buf, count, t, op, c.size());
}

// Recursive doubling over the largest power of two p2 <= p. The first 2r
// ranks (r = p - p2) fold in pairs first: even ranks hand their data to the
// odd neighbour and get the result back at the end.
void all_reduce_doubling(Context& c, void* buf, size_t count, DataType t, ReduceOp op) {
  const int p = c.size(), me = c.rank();
  const size_t bytes = count * dtype_size(t);
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  const int r = p - p2;
  char* tmp = c.temp(0, bytes);
  int vr;  // rank among the p2 participants, -1 when folded away
  if (me < 2 * r) {
    if (me % 2 == 0) {
      c.send(me + 1, buf, bytes);
      vr = -1;
    } else {
      c.recv(me - 1, tmp, bytes);
      reduce_into(buf, tmp, count, t, op);
      vr = me / 2;
    }
  } else {
    vr = me - r;
  }
  if (vr >= 0) {
    for (int mask = 1; mask < p2; mask <<= 1) {
      const int pv = vr ^ mask;
      const int partner = pv < r ? pv * 2 + 1 : pv + r;
      c.sendrecv(partner, buf, bytes, partner, tmp, bytes);
      // Lower rank's data first, so every rank computes the same expression.
      if (pv < vr) reduce_to(buf, tmp, buf, count, t, op);
      else reduce_into(buf, tmp, count, t, op);
    }
  }
  if (me < 2 * r) {
    if (me % 2 == 1) c.send(me - 1, buf, bytes);
    else c.recv(me + 1, buf, bytes);
  }
}

void all_reduce_ring(Context& c, void* buf, size_t count, DataType t, ReduceOp op) {
  Segments seg{count, size_t(c.size())};
  ring_reduce_scatter(c, static_cast<char*>(buf), seg, t, op);
  ring_all_gather(c, static_cast<char*>(buf), seg, dtype_size(t));
}

}  // namespace dl::coll::algo
