#include "collectives/context.h"

#include <algorithm>
#include <cstdlib>
#include <vector>
#include <string>

namespace dl::coll {

char* Scratch::get(int slot, size_t bytes) {
  if (bytes > cap_[slot]) {
    buf_[slot].reset();  // free first: never hold two large buffers at once
    buf_[slot].reset(new char[bytes]);
    cap_[slot] = bytes;
  }
  return buf_[slot].get();
}

Context::Context(int rank, int size, const std::vector<Pair*>& pairs, const Tuning& tuning, Scratch& scratch,
                 Millis timeout, std::function<std::string()> what)
    : rank_(rank), size_(size), pairs_(pairs), tuning_(tuning), scratch_(scratch),
      timeout_(timeout), deadline_(Clock::now() + timeout), what_(std::move(what)) {}

void Context::run(std::span<Transfer> xfers) {
  WaitPolicy wait{std::chrono::microseconds(tuning_.spin_us), std::chrono::microseconds(tuning_.yield_us)};
  wait.tcp_spin = std::chrono::microseconds(tuning_.tcp_spin_us);
  run_transfers(xfers, deadline_, timeout_, what_, wait);
}

void Context::run(std::initializer_list<Transfer> xfers) {
  Transfer x[4];
  if (xfers.size() > 4) {
    std::vector<Transfer> v(xfers);
    return run(std::span<Transfer>(v));
  }
  std::copy(xfers.begin(), xfers.end(), x);
  run(std::span<Transfer>(x, xfers.size()));
}

void Context::send(int to, const void* buf, size_t n) { run({Transfer::sending(pair(to), buf, n)}); }

void Context::recv(int from, void* buf, size_t n) { run({Transfer::receiving(pair(from), buf, n)}); }

void Context::sendrecv(int to, const void* sbuf, size_t sn, int from, void* rbuf, size_t rn) {
  Transfer x[2];
  int k = 0;
  if (to >= 0) x[k++] = Transfer::sending(pair(to), sbuf, sn);
  if (from >= 0) x[k++] = Transfer::receiving(pair(from), rbuf, rn);
  run(std::span<Transfer>(x, k));
}

static void env_size(const char* name, size_t& v) {
  if (const char* s = std::getenv(name); s && *s) v = std::strtoull(s, nullptr, 10);
}

Tuning Tuning::from_env() {
  Tuning t;
  env_size("DLCOLL_ALLREDUCE_RING_BYTES", t.allreduce_ring_bytes);
  env_size("DLCOLL_BCAST_CHAIN_BYTES", t.bcast_chain_bytes);
  env_size("DLCOLL_REDUCE_RING_BYTES", t.reduce_ring_bytes);
  env_size("DLCOLL_CHUNK_BYTES", t.chunk_bytes);
  env_size("DLCOLL_REDUCE_CHUNK_BYTES", t.reduce_chunk_bytes);
  env_size("DLCOLL_SPIN_US", t.spin_us);
  env_size("DLCOLL_YIELD_US", t.yield_us);
  env_size("DLCOLL_TCP_SPIN_US", t.tcp_spin_us);
  env_size("DLCOLL_SHM_DIRECT_BYTES", t.shm_direct_bytes);
  env_size("DLCOLL_SHM_SLOT_BYTES", t.shm_slot_bytes);
  env_size("DLCOLL_SHM_NT_BYTES", t.shm_nt_bytes);
  if (const char* s = std::getenv("DLCOLL_SHM_ARENA"); s && *s) t.shm_arena = std::string(s) != "0";
  if (t.chunk_bytes == 0) t.chunk_bytes = 512 << 10;
  if (t.reduce_chunk_bytes == 0) t.reduce_chunk_bytes = 128 << 10;
  return t;
}

}  // namespace dl::coll
