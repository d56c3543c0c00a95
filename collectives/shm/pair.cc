#include "collectives/shm/pair.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "errors/error.h"
#include "wire/handshake.h"

namespace dl::coll::shm {

// head is written only by the producer, tail only by the consumer; each on
// its own cache line.
struct Ring {
  alignas(64) std::atomic<uint64_t> head{0};
  alignas(64) std::atomic<uint64_t> tail{0};
  alignas(64) std::atomic<uint32_t> closed{0};
  // Set by a consumer about to sleep until head moves / a producer about to
  // sleep until tail moves; cleared by the side that rings the doorbell.
  alignas(64) std::atomic<uint32_t> reader_waits{0};
  alignas(64) std::atomic<uint32_t> writer_waits{0};
  alignas(64) char data[kRingBytes];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

size_t ShmPair::segment_bytes() { return 2 * sizeof(Ring); }

ShmPair::ShmPair(void* base, bool lower, wire::Socket sock, PeerInfo peer)
    : Pair(std::move(peer)), base_(base), sock_(std::move(sock)) {
  Ring* rings = static_cast<Ring*>(base);
  out_ = lower ? &rings[0] : &rings[1];
  in_ = lower ? &rings[1] : &rings[0];
}

ShmPair::~ShmPair() { ::munmap(base_, segment_bytes()); }

size_t ShmPair::try_send(const char* data, size_t n) {
  const uint64_t h = out_->head.load(std::memory_order_relaxed);
  const uint64_t t = out_->tail.load(std::memory_order_acquire);
  size_t k = std::min<size_t>(n, kRingBytes - (h - t));
  if (k == 0) return 0;
  const size_t at = h % kRingBytes, first = std::min(k, kRingBytes - at);
  std::memcpy(out_->data + at, data, first);
  std::memcpy(out_->data, data + first, k - first);
  out_->head.store(h + k, std::memory_order_release);
  // Dekker with arm(): either the reader sees the new head after arming, or
  // we see its flag here.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (out_->reader_waits.load(std::memory_order_relaxed) && out_->reader_waits.exchange(0)) ring_doorbell();
  return k;
}

size_t ShmPair::try_recv(char* data, size_t n) {
  const uint64_t t = in_->tail.load(std::memory_order_relaxed);
  const uint64_t h = in_->head.load(std::memory_order_acquire);
  size_t k = std::min<size_t>(n, h - t);
  if (k == 0) {
    if (in_->closed.load(std::memory_order_acquire)) check_alive();
    return 0;
  }
  const size_t at = t % kRingBytes, first = std::min(k, kRingBytes - at);
  std::memcpy(data, in_->data + at, first);
  std::memcpy(data + first, in_->data, k - first);
  in_->tail.store(t + k, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (in_->writer_waits.load(std::memory_order_relaxed) && in_->writer_waits.exchange(0)) ring_doorbell();
  return k;
}

void ShmPair::arm(bool send) {
  (send ? out_->writer_waits : in_->reader_waits).store(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void ShmPair::ring_doorbell() {
  // One byte; EAGAIN means bytes are already waiting, which wakes the peer
  // just as well. A dead peer is noticed by its own side's checks.
  const char b = 1;
  (void)::send(sock_.fd(), &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void ShmPair::drain() {
  // After setup only doorbell bytes travel on this socket: EOF or an error
  // means the peer is gone.
  char b[64];
  for (;;) {
    ssize_t k = ::recv(sock_.fd(), b, sizeof b, MSG_DONTWAIT);
    if (k == sizeof b) continue;
    if (k > 0) return;
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (in_->closed.load(std::memory_order_acquire))
      throw RemoteError(peer_.describe() + " aborted its communicator (shared memory)");
    // A peer that wrote its last bytes and left (its job done, its process
    // ended) is gone only once they are read: its EOF can be seen between a
    // pass that found the ring empty and the bytes' arrival (seen under load:
    // a job's last all_reduce failed on rank 0 as rank 1 exited).
    if (k == 0 && unread()) return;
    throw RemoteError(peer_.describe() + " closed its connection (it exited, crashed or aborted its communicator)");
  }
}

bool ShmPair::unread() const {
  return in_->head.load(std::memory_order_acquire) != in_->tail.load(std::memory_order_relaxed);
}

void ShmPair::check_alive() {
  if (in_->closed.load(std::memory_order_acquire))
    throw RemoteError(peer_.describe() + " aborted its communicator (shared memory)");
  drain();
}

void ShmPair::shutdown() {
  out_->closed.store(1, std::memory_order_release);
  if (sock_.valid()) ::shutdown(sock_.fd(), SHUT_RDWR);
}

// ---- setup ------------------------------------------------------------------

namespace {

// Creates and maps a fresh segment; returns nullptr (and no name left
// behind) when this host cannot provide one.
void* create_segment(std::string& name) {
  name = "/dlcoll-" + std::to_string(::getpid()) + "-" + wire::to_hex(wire::random_bytes(8));
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
  void* p = MAP_FAILED;
  if (::posix_fallocate(fd, 0, ShmPair::segment_bytes()) == 0)
    p = ::mmap(nullptr, ShmPair::segment_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  for (int i = 0; i < 2; ++i) new (static_cast<Ring*>(p) + i) Ring();
  return p;
}

void* map_segment(const std::string& name) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
  void* p = ::mmap(nullptr, ShmPair::segment_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

std::vector<std::unique_ptr<Pair>> connect_local(std::vector<tcp::MeshPeer>& mesh, std::vector<bool>& local,
                                                 int rank, std::chrono::milliseconds timeout) {
  const int n = static_cast<int>(mesh.size());
  std::vector<std::unique_ptr<Pair>> out(n);
  std::vector<void*> seg(n, nullptr);
  std::vector<std::string> names(n);
  // 1. Lower rank of each pair creates the segment and sends its name ("" = no shm).
  for (int r = rank + 1; r < n; ++r) {
    if (!local[r]) continue;
    seg[r] = create_segment(names[r]);
    wire::write_frame(mesh[r].sock, wire::kData, seg[r] ? names[r] : "", mesh[r].info.describe());
  }
  // 2. Higher rank maps it and answers "1" (mapped) or "0".
  for (int r = 0; r < rank; ++r) {
    if (!local[r]) continue;
    auto f = wire::read_frame(mesh[r].sock, 256, timeout, mesh[r].info.describe());
    seg[r] = f.payload.empty() ? nullptr : map_segment(f.payload);
    if (!f.payload.empty()) wire::write_frame(mesh[r].sock, wire::kData, seg[r] ? "1" : "0", mesh[r].info.describe());
  }
  // 3. The creator unlinks once the answer is in.
  for (int r = rank + 1; r < n; ++r) {
    if (!local[r] || !seg[r]) continue;
    std::string ok;
    try {
      ok = wire::read_frame(mesh[r].sock, 16, timeout, mesh[r].info.describe()).payload;
    } catch (...) {
      ::shm_unlink(names[r].c_str());
      throw;
    }
    ::shm_unlink(names[r].c_str());
    if (ok != "1") { ::munmap(seg[r], ShmPair::segment_bytes()); seg[r] = nullptr; }
  }
  for (int r = 0; r < n; ++r) {
    if (!local[r]) continue;
    if (!seg[r]) { local[r] = false; continue; }
    out[r] = std::make_unique<ShmPair>(seg[r], rank < r, std::move(mesh[r].sock), mesh[r].info);
  }
  return out;
}

}  // namespace dl::coll::shm
