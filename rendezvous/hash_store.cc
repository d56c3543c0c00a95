#include "rendezvous/hash_store.h"

#include "errors/error.h"

namespace dl::rdzv {

std::string describe_missing(const std::vector<std::string>& missing) {
  std::string out;
  for (size_t i = 0; i < missing.size(); ++i) {
    if (i > 0) out += (i + 1 == missing.size()) ? " and " : ", ";
    out += "'" + missing[i] + "'";
  }
  return out;
}

void HashStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard lk(mu_);
    data_.put(key, value);
  }
  cv_.notify_all();
}

Bytes HashStore::get(const std::string& key) {
  for (;;) {
    wait({key}, timeout());
    std::lock_guard lk(mu_);
    if (const Bytes* v = data_.find(key)) return *v;  // else deleted meanwhile: wait again
  }
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t v;
  {
    std::lock_guard lk(mu_);
    v = semantics::add(data_, key, delta);
  }
  cv_.notify_all();
  return v;
}

Bytes HashStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  semantics::CasResult r;
  {
    std::lock_guard lk(mu_);
    r = semantics::compare_set(data_, key, expected, desired);
  }
  if (r.swapped) cv_.notify_all();
  return std::move(r.value);
}

void HashStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::unique_lock lk(mu_);
  if (cv_.wait_for(lk, timeout, [&] { return semantics::has_all(data_, keys); })) return;
  throw TimeoutError(timeout_message(timeout, semantics::missing(data_, keys)));
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lk(mu_);
  return semantics::has_all(data_, keys);
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard lk(mu_);
  return semantics::delete_key(data_, key);
}

int64_t HashStore::num_keys() {
  std::lock_guard lk(mu_);
  return semantics::num_keys(data_);
}

}  // namespace dl::rdzv
