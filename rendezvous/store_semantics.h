#pragma once
// The c10d store semantics (docs/rendezvous.md, "Store semantics"), written
// once over a small key-value interface: the in-memory store (hash_store),
// the file store (file_store, whose writes append to its log) and the TCP
// server's state (store_state) all call these, so add, compare_set, the
// existence checks and their error texts cannot drift between stores.
//
// Pure: no locking, no waiting, no I/O of its own. The caller holds whatever
// lock guards the data; a store that waits (wait, get, barrier) does its own
// waiting and asks has_all/missing here what it is waiting for.
//
// Failure: RemoteError with one text per failure (add on a value that is not
// an integer, add that overflows). A barrier count below 1 has one text too
// (barrier_count_error): a local store throws it as UsageError, the TCP server
// replies with it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rendezvous/store.h"

namespace dl::rdzv {

// What the semantics need of a store's data. Implementations decide what a
// write means (a map assignment, a log record).
class KeyValue {
 public:
  // The value at key, or nullptr when it is missing. Valid until the next
  // write.
  virtual const Bytes* find(const std::string& key) const = 0;
  virtual void put(const std::string& key, Bytes value) = 0;
  // Removes key; true when it existed.
  virtual bool erase(const std::string& key) = 0;
  // The number of keys a caller can see (num_keys()).
  virtual size_t size() const = 0;

 protected:
  ~KeyValue() = default;
};

// A KeyValue in memory: the HashStore's data and the TCP server's.
class KeyValueMap final : public KeyValue {
 public:
  const Bytes* find(const std::string& key) const override {
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : &it->second;
  }
  void put(const std::string& key, Bytes value) override { map_.insert_or_assign(key, std::move(value)); }
  bool erase(const std::string& key) override { return map_.erase(key) > 0; }
  size_t size() const override { return map_.size(); }
  // Removes every key that does not start with `keep`; returns how many.
  size_t erase_all_but(const std::string& keep) {
    return std::erase_if(map_, [&](const auto& kv) { return kv.first.rfind(keep, 0) != 0; });
  }

 private:
  std::unordered_map<std::string, Bytes> map_;
};

namespace semantics {

// The integer a stored value holds: optional leading whitespace, an optional
// sign, decimal digits, nothing after them, within int64 (std::stoll's rule
// with the whole text consumed). nullopt for anything else.
std::optional<int64_t> parse_integer(std::string_view text);

// The integer at key; a missing key counts as 0. Throws RemoteError
// ("add: the value at store key '<key>' is not an integer") otherwise.
int64_t integer_at(const KeyValue& kv, const std::string& key);

// add(key, delta): stores and returns the integer at key plus delta. Throws
// RemoteError when the value is not an integer or the sum overflows int64;
// the stored value is then unchanged.
int64_t add(KeyValue& kv, const std::string& key, int64_t delta);

// compare_set(key, expected, desired) with c10d's rule: swaps when key holds
// expected, or is missing and expected is empty. `value` is what the caller
// gets back: the value now stored, or expected when key is missing and
// expected is not empty (nothing stored then).
struct CasResult {
  Bytes value;
  bool swapped = false;  // desired was stored (waiters on key may wake)
};
CasResult compare_set(KeyValue& kv, const std::string& key, const Bytes& expected, const Bytes& desired);

// check(keys): true when every key exists (true for no keys).
bool has_all(const KeyValue& kv, const std::vector<std::string>& keys);
// The keys of `keys` that do not exist, in order: what a wait still waits for.
std::vector<std::string> missing(const KeyValue& kv, const std::vector<std::string>& keys);

inline bool delete_key(KeyValue& kv, const std::string& key) { return kv.erase(key); }
inline int64_t num_keys(const KeyValue& kv) { return static_cast<int64_t>(kv.size()); }

// barrier(key, count): the reason a count is refused ("" when it is at
// least 1). Every store reports it with this text.
std::string barrier_count_error(const std::string& key, int64_t count);
// One arrival at a barrier: add(key, 1), the caller's arrival number.
inline int64_t barrier_arrive(KeyValue& kv, const std::string& key) { return add(kv, key, 1); }
// True when `arrivals` callers of a barrier for `count` release every one
// of them.
inline bool barrier_open(int64_t arrivals, int64_t count) { return arrivals >= count; }

// all_gather(prefix, rank, count, value): the reason a call is refused (""
// when count is in [1, proto::kMaxGatherCount], rank in [0, count), and a
// list of this value and count - 1 empty ones fits proto::kMaxGatherBytes;
// the TCP server bounds the running total of the values as they come).
// Every store reports it with this text.
std::string all_gather_error(const std::string& prefix, int64_t rank, int64_t count, size_t value_size);

}  // namespace semantics
}  // namespace dl::rdzv
