#pragma once
// The handle of an asynchronous collective, and the per-communicator worker
// thread that runs operations one at a time, in the order they were issued.
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "collectives/progress.h"

namespace dl::coll {

inline constexpr Millis kWaitForever{Millis::max()};

class Work {
 public:
  // True once the operation finished, successfully or not. Never blocks.
  bool is_completed() const;
  // Blocks until the operation finishes, at most `timeout`. Rethrows the
  // operation's error; throws TimeoutError (the operation keeps running)
  // when it is still in flight after `timeout`.
  void wait(Millis timeout = kWaitForever);

  // Used by the executor.
  void finish(std::exception_ptr err);
  explicit Work(std::string what) : what_(std::move(what)) {}

 private:
  std::string what_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr err_;
};
using WorkPtr = std::shared_ptr<Work>;

// Runs tasks in issue order: queued tasks on its own thread, synchronous
// ones inline on the caller's thread once everything queued before them is
// done. REQUIRES: one issuing thread at a time.
class Executor {
 public:
  Executor();
  ~Executor();  // finishes queued tasks, then joins
  void enqueue(WorkPtr w, std::function<void()> task);
  void run_inline(const std::function<void()>& task);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable work_cv_;  // the worker waits for queued tasks
  std::condition_variable idle_cv_;  // run_inline waits for the worker to finish
  std::deque<std::pair<WorkPtr, std::function<void()>>> q_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace dl::coll
