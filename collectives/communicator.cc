#include "collectives/communicator.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/op_header.h"
#include "collectives/peer_setup.h"
#include "collectives/shm/arena.h"
#include "errors/error.h"

namespace dl::coll {

struct Communicator::Op {
  OpHeader h;
  int peer = -1;  // send/recv only
};

Communicator::Communicator(rdzv::Store& store, int rank, int size, Options options)
    : Communicator(std::shared_ptr<rdzv::Store>(&store, [](rdzv::Store*) {}), rank, size, std::move(options)) {}

Communicator::Communicator(std::shared_ptr<rdzv::Store> store, int rank, int size, Options options)
    : store_(std::move(store)), rank_(rank), size_(size), opt_(std::move(options)),
      p2p_sent_(size), p2p_recvd_(size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw UsageError("collectives: rank " + std::to_string(rank) + " is not within a world of size " +
                     std::to_string(size));
  pairs_ = setup_pairs(*store_, rank_, size_, opt_, &arena_);
  for (auto& p : pairs_) raw_pairs_.push_back(p.get());
  exec_ = std::make_unique<Executor>();
}

Communicator::~Communicator() {
  exec_.reset();  // finishes queued work first
}

const char* Communicator::transport_to(int r) const {
  return r == rank_ || r < 0 || r >= size_ ? "self" : pairs_[r]->transport();
}

std::unique_ptr<Communicator> Communicator::new_group(const std::vector<int>& ranks) {
  std::string list;
  int me = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size_)
      throw UsageError("new_group: rank " + std::to_string(ranks[i]) + " is not in this communicator of size " +
                       std::to_string(size_));
    if (ranks[i] == rank_) me = static_cast<int>(i);
    list += (i ? "." : "") + std::to_string(ranks[i]);
  }
  if (me < 0) return nullptr;
  Options o = opt_;
  o.prefix = opt_.prefix + "/g" + list + "#" + std::to_string(groups_made_[list]++);
  return std::make_unique<Communicator>(store_, me, static_cast<int>(ranks.size()), o);
}

void Communicator::shutdown_pairs() {
  if (arena_) arena_->abort();
  for (auto& p : pairs_)
    if (p) p->shutdown();
}

void Communicator::abort(const std::string& why) {
  {
    std::lock_guard lk(broken_mu_);
    if (broken_.empty()) broken_ = why;
  }
  shutdown_pairs();
}

WorkPtr Communicator::submit(Op op, Body body, bool async) {
  if (!async) {
    exec_->run_inline([&] { execute(op, body); });
    return nullptr;
  }
  auto w = std::make_shared<Work>(op.h.describe() + " on rank " + std::to_string(rank_));
  exec_->enqueue(w, [this, op, body = std::move(body)] { execute(op, body); });
  return w;
}

void Communicator::execute(const Op& op, const Body& body) {
  {
    std::lock_guard lk(broken_mu_);
    if (!broken_.empty())
      throw RemoteError(op.h.describe() + " on rank " + std::to_string(rank_) +
                        ": this communicator was aborted by an earlier failure: " + broken_);
  }
  Context c(rank_, size_, raw_pairs_, opt_.tuning, scratch_, opt_.timeout,
            [&op, this] { return op.h.describe() + " on rank " + std::to_string(rank_); });
  c.set_arena(arena_.get());
  try {
    if (op.peer >= 0) {
    } else if (arena_) {
      // The header travels with the arena's first step of the operation.
      arena_->begin(op.h);
      if (!shm::Arena::handles(op.h.kind)) arena_->check(c);
    } else if (size_ > 1 && op.h.kind == OpKind::kAllReduce &&
               algo::all_reduce_uses_doubling(c, op.h.count, op.h.dtype)) {
      c.set_header(&op.h);  // travels with the doubling's messages (all_reduce.cc)
    } else {
      check_signature(c, op);
    }
    body(c);
  } catch (const std::exception& e) {
    fail(e, op);
  }
}

void Communicator::check_signature(Context& c, const Op& op) {
  if (size_ == 1) return;
  OpHeader got;
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  c.sendrecv(right, &op.h, sizeof op.h, left, &got, sizeof got);
  if (!got.same_call(op.h))
    throw UsageError("collective mismatch: rank " + std::to_string(rank_) + " called " + op.h.describe() +
                     " but rank " + std::to_string(left) + " (" + pairs_[left]->peer().describe() + ") called " +
                     got.describe() +
                     "; every rank must issue the same collectives in the same order with the same count, dtype, "
                     "op and root");
}

void Communicator::fail(const std::exception& e, const Op& op) {
  std::string host = opt_.host_id;
  std::string mine = "rank " + std::to_string(rank_) + " on host " + host + ": " + e.what();
  std::string first;
  try {
    std::string stored = store_->compare_set(opt_.prefix + "/abort", "", mine);
    if (stored != mine) first = stored;
  } catch (...) {
    // The store may be gone too; the local error still says what happened.
  }
  std::string msg = op.h.describe() + " failed on " + mine;
  if (!first.empty()) msg += " [first failure in this communicator: " + first + "]";
  abort(msg);
  const auto* err = dynamic_cast<const Error*>(&e);
  if (err && err->kind() == ErrorKind::kTimeout) throw TimeoutError(msg);
  if (err && err->kind() == ErrorKind::kUsage) throw UsageError(msg);
  throw RemoteError(msg);
}

