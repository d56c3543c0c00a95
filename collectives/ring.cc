#include "collectives/ring.h"

#include <algorithm>

#include "collectives/reduce.h"

namespace dl::coll::algo {

static size_t mod(long a, long p) { return static_cast<size_t>(((a % p) + p) % p); }

void ring_reduce_scatter(Context& c, char* buf, const Segments& seg, DataType t, ReduceOp op, const char* src) {
  const long p = c.size(), me = c.rank();
  const size_t esz = dtype_size(t);
  const int right = static_cast<int>(mod(me + 1, p)), left = static_cast<int>(mod(me - 1, p));
  if (src == nullptr) src = buf;
  // Incoming bytes land in a window of one reduce chunk, reduced as soon as it
  // is full and then refilled: it stays in cache instead of streaming a
  // segment-sized temporary through memory twice.
  const size_t win = std::max<size_t>(1, c.tuning().reduce_chunk_bytes / esz) * esz;
  char* tmp = c.temp(0, std::min(win, seg.size(0) * esz));
  for (long s = 0; s < p - 1; ++s) {
    const size_t out = mod(me - s - 1, p), in = mod(me - s - 2, p);
    // Step 0 sends this rank's own data; later steps forward what the
    // previous step reduced into buf.
    const char* from = (s == 0 ? src : buf) + seg.offset(out) * esz;
    char* dst = buf + seg.offset(in) * esz;
    const char* mine = src + seg.offset(in) * esz;
    Transfer x[2] = {Transfer::sending(c.pair(right), from, seg.size(out) * esz),
                     Transfer::receiving(c.pair(left), tmp, seg.size(in) * esz)};
    x[1].window = win;
    // Window boundaries and the end fall on whole elements (win and the
    // segment are multiples of esz).
    x[1].on_recv = [&](size_t lo, size_t hi) {
      reduce_to(dst + lo, mine + lo, tmp + lo % win, (hi - lo) / esz, t, op);
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
