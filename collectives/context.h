#pragma once
// What an algorithm sees of a communicator for one operation: its rank and
// size, a Pair per peer, the deadline, the size thresholds, and reusable
// scratch memory. Algorithms (algorithms.h) take a Context and never know
// which transport a Pair uses.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/progress.h"
#include "collectives/tuning.h"

namespace dl::coll {
struct OpHeader;
namespace shm {
class Arena;
}

// Grow-only scratch buffers, kept across operations so that large
// collectives do not allocate (and page-fault) a fresh buffer every call.
class Scratch {
 public:
  char* get(int slot, size_t bytes);

 private:
  std::unique_ptr<char[]> buf_[3];
  size_t cap_[3] = {0, 0, 0};
};

class Context {
 public:
  // `what` names the operation in error messages; called only on errors.
  Context(int rank, int size, const std::vector<Pair*>& pairs, const Tuning& tuning, Scratch& scratch,
          Millis timeout, std::function<std::string()> what);

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Tuning& tuning() const { return tuning_; }
  // REQUIRES: r != rank().
  Pair& pair(int r) const { return *pairs_[r]; }
  // Scratch slot 0, 1 or 2 of at least `bytes` bytes.
  char* temp(int slot, size_t bytes) { return scratch_.get(slot, bytes); }

  // The one-host arena (shm/arena.h), or nullptr when ranks span hosts.
  shm::Arena* arena() const { return arena_; }
  void set_arena(shm::Arena* a) { arena_ = a; }
  // The operation's header when the algorithm itself sends it along with its
  // messages and checks the peers' (small all_reduce over pairs), instead of
  // the communicator's separate check round; nullptr otherwise.
  const OpHeader* header() const { return header_; }
  void set_header(const OpHeader* h) { header_ = h; }
  Clock::time_point deadline() const { return deadline_; }
  Millis timeout() const { return timeout_; }
  // The operation's label for error messages.
  std::string what() const { return what_(); }

  // Runs the transfers together until done (progress.h); errors name `what`.
  void run(std::span<Transfer> xfers);
  void run(std::initializer_list<Transfer> xfers);
  void send(int to, const void* buf, size_t n);
  void recv(int from, void* buf, size_t n);
  // Sends to `to` while receiving from `from` (either may be -1 for none).
  void sendrecv(int to, const void* sbuf, size_t sn, int from, void* rbuf, size_t rn);

 private:
  int rank_, size_;
  const std::vector<Pair*>& pairs_;
  const Tuning& tuning_;
  Scratch& scratch_;
  Millis timeout_;
  Clock::time_point deadline_;
  std::function<std::string()> what_;
  shm::Arena* arena_ = nullptr;
  const OpHeader* header_ = nullptr;
};

}  // namespace dl::coll
