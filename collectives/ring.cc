#include "collectives/ring.h"

#include "collectives/reduce.h"

namespace dl::coll::algo {

static size_t mod(long a, long p) { return static_cast<size_t>(((a % p) + p) % p); }

void ring_reduce_scatter(Context& c, char* buf, const Segments& seg, DataType t, ReduceOp op) {
  const long p = c.size(), me = c.rank();
  const size_t esz = dtype_size(t);
  const int right = static_cast<int>(mod(me + 1, p)), left = static_cast<int>(mod(me - 1, p));
  char* tmp = c.temp(0, seg.size(0) * esz);
  for (long s = 0; s < p - 1; ++s) {
    const size_t out = mod(me - s - 1, p), in = mod(me - s - 2, p);
    char* dst = buf + seg.offset(in) * esz;
    size_t reduced = 0;  // elements of the incoming segment already reduced
    Transfer x[2] = {Transfer::sending(c.pair(right), buf + seg.offset(out) * esz, seg.size(out) * esz),
                     Transfer::receiving(c.pair(left), tmp, seg.size(in) * esz)};
    x[1].notify_bytes = c.tuning().reduce_chunk_bytes;
    x[1].on_recv = [&](size_t, size_t to) {
      size_t upto = to / esz;
      reduce_into(dst + reduced * esz, tmp + reduced * esz, upto - reduced, t, op);
      reduced = upto;
    };
    c.run(std::span<Transfer>(x, 2));
  }
}

void ring_all_gather(Context& c, char* buf, const Segments& seg, size_t esz) {
  const long p = c.size(), me = c.rank();
  const int right = static_cast<int>(mod(me + 1, p)), left = static_cast<int>(mod(me - 1, p));
  for (long s = 0; s < p - 1; ++s) {
    const size_t out = mod(me - s, p), in = mod(me - s - 1, p);
    c.sendrecv(right, buf + seg.offset(out) * esz, seg.size(out) * esz, left, buf + seg.offset(in) * esz,
               seg.size(in) * esz);
  }
}

}  // namespace dl::coll::algo
