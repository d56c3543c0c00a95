#include "collectives/work.h"

#include "errors/error.h"

namespace dl::coll {

bool Work::is_completed() const {
  std::lock_guard lk(mu_);
  return done_;
}

void Work::wait(Millis timeout) {
  std::unique_lock lk(mu_);
  if (timeout == kWaitForever) {
    cv_.wait(lk, [&] { return done_; });
  } else if (!cv_.wait_for(lk, timeout, [&] { return done_; })) {
    throw TimeoutError(what_ + " was still running after waiting " + std::to_string(timeout.count()) +
                       " ms for it; wait again, or raise the timeout");
  }
  if (err_) std::rethrow_exception(err_);
}

void Work::finish(std::exception_ptr err) {
  {
    std::lock_guard lk(mu_);
    done_ = true;
    err_ = err;
  }
  cv_.notify_all();
}

Executor::Executor() : thread_([this] { loop(); }) {}

Executor::~Executor() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void Executor::enqueue(WorkPtr w, std::function<void()> task) {
  {
    std::lock_guard lk(mu_);
    q_.emplace_back(std::move(w), std::move(task));
  }
  work_cv_.notify_all();
}

void Executor::run_inline(const std::function<void()>& task) {
  {
    std::unique_lock lk(mu_);
    idle_cv_.wait(lk, [&] { return q_.empty() && !busy_; });
    busy_ = true;
  }
  // The worker thread sleeps on work_cv_ and is woken only when something
  // was queued meanwhile (not possible with one issuing thread): a
  // synchronous operation costs no wake-up of another thread.
  struct Done {
    Executor* e;
    ~Done() {
      bool queued;
      {
        std::lock_guard lk(e->mu_);
        e->busy_ = false;
        queued = !e->q_.empty();
      }
      if (queued) e->work_cv_.notify_all();
    }
  } done{this};
  task();
}

void Executor::loop() {
  for (;;) {
    std::pair<WorkPtr, std::function<void()>> item;
    {
      std::unique_lock lk(mu_);
      work_cv_.wait(lk, [&] { return (!q_.empty() && !busy_) || (stop_ && q_.empty()); });
      if (q_.empty()) return;
      item = std::move(q_.front());
      q_.pop_front();
      busy_ = true;
    }
    std::exception_ptr err;
    try { item.second(); } catch (...) { err = std::current_exception(); }
    {
      std::lock_guard lk(mu_);
      busy_ = false;
    }
    idle_cv_.notify_all();
    item.first->finish(err);
  }
}

}  // namespace dl::coll
