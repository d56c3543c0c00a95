#pragma once
// dl::coll::Communicator: collectives among `size` ranks over TCP and shared
// memory, bootstrapped through a rendezvous Store.
//
// Every collective is called by all ranks of the communicator in the same
// order with matching arguments (count, dtype, op, root); a mismatch is
// detected and fails the call on every rank. Buffers are host memory;
// "in-place" means in == out (for reduce_scatter: out == in + rank*count,
// for all_gather/gather: in == out + rank*count). Counts are in elements.
//
// Failure: a collective throws dl::RemoteError when a peer died, aborted or
// disagreed (naming the rank, its host and, when known, the first failure
// anywhere), dl::TimeoutError after options.timeout. After any failure the
// communicator is aborted: its peers fail too, and every later call throws.
//
// Thread-safety: issue operations from one thread at a time. Async calls run
// on the communicator's worker thread in issue order; buffers must stay valid
// until the Work completes. Synchronous calls wait for earlier async ones.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/context.h"
#include "collectives/dtype.h"
#include "collectives/op_header.h"
#include "collectives/options.h"
#include "collectives/work.h"
#include "rendezvous/store.h"

namespace dl::coll {

class Communicator {
 public:
  // Connects to every other rank through `store` (which must outlive the
  // communicator). Blocks until all `size` ranks have joined, at most
  // options.timeout. REQUIRES: 0 <= rank < size.
  Communicator(rdzv::Store& store, int rank, int size, Options options = {});
  Communicator(std::shared_ptr<rdzv::Store> store, int rank, int size, Options options = {});
  // From a rendezvous URL (env://, tcp://host:port, file:///path); identity
  // from the environment (see bootstrap_url.h).
  static std::unique_ptr<Communicator> from_url(const std::string& url, Options options = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The store it joined through (for a second backend's rendezvous, e.g. NCCL's id).
  rdzv::Store& store() const { return *store_; }
  // "tcp" or "shm" for the pair to rank r (r != rank()).
  const char* transport_to(int r) const;
  // Rank r's host id and the address it published ("10.0.0.2:41234"), as
  // its Pair knows them. REQUIRES: r != rank(), 0 <= r < size().
  const PeerInfo& peer(int r) const { return pairs_[r]->peer(); }

  // A sub-communicator of `ranks` (ranks of this communicator; group rank i is
  // ranks[i]). Called by every rank in `ranks`, in the same order for the
  // same list; returns nullptr on ranks not in the list (without waiting).
  std::unique_ptr<Communicator> new_group(const std::vector<int>& ranks);

  void broadcast(void* buf, size_t count, DataType t, int root);
  void all_reduce(const void* in, void* out, size_t count, DataType t, ReduceOp op);
  void reduce(const void* in, void* out, size_t count, DataType t, ReduceOp op, int root);
  // out: size()*count elements.
  void all_gather(const void* in, void* out, size_t count, DataType t);
  // counts[r] elements from rank r, packed in rank order in out.
  void all_gather_v(const void* in, void* out, const std::vector<size_t>& counts, DataType t);
  void gather(const void* in, void* out, size_t count, DataType t, int root);
  // in (root only): size()*count elements; out: count elements.
  void scatter(const void* in, void* out, size_t count, DataType t, int root);
  // in: size()*count elements; out: count elements.
  void reduce_scatter(const void* in, void* out, size_t count, DataType t, ReduceOp op);
  // in and out: size()*count elements; block j of in goes to rank j.
  void all_to_all(const void* in, void* out, size_t count, DataType t);
  void barrier();
  // Point to point; matched in order per (sender, receiver) pair; the
  // receiver's count and dtype must equal the sender's.
  void send(const void* buf, size_t count, DataType t, int dst);
  void recv(void* buf, size_t count, DataType t, int src);

  WorkPtr broadcast_async(void* buf, size_t count, DataType t, int root);
  WorkPtr all_reduce_async(const void* in, void* out, size_t count, DataType t, ReduceOp op);
  WorkPtr reduce_async(const void* in, void* out, size_t count, DataType t, ReduceOp op, int root);
  WorkPtr all_gather_async(const void* in, void* out, size_t count, DataType t);
  WorkPtr all_gather_v_async(const void* in, void* out, std::vector<size_t> counts, DataType t);
  WorkPtr gather_async(const void* in, void* out, size_t count, DataType t, int root);
  WorkPtr scatter_async(const void* in, void* out, size_t count, DataType t, int root);
  WorkPtr reduce_scatter_async(const void* in, void* out, size_t count, DataType t, ReduceOp op);
  WorkPtr all_to_all_async(const void* in, void* out, size_t count, DataType t);
  WorkPtr barrier_async();
  WorkPtr send_async(const void* buf, size_t count, DataType t, int dst);
  WorkPtr recv_async(void* buf, size_t count, DataType t, int src);

  // Aborts: peers blocked on this rank fail, later calls here throw.
  void abort(const std::string& why);

 private:
  struct Op;
  using Body = std::function<void(Context&)>;
  WorkPtr submit(Op op, Body body, bool async);
  WorkPtr submit_collective(OpHeader h, Body body, bool async);
  void check_root(int root) const;
  WorkPtr broadcast_impl(bool async, void* buf, size_t count, DataType t, int root);
  WorkPtr all_reduce_impl(bool async, const void* in, void* out, size_t count, DataType t, ReduceOp op);
  WorkPtr reduce_impl(bool async, const void* in, void* out, size_t count, DataType t, ReduceOp op, int root);
  WorkPtr all_gather_v_impl(bool async, OpKind kind, const void* in, void* out, std::vector<size_t> counts,
                            DataType t, int root);
  WorkPtr scatter_impl(bool async, const void* in, void* out, size_t count, DataType t, int root);
  WorkPtr reduce_scatter_impl(bool async, const void* in, void* out, size_t count, DataType t, ReduceOp op);
  WorkPtr all_to_all_impl(bool async, const void* in, void* out, size_t count, DataType t);
  WorkPtr barrier_impl(bool async);
  WorkPtr send_impl(bool async, const void* buf, size_t count, DataType t, int dst);
  WorkPtr recv_impl(bool async, void* buf, size_t count, DataType t, int src);
  void execute(const Op& op, const Body& body);
  void check_signature(Context& c, const Op& op);
  [[noreturn]] void fail(const std::exception& e, const Op& op);
  void shutdown_pairs();

  std::shared_ptr<rdzv::Store> store_;
  int rank_, size_;
  Options opt_;
  std::vector<std::unique_ptr<Pair>> pairs_;
  std::vector<Pair*> raw_pairs_;  // pairs_[r].get(), what a Context sees
  std::unique_ptr<shm::Arena> arena_;  // all ranks on one host (shm/arena.h)
  Scratch scratch_;
  uint64_t seq_ = 0;
  std::vector<uint64_t> p2p_sent_, p2p_recvd_;
  std::map<std::string, int> groups_made_;
  std::mutex broken_mu_;
  std::string broken_;
  std::unique_ptr<Executor> exec_;
};

}  // namespace dl::coll