// ---- the operations ---------------------------------------------------------

namespace {
OpHeader header(OpKind k, size_t count, DataType t, ReduceOp op = ReduceOp::kSum, int root = -1) {
  OpHeader h;
  h.kind = k;
  h.count = count;
  h.dtype = t;
  h.op = op;
  h.root = root;
  return h;
}
}  // namespace


void Communicator::check_root(int root) const {
  if (root < 0 || root >= size_)
    throw UsageError("collectives: root " + std::to_string(root) + " is not a rank of this communicator of size " +
                     std::to_string(size_));
}

WorkPtr Communicator::submit_collective(OpHeader h, Body body, bool async) {
  h.seq = seq_++;
  return submit(Op{h}, std::move(body), async);
}

WorkPtr Communicator::broadcast_impl(bool async, void* buf, size_t count, DataType t, int root) {
  check_root(root);
  return submit_collective(header(OpKind::kBroadcast, count, t, ReduceOp::kSum, root),
                           [=](Context& c) {
                             if (c.arena()) c.arena()->broadcast(c, buf, count * dtype_size(t), root);
                             else algo::broadcast(c, buf, count * dtype_size(t), root);
                           }, async);
}

WorkPtr Communicator::all_reduce_impl(bool async, const void* in, void* out, size_t count, DataType t,
                                      ReduceOp op) {
  return submit_collective(header(OpKind::kAllReduce, count, t, op), [=](Context& c) {
    if (c.arena()) return c.arena()->all_reduce(c, in, out, count, t, op);
    algo::all_reduce(c, out, count, t, op, in);  // copies in -> out itself, or never needs to
  }, async);
}

WorkPtr Communicator::reduce_impl(bool async, const void* in, void* out, size_t count, DataType t, ReduceOp op,
                                  int root) {
  check_root(root);
  return submit_collective(header(OpKind::kReduce, count, t, op, root),
                           [=](Context& c) { algo::reduce(c, in, out, count, t, op, root); }, async);
}

WorkPtr Communicator::all_gather_v_impl(bool async, OpKind kind, const void* in, void* out,
                                        std::vector<size_t> counts, DataType t, int root) {
  if (counts.size() != size_t(size_))
    throw UsageError(std::string(kind_name(kind)) + ": got " + std::to_string(counts.size()) +
                     " per-rank counts for a communicator of size " + std::to_string(size_));
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over the counts
  std::vector<size_t> bytes(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    hash = (hash ^ counts[i]) * 1099511628211ull;
    bytes[i] = counts[i] * dtype_size(t);
  }
  // all_gather_v's header carries the total and a hash of the per-rank counts.
  OpHeader h = header(kind, counts[0], t, ReduceOp::kSum, root);
  if (kind == OpKind::kAllGatherV) {
    h.extra = hash;
    h.count = 0;
    for (size_t c : counts) h.count += c;
  }
  return submit_collective(h, [=](Context& c) {
    if (kind == OpKind::kGather) algo::gather_v(c, in, out, bytes, root);
    else if (c.arena()) c.arena()->all_gather_v(c, in, out, bytes);
    else algo::all_gather_v(c, in, out, bytes);
  }, async);
}

WorkPtr Communicator::scatter_impl(bool async, const void* in, void* out, size_t count, DataType t, int root) {
  check_root(root);
  return submit_collective(header(OpKind::kScatter, count, t, ReduceOp::kSum, root),
                           [=](Context& c) { algo::scatter(c, in, out, count * dtype_size(t), root); }, async);
}

WorkPtr Communicator::reduce_scatter_impl(bool async, const void* in, void* out, size_t count, DataType t,
                                          ReduceOp op) {
  return submit_collective(header(OpKind::kReduceScatter, count, t, op),
                           [=](Context& c) { algo::reduce_scatter(c, in, out, count, t, op); }, async);
}

WorkPtr Communicator::all_to_all_impl(bool async, const void* in, void* out, size_t count, DataType t) {
  return submit_collective(header(OpKind::kAllToAll, count, t),
                           [=](Context& c) { algo::all_to_all(c, in, out, count * dtype_size(t)); }, async);
}

WorkPtr Communicator::barrier_impl(bool async) {
  return submit_collective(header(OpKind::kBarrier, 0, DataType::kUint8), [](Context& c) { algo::barrier(c); },
                           async);
}

WorkPtr Communicator::send_impl(bool async, const void* buf, size_t count, DataType t, int dst) {
  if (dst < 0 || dst >= size_ || dst == rank_)
    throw UsageError("send: destination " + std::to_string(dst) + " is not another rank of this communicator");
  Op op{header(OpKind::kSend, count, t), dst};
  op.h.seq = p2p_sent_[dst]++;
  return submit(op, [h = op.h, buf, dst](Context& c) {
    c.send(dst, &h, sizeof h);
    c.send(dst, buf, h.count * dtype_size(h.dtype));
  }, async);
}

