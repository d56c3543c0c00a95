#pragma once
// At most N hosts in their ssh handshake at once (--ssh-parallel): a start
// waits for a free slot; a host leaves its slot when its handshake is done
// or has failed. Single-threaded: used on the io_context's thread only.
#include <deque>
#include <functional>
#include <set>

namespace dl::remote {

class StartGate {
 public:
  explicit StartGate(int slots) : slots_(slots < 1 ? 1 : slots) {}

  // Runs begin() now if a slot is free, else when one frees up. `node` holds
  // the slot until leave(node).
  void enter(int node, std::function<void()> begin) {
    if (static_cast<int>(holders_.size()) < slots_) {
      holders_.insert(node);
      begin();
    } else {
      waiting_.push_back({node, std::move(begin)});
    }
  }
  // Frees `node`'s slot (nothing if it holds none) and starts the next waiter.
  void leave(int node) {
    if (holders_.erase(node) == 0) return;
    if (waiting_.empty()) return;
    auto next = std::move(waiting_.front());
    waiting_.pop_front();
    enter(next.node, std::move(next.begin));
  }
  // Forgets every waiter (stop).
  void clear() { waiting_.clear(); }
  int in_flight() const { return static_cast<int>(holders_.size()); }

 private:
  struct Waiter {
    int node;
    std::function<void()> begin;
  };
  int slots_;
  std::set<int> holders_;
  std::deque<Waiter> waiting_;
};

}  // namespace dl::remote
