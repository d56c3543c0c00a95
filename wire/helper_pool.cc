#include "wire/helper_pool.h"

#include <algorithm>
#include <system_error>

#include "wire/quiet_thread.h"

namespace dl::wire {

HelperPool::~HelperPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

size_t HelperPool::helpers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

bool HelperPool::start_helper() {
  if (threads_.size() >= max_) return false;
  try {
    threads_.push_back(quiet_thread([this] { loop(); }));
    return true;
  } catch (const std::system_error&) {
    return false;
  }
}

void HelperPool::prestart(size_t helpers) {
  std::lock_guard<std::mutex> lock(mu_);
  while (threads_.size() < helpers && start_helper()) {}
}

void HelperPool::run(size_t shares, const std::function<void(size_t)>& work) {
  if (shares == 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  while (threads_.size() + 1 < shares && start_helper()) {}
  const size_t helped = std::min(shares - 1, threads_.size());
  work_ = &work;
  next_ = 1, last_ = helped, busy_ = helped, ++batch_;
  lock.unlock();
  // As many helpers woken as there are shares for, not all of them: a pool
  // of 31 helpers asked for 1 share would wake 31 threads to find 30 with
  // nothing to do (the doctor's retests call one or two children at a time).
  for (size_t i = 0; i < helped; ++i) cv_.notify_one();
  work(0);
  for (size_t s = helped + 1; s < shares; ++s) work(s);
  lock.lock();
  done_.wait(lock, [&] { return busy_ == 0; });
  work_ = nullptr;
}

void HelperPool::for_each_index(size_t n, const std::function<void(size_t)>& fn, size_t block) {
  block = std::max<size_t>(block, 1);
  std::atomic<size_t> next{0};
  const std::function<void(size_t)> share = [&](size_t) {
    for (size_t from; (from = next.fetch_add(block)) < n;)
      for (size_t i = from; i < std::min(n, from + block); ++i) fn(i);
  };
  run(std::min(max_ + 1, (n + block - 1) / block), share);
}

void HelperPool::post(std::function<void()> task) {
  std::unique_lock<std::mutex> lock(mu_);
  if (threads_.empty()) {
    lock.unlock();
    task();
    return;
  }
  posted_.push_back(std::move(task));
  lock.unlock();
  cv_.notify_one();
}

void HelperPool::loop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return quit_ || (batch_ != seen && next_ <= last_) || !posted_.empty(); });
    if (!posted_.empty()) {
      const auto tasks = std::move(posted_);
      posted_.clear();
      lock.unlock();
      for (const auto& t : tasks) t();
      lock.lock();
      continue;
    }
    if (quit_) return;
    seen = batch_;
    const size_t share = next_++;
    const auto* work = work_;
    lock.unlock();
    (*work)(share);
    lock.lock();
    if (--busy_ == 0) done_.notify_one();
  }
}

}  // namespace dl::wire
