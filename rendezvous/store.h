#pragma once
// The rendezvous Store: a small key-value service with the semantics PyTorch
// users know from c10d (set, get, add, compare_set, wait, check, delete,
// num_keys). Keys are strings, values are bytes (std::string used as a byte
// buffer). Implementations: TcpStore (tcp_store.h), FileStore (file_store.h),
// HashStore (hash_store.h, in-process, for tests and threads-as-ranks),
// PrefixStore (prefix_store.h, a view for sub-groups).
//
// Thread-safety: every implementation may be called from several threads.
// Failure: operations that wait throw dl::TimeoutError naming the keys they
// waited for; I/O failures throw dl::IoError/RemoteError naming the server.
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace dl::rdzv {

using Bytes = std::string;
using Millis = std::chrono::milliseconds;

// torch.distributed's default store timeout.
inline constexpr Millis kDefaultStoreTimeout{300000};

class Store {
 public:
  virtual ~Store() = default;

  // Sets key to value, waking every waiter on key. The TCP store pipelines
  // sets: it returns once the request is sent, and a refusal is raised by the
  // next call on the same store, or by flush() (docs/rendezvous.md,
  // "Pipelined sets").
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Returns once every earlier set has been answered; throws the first
  // refusal among them (naming its key). A no-op for stores whose sets are
  // synchronous.
  virtual void flush() {}
  // Waits (up to timeout()) until key exists, then returns its value.
  virtual Bytes get(const std::string& key) = 0;
  // Atomically adds delta to the integer at key (decimal text; a missing key
  // counts as 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // If key holds `expected` (or is missing and `expected` is empty), sets it
  // to `desired`. Returns the value now stored (c10d semantics: when the key
  // is missing and `expected` is not empty, returns `expected`).
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // Waits until every key exists; throws TimeoutError naming the missing ones.
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  // True when every key exists; never waits.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Removes key; true when it existed.
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;
  // A barrier of `count` callers at `key`: adds 1 to the integer at key and
  // waits until it reaches count, then returns this caller's arrival number
  // (1 for the first). Every caller passes the same count; use a fresh key
  // for each barrier (a caller arriving after it opened passes at once). On
  // timeout throws
  // TimeoutError saying how many of count arrived. The TCP store does it in
  // one round trip; the others with add, then wait on "<key>/open", which
  // the last to arrive sets.
  virtual int64_t barrier(const std::string& key, int64_t count, Millis timeout);
  int64_t barrier(const std::string& key, int64_t count) { return barrier(key, count, timeout_); }

  // An all-gather of `count` callers under `prefix`: contributes `value` as
  // `rank` (in [0, count)) and returns every caller's value, in rank order,
  // once all count have contributed. Every caller passes the same count; use
  // a fresh prefix for each all-gather. A rank that calls again (a retry)
  // replaces its value, or gets the result when the all-gather is complete.
  // Throws UsageError for a count outside [1, proto::kMaxGatherCount], a rank
  // outside [0, count), or values too big for the all-gather's bound
  // (store_protocol.h, kMaxGatherBytes); TimeoutError naming the ranks whose
  // value never came. The TCP store does it in one round trip per caller, the
  // server answering all at once when the last value arrives, and keeps the
  // list under `prefix`; the others set "<prefix>/<rank>", wait for every
  // rank's key, and get them.
  virtual std::vector<Bytes> all_gather(const std::string& prefix, int64_t rank, int64_t count, const Bytes& value,
                                        Millis timeout);
  std::vector<Bytes> all_gather(const std::string& prefix, int64_t rank, int64_t count, const Bytes& value) {
    return all_gather(prefix, rank, count, value, timeout_);
  }

  Millis timeout() const { return timeout_; }
  void set_timeout(Millis t) { timeout_ = t; }

  // Attaches a human description to a key (e.g. "rank 3 on node2"); timeout
  // messages that name the key show it. Thread-safe. PrefixStore forwards it.
  virtual void describe_key(const std::string& key, std::string text);

 protected:
  // The message of every Store's TimeoutError: names the missing keys, their
  // descriptions, and the ranks of rank keys (rank_of_key).
  std::string timeout_message(Millis waited, const std::vector<std::string>& missing);
  // Throws UsageError unless count >= 1.
  static void check_barrier_count(const std::string& key, int64_t count);
  // Throws UsageError unless all_gather's arguments are within its bounds.
  static void check_all_gather(const std::string& prefix, int64_t rank, int64_t count, size_t value_size);
  // The TimeoutError message of all_gather(), naming the ranks whose keys
  // ("rank/<r>") are in `missing`.
  std::string all_gather_timeout_message(Millis waited, const std::string& prefix, int64_t count,
                                         const std::vector<std::string>& missing);
  // The TimeoutError message of barrier(): how many of count arrived.
  std::string barrier_timeout_message(Millis waited, const std::string& key, int64_t count);

 private:
  Millis timeout_ = kDefaultStoreTimeout;
  std::mutex notes_mu_;
  std::map<std::string, std::string> notes_;
};

// The rank-key convention: a key that is "rank/<n>" or ends in "/rank/<n>"
// belongs to rank n. Returns -1 for other keys.
int rank_of_key(const std::string& key);

}  // namespace dl::rdzv
