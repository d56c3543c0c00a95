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
    data_[key] = value;
  }
  cv_.notify_all();
}

Bytes HashStore::get(const std::string& key) {
  wait({key}, timeout());
  std::lock_guard lk(mu_);
  return data_.at(key);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t v;
  {
    std::lock_guard lk(mu_);
    auto it = data_.find(key);
    v = (it == data_.end() ? 0 : std::stoll(it->second)) + delta;
    data_[key] = std::to_string(v);
  }
  cv_.notify_all();
  return v;
}

Bytes HashStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  std::unique_lock lk(mu_);
  auto it = data_.find(key);
  if (it == data_.end()) {
    if (!expected.empty()) return expected;
    data_[key] = desired;
  } else if (it->second == expected) {
    it->second = desired;
  } else {
    return it->second;
  }
  lk.unlock();
  cv_.notify_all();
  return desired;
}

bool HashStore::has_all(const std::vector<std::string>& keys) const {
  for (const auto& k : keys)
    if (!data_.count(k)) return false;
  return true;
}

void HashStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::unique_lock lk(mu_);
  if (cv_.wait_for(lk, timeout, [&] { return has_all(keys); })) return;
  std::vector<std::string> missing;
  for (const auto& k : keys)
    if (!data_.count(k)) missing.push_back(k);
  throw TimeoutError(timeout_message(timeout, missing));
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lk(mu_);
  return has_all(keys);
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard lk(mu_);
  return data_.erase(key) > 0;
}

int64_t HashStore::num_keys() {
  std::lock_guard lk(mu_);
  return static_cast<int64_t>(data_.size());
}

}  // namespace dl::rdzv
