#include "collectives/shm/arena.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <ctime>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "collectives/algorithms.h"
#include "collectives/cpu_relax.h"
#include "collectives/context.h"
#include "collectives/reduce.h"
#include "errors/error.h"
#include "wire/handshake.h"

namespace dl::coll::shm {

// One per rank, written only by that rank (except `sleepers`). `step` is the
// futex word; hdr[s % 2] is the header published with step s.
struct alignas(128) RankCtl {
  std::atomic<uint32_t> step{0};
  std::atomic<uint32_t> sleepers{0};
  std::atomic<uint32_t> aborted{0};  // on step's cache line: read with it
  OpHeader hdr[2];
};
static_assert(sizeof(RankCtl) == 128);

namespace {

constexpr size_t kPage = 4096;

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Step counters wrap; a rank is at most one step ahead of a waiter.
bool reached(uint32_t have, uint32_t want) { return static_cast<int32_t>(have - want) >= 0; }

// Copies into a private output buffer. Large outputs do not fit in cache:
// non-temporal stores skip reading each destination line first.
void copy_out(void* dst, const void* src, size_t n, bool nt) {
#if defined(__SSE2__)
  if (nt && n >= 1024) {
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    const size_t head = (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16;
    std::memcpy(d, s, head);
    d += head, s += head, n -= head;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
      __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    std::memcpy(d + i, s + i, n - i);
    _mm_sfence();
    return;
  }
#endif
  (void)nt;
  std::memcpy(dst, src, n);
}

void* map_fd(int fd, size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

size_t Arena::layout(int size, size_t slot, size_t* slots_at) {
  const size_t at = round_up(sizeof(RankCtl) * size_t(size), kPage);
  if (slots_at) *slots_at = at;
  return at + size_t(size) * 2 * slot;
}

Arena::Arena(void* base, size_t map_bytes, int rank, int size, size_t slot)
    : base_(base), map_bytes_(map_bytes), rank_(rank), size_(size), slot_(slot) {
  size_t at = 0;
  layout(size, slot, &at);
  slots_ = static_cast<char*>(base) + at;
  oversubscribed_ = size > ::sysconf(_SC_NPROCESSORS_ONLN);
}

Arena::~Arena() { ::munmap(base_, map_bytes_); }

RankCtl& Arena::ctl(int r) const { return static_cast<RankCtl*>(base_)[r]; }

std::unique_ptr<Arena> Arena::connect(std::vector<tcp::MeshPeer>& mesh, int rank, int size, size_t slot_bytes,
                                      std::chrono::milliseconds timeout) {
  void* base = nullptr;
  size_t bytes = 0;
  if (rank == 0) {
    slot_bytes = round_up(std::max<size_t>(slot_bytes, 64), 64);
    bytes = layout(size, slot_bytes, nullptr);
    std::string name = "/dlcoll-arena-" + std::to_string(::getpid()) + "-" + wire::to_hex(wire::random_bytes(8));
    int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) {
      if (::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0) base = map_fd(fd, bytes);
      ::close(fd);
      if (base)
        for (int r = 0; r < size; ++r) new (static_cast<RankCtl*>(base) + r) RankCtl();
    }
    const std::string offer = base ? name + " " + std::to_string(slot_bytes) : "";
    bool all = base != nullptr;
    try {
      for (int r = 1; r < size; ++r) wire::write_frame(mesh[r].sock, wire::kData, offer, mesh[r].info.describe());
      if (base)
        for (int r = 1; r < size; ++r)
          all = wire::read_frame(mesh[r].sock, 16, timeout, mesh[r].info.describe()).payload == "1" && all;
    } catch (...) {
      if (base) ::shm_unlink(name.c_str());
      throw;
    }
    if (fd >= 0) ::shm_unlink(name.c_str());
    if (base)
      for (int r = 1; r < size; ++r)
        wire::write_frame(mesh[r].sock, wire::kData, all ? "1" : "0", mesh[r].info.describe());
    if (!all && base) {
      ::munmap(base, bytes);
      base = nullptr;
    }
  } else {
    std::string offer = wire::read_frame(mesh[0].sock, 512, timeout, mesh[0].info.describe()).payload;
    if (offer.empty()) return nullptr;
    const size_t sp = offer.rfind(' ');
    slot_bytes = std::strtoull(offer.c_str() + sp + 1, nullptr, 10);
    bytes = layout(size, slot_bytes, nullptr);
    int fd = ::shm_open(offer.substr(0, sp).c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) {
      base = map_fd(fd, bytes);
      ::close(fd);
    }
    wire::write_frame(mesh[0].sock, wire::kData, base ? "1" : "0", mesh[0].info.describe());
    const bool all = wire::read_frame(mesh[0].sock, 16, timeout, mesh[0].info.describe()).payload == "1";
    if (!all && base) {
      ::munmap(base, bytes);
      base = nullptr;
    }
  }
  if (!base) return nullptr;
  return std::unique_ptr<Arena>(new Arena(base, bytes, rank, size, slot_bytes));
}

// ---- steps ------------------------------------------------------------------

void Arena::post() {
  RankCtl& me = ctl(rank_);
  ++step_;
  if (fresh_) std::memcpy(&me.hdr[step_ & 1], &hdr_, sizeof hdr_);
  me.step.store(step_, std::memory_order_seq_cst);
  // Dekker with sleep_on(): either the sleeper sees the new step, or we see it.
  if (me.sleepers.load(std::memory_order_seq_cst))
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&me.step), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void Arena::sleep_on(int r, uint32_t s) {
  RankCtl& other = ctl(r);
  other.sleepers.fetch_add(1, std::memory_order_seq_cst);
  const uint32_t seen = other.step.load(std::memory_order_seq_cst);
  if (!reached(seen, s)) {
    // Bounded, so liveness and the deadline are checked while asleep.
    timespec ts{0, 5'000'000};
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&other.step), FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
  other.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void Arena::abort() {
  RankCtl& me = ctl(rank_);
  me.aborted.store(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&me.step), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void Arena::check_aborted(Context& c) const {
  for (int q = 0; q < size_; ++q)
    if (q != rank_ && ctl(q).aborted.load(std::memory_order_acquire))
      throw RemoteError(c.pair(q).peer().describe() + " aborted its communicator (shared memory)");
}

void Arena::wait_all(Context& c) {
  const uint32_t s = step_;
  int r = 0;
  unsigned idle = 0;
  Clock::time_point since{}, checked{};
  const auto spin = std::chrono::microseconds(oversubscribed_ ? 0 : c.tuning().spin_us);
  const auto yield = std::chrono::microseconds(c.tuning().yield_us);
  for (;;) {
    while (r < size_ && reached(ctl(r).step.load(std::memory_order_acquire), s)) ++r;
    if (r == size_) break;
    if (idle++ == 0) since = checked = Clock::now();
    if (idle % 128 != 0) {
      cpu_relax();
      continue;
    }
    const auto now = Clock::now();
    if (now - checked >= std::chrono::milliseconds(1)) {
      checked = now;
      // A dead rank first: it is why the others abort. One that reached the
      // step and then left (its last collective done, the process ended)
      // between the two loads is not dead for this step: its socket's EOF
      // can come before this thread reads its step again (seen under load:
      // the job's last all_reduce failed on rank 0 as rank 1 exited).
      for (int q = r; q < size_; ++q) {
        if (q == rank_ || reached(ctl(q).step.load(std::memory_order_acquire), s)) continue;
        try {
          c.pair(q).check_alive();
        } catch (const RemoteError&) {
          if (!reached(ctl(q).step.load(std::memory_order_acquire), s)) throw;
        }
      }
      check_aborted(c);
      if (now >= c.deadline()) {
        std::string who;
        for (int q = r; q < size_; ++q)
          if (!reached(ctl(q).step.load(std::memory_order_acquire), s))
            who += (who.empty() ? "" : ", ") + c.pair(q).peer().describe();
        throw TimeoutError(c.what() + " timed out after " + std::to_string(c.timeout().count()) +
                           " ms waiting (shared memory) for " + who +
                           "; is that rank still calling the same collective? (raise the timeout if it is just "
                           "slow)");
      }
    }
    if (now - since < spin) continue;
    if (now - since < spin + yield) {
      sched_yield();
      continue;
    }
    sleep_on(r, s);
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  check_aborted(c);
  if (!fresh_) return;
  fresh_ = false;
  for (int q = 0; q < size_; ++q) {
    const OpHeader& got = ctl(q).hdr[s & 1];
    if (q == rank_ || got.same_call(hdr_)) continue;
    throw UsageError("collective mismatch: rank " + std::to_string(rank_) + " called " + hdr_.describe() +
                     " but rank " + std::to_string(q) + " (" + c.pair(q).peer().describe() + ") called " +
                     got.describe() +
                     "; every rank must issue the same collectives in the same order with the same count, dtype, "
                     "op and root");
  }
}

void Arena::check(Context& c) {
  post();
  wait_all(c);
}

// ---- operations -------------------------------------------------------------

void Arena::all_reduce(Context& c, const void* in, void* out, size_t count, DataType t, ReduceOp op) {
  const size_t esz = dtype_size(t), bytes = count * esz;
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  const Tuning& tn = c.tuning();
  if (bytes <= slot_ && (bytes < tn.shm_direct_bytes || count < size_t(size_))) {
    // One step: everyone reduces every buffer, in rank order, so all ranks
    // compute the same expression.
    std::memcpy(buf(rank_, step_ + 1), src, bytes);
    post();
    wait_all(c);
    if (count) {
      reduce_to(dst, buf(0, step_), buf(1, step_), count, t, op);
      for (int j = 2; j < size_; ++j) reduce_into(dst, buf(j, step_), count, t, op);
    }
    finish_avg(out, count, t, op, size_);
    return;
  }
  const bool nt = bytes >= tn.shm_nt_bytes;
  const size_t per_chunk = slot_ / esz;
  for (size_t base = 0; base < count; base += per_chunk) {
    const size_t n = std::min(per_chunk, count - base);
    const algo::Segments seg{n, size_t(size_)};
    // Step A: hand every other rank the slice it reduces.
    char* mine = buf(rank_, step_ + 1);
    for (int j = 0; j < size_; ++j)
      if (j != rank_)
        std::memcpy(mine + seg.offset(j) * esz, src + (base + seg.offset(j)) * esz, seg.size(j) * esz);
    post();
    wait_all(c);
    // Reduce our slice (our own part straight from the input, which is not
    // yet overwritten even in place) into our buffer of the next step.
    const size_t off = seg.offset(rank_) * esz, len = seg.size(rank_);
    auto part = [&](int j) -> const char* {
      return j == rank_ ? src + base * esz + off : buf(j, step_) + off;
    };
    char* red = buf(rank_, step_ + 1) + off;
    if (len) {
      reduce_to(red, part(0), part(1), len, t, op);
      for (int j = 2; j < size_; ++j) reduce_into(red, part(j), len, t, op);
    }
    // Step B: everyone copies every reduced slice out.
    post();
    wait_all(c);
    for (int j = 0; j < size_; ++j)
      copy_out(dst + (base + seg.offset(j)) * esz, buf(j, step_) + seg.offset(j) * esz, seg.size(j) * esz, nt);
  }
  finish_avg(out, count, t, op, size_);
}

void Arena::broadcast(Context& c, void* data, size_t bytes, int root) {
  char* b = static_cast<char*>(data);
  const bool nt = bytes >= c.tuning().shm_nt_bytes;
  size_t at = 0;
  do {
    const size_t n = std::min(slot_, bytes - at);
    if (rank_ == root) std::memcpy(buf(rank_, step_ + 1), b + at, n);
    post();
    wait_all(c);
    if (rank_ != root) copy_out(b + at, buf(root, step_), n, nt);
    at += n;
  } while (at < bytes);
}

void Arena::all_gather_v(Context& c, const void* in, void* out, const std::vector<size_t>& bytes) {
  std::vector<size_t> at(size_ + 1, 0);
  size_t most = 0;
  for (int r = 0; r < size_; ++r) {
    at[r + 1] = at[r] + bytes[r];
    most = std::max(most, bytes[r]);
  }
  char* o = static_cast<char*>(out);
  const char* src = static_cast<const char*>(in);
  const bool nt = at[size_] >= c.tuning().shm_nt_bytes;
  if (src != o + at[rank_] && bytes[rank_]) copy_out(o + at[rank_], src, bytes[rank_], nt);
  size_t k = 0;
  do {
    if (k < bytes[rank_]) std::memcpy(buf(rank_, step_ + 1), src + k, std::min(slot_, bytes[rank_] - k));
    post();
    wait_all(c);
    for (int j = 0; j < size_; ++j)
      if (j != rank_ && k < bytes[j]) copy_out(o + at[j] + k, buf(j, step_), std::min(slot_, bytes[j] - k), nt);
    k += slot_;
  } while (k < most);
}

}  // namespace dl::coll::shm
