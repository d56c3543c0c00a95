#pragma once
// An in-process Store: a map behind a mutex, for threads-as-ranks tests.
// The semantics are store_semantics.h's; this adds the lock and the waiting.
// Thread-safe.
#include <condition_variable>
#include <mutex>

#include "rendezvous/store.h"
#include "rendezvous/store_semantics.h"

namespace dl::rdzv {

class HashStore : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  KeyValueMap data_;
};

// "a, b and c" style list of the keys of `keys` that `present` says are
// missing; shared by every Store's timeout message.
std::string describe_missing(const std::vector<std::string>& missing);

}  // namespace dl::rdzv
