#include "tests/collectives/checks.h"

#include <numeric>
#include <vector>

#include "tests/collectives/reference.h"

namespace dl::coll::test {
namespace {

struct Buf {
  std::vector<char> b;
  Buf(size_t count, DataType t) : b(count * dtype_size(t) + 1) {}
  void* p() { return b.data(); }
};

// Counts the elements of out[0..count) that differ from want(i).
template <class F>
size_t wrong(const void* out, size_t count, DataType t, F want) {
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i)
    if (get(out, i, t) != as_dtype(want(i), t)) ++bad;
  return bad;
}

}  // namespace

void check_reductions(Communicator& c, DataType t, ReduceOp op, size_t count) {
  const int n = c.size(), me = c.rank();
  Buf in(count, t), out(count, t), big(count * n, t);
  for (size_t i = 0; i < count; ++i) put(in.p(), i, t, input(me, i, t, op));
  auto ref = [&](size_t i) { return expected(n, i, t, op); };
  CTX("dtype " << dtype_name(t) << " op " << op_name(op) << " count " << count << " size " << n);
  c.all_reduce(in.p(), out.p(), count, t, op);
  RCHECK(wrong(out.p(), count, t, ref) == 0);
  RCHECK(wrong(in.p(), count, t, [&](size_t i) { return input(me, i, t, op); }) == 0);  // input untouched
  c.all_reduce(in.p(), in.p(), count, t, op);  // in place
  RCHECK(wrong(in.p(), count, t, ref) == 0);
  const int root = static_cast<int>(count % n);
  for (size_t i = 0; i < count; ++i) put(in.p(), i, t, input(me, i, t, op));
  c.reduce(in.p(), out.p(), count, t, op, root);
  if (me == root) RCHECK(wrong(out.p(), count, t, ref) == 0);
  RCHECK(wrong(in.p(), count, t, [&](size_t i) { return input(me, i, t, op); }) == 0);  // input untouched
  // reduce_scatter: rank r gets block r of a size n*count reduction.
  for (size_t i = 0; i < count * n; ++i) put(big.p(), i, t, input(me, i, t, op));
  c.reduce_scatter(big.p(), out.p(), count, t, op);
  RCHECK(wrong(out.p(), count, t, [&](size_t i) { return expected(n, me * count + i, t, op); }) == 0);
}

void check_movement(Communicator& c, DataType t, size_t count) {
  const int n = c.size(), me = c.rank();
  const ReduceOp op = ReduceOp::kSum;
  Buf buf(count, t), all(count * n, t), all2(count * n, t);
  auto val = [&](int r, size_t i) { return input(r, i, t, op); };
  CTX("dtype " << dtype_name(t) << " count " << count << " size " << n);
  const int root = static_cast<int>((count + 1) % n);
  for (size_t i = 0; i < count; ++i) put(buf.p(), i, t, me == root ? val(root, i) : 99);
  c.broadcast(buf.p(), count, t, root);
  RCHECK(wrong(buf.p(), count, t, [&](size_t i) { return val(root, i); }) == 0);
  for (size_t i = 0; i < count; ++i) put(buf.p(), i, t, val(me, i));
  c.all_gather(buf.p(), all.p(), count, t);
  RCHECK(wrong(all.p(), count * n, t, [&](size_t i) { return val(int(i / count), i % count); }) == 0);
  c.gather(buf.p(), all2.p(), count, t, root);
  if (me == root) RCHECK(wrong(all2.p(), count * n, t, [&](size_t i) { return val(int(i / count), i % count); }) == 0);
  // scatter: root's block j goes to rank j.
  for (size_t i = 0; i < count * n; ++i) put(all.p(), i, t, val(root, i));
  c.scatter(all.p(), buf.p(), count, t, root);
  RCHECK(wrong(buf.p(), count, t, [&](size_t i) { return val(root, me * count + i); }) == 0);
  // all_to_all: my block j is val(me, j*count + i); I receive val(j, me*count + i) in block j.
  for (size_t i = 0; i < count * n; ++i) put(all.p(), i, t, val(me, i));
  c.all_to_all(all.p(), all2.p(), count, t);
  RCHECK(wrong(all2.p(), count * n, t, [&](size_t i) { return val(int(i / count), me * count + i % count); }) == 0);
  c.all_to_all(all.p(), all.p(), count, t);  // in place
  RCHECK(wrong(all.p(), count * n, t, [&](size_t i) { return val(int(i / count), me * count + i % count); }) == 0);
  // all_gather_v with rank r contributing count + r elements.
  std::vector<size_t> counts(n);
  for (int r = 0; r < n; ++r) counts[r] = count + r;
  size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  Buf mine(count + me, t), v(total, t);
  for (size_t i = 0; i < count + me; ++i) put(mine.p(), i, t, val(me, i));
  c.all_gather_v(mine.p(), v.p(), counts, t);
  size_t at = 0, bad = 0;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < counts[r]; ++i, ++at) bad += get(v.p(), at, t) != as_dtype(val(r, i), t);
  RCHECK(bad == 0);
  // send/recv around the ring.
  if (n > 1) {
    Buf got(count, t);
    for (size_t i = 0; i < count; ++i) put(buf.p(), i, t, val(me, i));
    if (me % 2 == 0) {
      c.send(buf.p(), count, t, (me + 1) % n);
      c.recv(got.p(), count, t, (me + n - 1) % n);
    } else {
      c.recv(got.p(), count, t, (me + n - 1) % n);
      c.send(buf.p(), count, t, (me + 1) % n);
    }
    RCHECK(wrong(got.p(), count, t, [&](size_t i) { return val((me + n - 1) % n, i); }) == 0);
  }
  c.barrier();
}

}  // namespace dl::coll::test