WorkPtr Communicator::recv_impl(bool async, void* buf, size_t count, DataType t, int src) {
  if (src < 0 || src >= size_ || src == rank_)
    throw UsageError("recv: source " + std::to_string(src) + " is not another rank of this communicator");
  Op op{header(OpKind::kSend, count, t), src};
  op.h.seq = p2p_recvd_[src]++;
  return submit(op, [this, h = op.h, buf, src](Context& c) {
    OpHeader got;
    c.recv(src, &got, sizeof got);
    if (!got.same_call(h))
      throw UsageError("send/recv mismatch: rank " + std::to_string(rank_) + " expected " + h.describe() +
                       " from rank " + std::to_string(src) + " but it sent " + got.describe());
    c.recv(src, buf, h.count * dtype_size(h.dtype));
  }, async);
}

// Public entry points: synchronous and asynchronous forms of each.
void Communicator::broadcast(void* b, size_t n, DataType t, int root) { broadcast_impl(false, b, n, t, root); }
WorkPtr Communicator::broadcast_async(void* b, size_t n, DataType t, int root) {
  return broadcast_impl(true, b, n, t, root);
}
void Communicator::all_reduce(const void* i, void* o, size_t n, DataType t, ReduceOp op) {
  all_reduce_impl(false, i, o, n, t, op);
}
WorkPtr Communicator::all_reduce_async(const void* i, void* o, size_t n, DataType t, ReduceOp op) {
  return all_reduce_impl(true, i, o, n, t, op);
}
void Communicator::reduce(const void* i, void* o, size_t n, DataType t, ReduceOp op, int root) {
  reduce_impl(false, i, o, n, t, op, root);
}
WorkPtr Communicator::reduce_async(const void* i, void* o, size_t n, DataType t, ReduceOp op, int root) {
  return reduce_impl(true, i, o, n, t, op, root);
}
void Communicator::all_gather(const void* i, void* o, size_t n, DataType t) {
  all_gather_v_impl(false, OpKind::kAllGather, i, o, std::vector<size_t>(size_, n), t, -1);
}
WorkPtr Communicator::all_gather_async(const void* i, void* o, size_t n, DataType t) {
  return all_gather_v_impl(true, OpKind::kAllGather, i, o, std::vector<size_t>(size_, n), t, -1);
}
void Communicator::all_gather_v(const void* i, void* o, const std::vector<size_t>& counts, DataType t) {
  all_gather_v_impl(false, OpKind::kAllGatherV, i, o, counts, t, -1);
}
WorkPtr Communicator::all_gather_v_async(const void* i, void* o, std::vector<size_t> counts, DataType t) {
  return all_gather_v_impl(true, OpKind::kAllGatherV, i, o, std::move(counts), t, -1);
}
void Communicator::gather(const void* i, void* o, size_t n, DataType t, int root) {
  check_root(root);
  all_gather_v_impl(false, OpKind::kGather, i, o, std::vector<size_t>(size_, n), t, root);
}
WorkPtr Communicator::gather_async(const void* i, void* o, size_t n, DataType t, int root) {
  check_root(root);
  return all_gather_v_impl(true, OpKind::kGather, i, o, std::vector<size_t>(size_, n), t, root);
}
void Communicator::scatter(const void* i, void* o, size_t n, DataType t, int root) {
  scatter_impl(false, i, o, n, t, root);
}
WorkPtr Communicator::scatter_async(const void* i, void* o, size_t n, DataType t, int root) {
  return scatter_impl(true, i, o, n, t, root);
}
void Communicator::reduce_scatter(const void* i, void* o, size_t n, DataType t, ReduceOp op) {
  reduce_scatter_impl(false, i, o, n, t, op);
}
WorkPtr Communicator::reduce_scatter_async(const void* i, void* o, size_t n, DataType t, ReduceOp op) {
  return reduce_scatter_impl(true, i, o, n, t, op);
}
void Communicator::all_to_all(const void* i, void* o, size_t n, DataType t) { all_to_all_impl(false, i, o, n, t); }
WorkPtr Communicator::all_to_all_async(const void* i, void* o, size_t n, DataType t) {
  return all_to_all_impl(true, i, o, n, t);
}
void Communicator::barrier() { barrier_impl(false); }
WorkPtr Communicator::barrier_async() { return barrier_impl(true); }
void Communicator::send(const void* b, size_t n, DataType t, int dst) { send_impl(false, b, n, t, dst); }
WorkPtr Communicator::send_async(const void* b, size_t n, DataType t, int dst) { return send_impl(true, b, n, t, dst); }
void Communicator::recv(void* b, size_t n, DataType t, int src) { recv_impl(false, b, n, t, src); }
WorkPtr Communicator::recv_async(void* b, size_t n, DataType t, int src) { return recv_impl(true, b, n, t, src); }

}  // namespace dl::coll
