#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/op_header.h"
#include "errors/error.h"
#include "collectives/reduce.h"
#include "collectives/ring.h"

namespace dl::coll::algo {

void all_reduce(Context& c, void* buf, size_t count, DataType t, ReduceOp op, const void* in) {
  if (c.size() > 1 && count > 0 && !all_reduce_uses_doubling(c, count, t)) {
    all_reduce_ring(c, buf, count, t, op, in);
  } else {
    if (in && in != buf && count) std::memcpy(buf, in, count * dtype_size(t));
    if (c.size() > 1 && count > 0) all_reduce_doubling(c, buf, count, t, op);
  }
  finish_avg(buf, count, t, op, c.size());
}

bool all_reduce_uses_doubling(const Context& c, size_t count, DataType t) {
  return c.size() > 1 && count > 0 &&
         (count < size_t(c.size()) || count * dtype_size(t) < c.tuning().allreduce_ring_bytes);
}

namespace {

// The doubling's messages. With c.header() set, each one travels as
// [op header, padded to kHead | data] and the receiver checks the header
// before it waits for the data: the signature check costs no round of its
// own, which is most of a small all_reduce's latency between hosts.
class Messages {
 public:
  static constexpr size_t kHead = 64;  // keeps the data 64-byte aligned
  Messages(Context& c, size_t bytes) : c_(c), h_(c.header()), bytes_(bytes), head_(h_ ? kHead : 0) {
    rbuf_ = c.temp(0, head_ + bytes);
    if (h_) {
      sbuf_ = c.temp(1, head_ + bytes);
      std::memset(sbuf_, 0, kHead);
      std::memcpy(sbuf_, h_, sizeof *h_);
    }
  }
  // Received data lands here (after run()).
  char* received() const { return rbuf_ + head_; }
  // Sends `data` to `to` while receiving from `from` (either -1: none).
  void run(int to, const void* data, int from) {
    Transfer x[2];
    int k = 0;
    if (to >= 0) {
      if (h_) std::memcpy(sbuf_ + head_, data, bytes_);
      x[k++] = Transfer::sending(c_.pair(to), h_ ? sbuf_ : data, head_ + bytes_);
    }
    if (from >= 0) {
      x[k] = Transfer::receiving(c_.pair(from), rbuf_, head_ + bytes_);
      if (h_) {
        x[k].notify_bytes = sizeof(OpHeader);
        x[k].on_recv = [this, from, checked = false](size_t, size_t upto) mutable {
          if (checked || upto < sizeof(OpHeader)) return;
          checked = true;
          check(from);
        };
      }
      ++k;
    }
    c_.run(std::span<Transfer>(x, k));
  }

 private:
  void check(int from) const {
    OpHeader got;
    std::memcpy(&got, rbuf_, sizeof got);
    if (got.same_call(*h_)) return;
    throw UsageError("collective mismatch: rank " + std::to_string(c_.rank()) + " called " + h_->describe() +
                     " but rank " + std::to_string(from) + " (" + c_.pair(from).peer().describe() + ") called " +
                     (got.magic == h_->magic ? got.describe() : std::string("something else")) +
                     "; every rank must issue the same collectives in the same order with the same count, dtype, "
                     "op and root");
  }
  Context& c_;
  const OpHeader* h_;
  size_t bytes_, head_;
  char* rbuf_ = nullptr;
  char* sbuf_ = nullptr;
};

}  // namespace

// Recursive doubling over the largest power of two p2 <= p. The first 2r
// ranks (r = p - p2) fold in pairs first: even ranks hand their data to the
// odd neighbour and get the result back at the end.
void all_reduce_doubling(Context& c, void* buf, size_t count, DataType t, ReduceOp op) {
  const int p = c.size(), me = c.rank();
  const size_t bytes = count * dtype_size(t);
  int p2 = 1;
  while (p2 * 2 <= p) p2 *= 2;
  const int r = p - p2;
  Messages m(c, bytes);
  int vr;  // rank among the p2 participants, -1 when folded away
  if (me < 2 * r) {
    if (me % 2 == 0) {
      m.run(me + 1, buf, -1);
      vr = -1;
    } else {
      m.run(-1, nullptr, me - 1);
      reduce_into(buf, m.received(), count, t, op);
      vr = me / 2;
    }
  } else {
    vr = me - r;
  }
  if (vr >= 0) {
    for (int mask = 1; mask < p2; mask <<= 1) {
      const int pv = vr ^ mask;
      const int partner = pv < r ? pv * 2 + 1 : pv + r;
      m.run(partner, buf, partner);
      // Lower rank's data first, so every rank computes the same expression.
      if (pv < vr) reduce_to(buf, m.received(), buf, count, t, op);
      else reduce_into(buf, m.received(), count, t, op);
    }
  }
  if (me < 2 * r) {
    if (me % 2 == 1) {
      m.run(me - 1, buf, -1);
    } else {
      m.run(-1, nullptr, me + 1);
      std::memcpy(buf, m.received(), bytes);
    }
  }
}

void all_reduce_ring(Context& c, void* buf, size_t count, DataType t, ReduceOp op, const void* in) {
  Segments seg{count, size_t(c.size())};
  ring_reduce_scatter(c, static_cast<char*>(buf), seg, t, op, static_cast<const char*>(in));
  ring_all_gather(c, static_cast<char*>(buf), seg, dtype_size(t));
}

}  // namespace dl::coll::algo
