#pragma once
// Fork-join helper threads: a batch of work split into shares, share 0 run by
// the caller and the others by helpers, the caller returning when every
// share has. The agent starts ranks from several threads with one
// (agent/rank_supervisor.cc), the TCP store server sends many answers at
// once with another (rendezvous/tcp_store_server.cc), and the doctor calls
// every child of its launch tree at once with a third (doctor/peer_fan.h).
//
// Helpers are started when first needed, up to the pool's maximum, each with
// every signal blocked (quiet_thread.h), and wait on a condition between
// batches. A share no helper can take (the maximum is reached, or no thread
// could be had: RLIMIT_NPROC) runs on the caller after its own. The
// destructor joins the helpers; a pool whose helpers must outlive every
// destructor (a rank's PR_SET_PDEATHSIG follows the thread that cloned it)
// is leaked by its owner.
//
// Threading: run() and for_each_index() by one thread at a time; prestart()
// and post() from any thread.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dl::wire {

class HelperPool {
 public:
  explicit HelperPool(size_t max_helpers) : max_(max_helpers) {}
  ~HelperPool();
  HelperPool(const HelperPool&) = delete;
  HelperPool& operator=(const HelperPool&) = delete;

  // The most helpers it starts; the helpers started so far.
  size_t max_helpers() const { return max_; }
  size_t helpers() const;

  // Starts helpers until there are `helpers` (at most max_helpers()), so
  // that their start is not on the path of the first batch.
  void prestart(size_t helpers);

  // Runs work(0) on this thread and work(1) .. work(shares - 1) on helpers,
  // and returns when all have returned.
  void run(size_t shares, const std::function<void(size_t)>& work);

  // fn(i) for every i in [0, n), in blocks of `block` consecutive indices
  // taken in turn by this thread and max_helpers() helpers.
  void for_each_index(size_t n, const std::function<void(size_t)>& fn, size_t block = 32);

  // Runs `task` on a helper between batches, or here at once when no helper
  // is started (a pty's last close, which the kernel makes the closer pay
  // for, taken off the caller's path).
  void post(std::function<void()> task);

 private:
  bool start_helper();  // REQUIRES: mu_ held
  void loop();

  const size_t max_;
  mutable std::mutex mu_;
  std::condition_variable cv_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(size_t)>* work_ = nullptr;
  size_t next_ = 1, last_ = 0, busy_ = 0;
  uint64_t batch_ = 0;
  std::vector<std::function<void()>> posted_;
  bool quit_ = false;
};

}  // namespace dl::wire
