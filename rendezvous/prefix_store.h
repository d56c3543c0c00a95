#pragma once
// A view of another Store that puts "prefix/" before every key, so sub-groups
// (a node's ranks, one communicator) share a store without clashing.
// num_keys() counts the whole underlying store (as c10d's PrefixStore does).
// Thread-safe as the underlying store; does not own it unless given a
// unique_ptr.
#include <memory>

#include "rendezvous/store.h"

namespace dl::rdzv {

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, Store& inner) : prefix_(std::move(prefix) + "/"), inner_(&inner) {}
  PrefixStore(std::string prefix, std::unique_ptr<Store> inner)
      : prefix_(std::move(prefix) + "/"), owned_(std::move(inner)), inner_(owned_.get()) {}

  void set(const std::string& key, const Bytes& value) override { inner_->set(k(key), value); }
  void flush() override { inner_->flush(); }
  // Waits up to this view's timeout() (then reads: two operations).
  Bytes get(const std::string& key) override {
    inner_->wait({k(key)}, timeout());
    return inner_->get(k(key));
  }
  int64_t add(const std::string& key, int64_t delta) override { return inner_->add(k(key), delta); }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return inner_->compare_set(k(key), expected, desired);
  }
  void wait(const std::vector<std::string>& keys, Millis timeout) override { inner_->wait(ks(keys), timeout); }
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override { return inner_->check(ks(keys)); }
  bool delete_key(const std::string& key) override { return inner_->delete_key(k(key)); }
  int64_t num_keys() override { return inner_->num_keys(); }
  int64_t barrier(const std::string& key, int64_t count, Millis timeout) override {
    return inner_->barrier(k(key), count, timeout);
  }
  using Store::barrier;
  std::vector<Bytes> all_gather(const std::string& prefix, int64_t rank, int64_t count, const Bytes& value,
                                Millis timeout) override {
    return inner_->all_gather(k(prefix), rank, count, value, timeout);
  }
  using Store::all_gather;
  void describe_key(const std::string& key, std::string text) override { inner_->describe_key(k(key), std::move(text)); }

  Store& inner() { return *inner_; }

 private:
  std::string k(const std::string& key) const { return prefix_ + key; }
  std::vector<std::string> ks(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& key : keys) out.push_back(k(key));
    return out;
  }
  std::string prefix_;
  std::unique_ptr<Store> owned_;
  Store* inner_;
};

}  // namespace dl::rdzv
