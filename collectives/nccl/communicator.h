#pragma once
// NCCL backend: collectives on CUDA device buffers, one ncclComm per
// communicator (sub-groups get their own), the ncclUniqueId exchanged through
// the Store. Operations are enqueued on the caller's CUDA stream (a
// cudaStream_t passed as void*, nullptr = the default stream) and return
// without waiting, as NCCL does; synchronize the stream to wait.
//
// Compiled when DLAUNCH_HAVE_NCCL is 1 (CMake option DLAUNCH_NCCL=ON/AUTO
// and the headers nccl.h + cuda_runtime.h under DLAUNCH_CUDA_ROOT). The
// libraries are loaded at the first use, not linked: libnccl.so.2 from
// $DLAUNCH_NCCL_LIBRARY, else the dynamic loader's search (LD_LIBRARY_PATH),
// else DLAUNCH_CUDA_ROOT's lib64; the CUDA runtime likewise from
// $DLAUNCH_CUDART_LIBRARY, libcudart.so.<major it was built with>, or that
// lib64. So one dlaunch binary starts on hosts without CUDA and drives NCCL
// on hosts with it (the NCCL a job's Python environment carries, e.g. pip's
// nvidia-nccl-cu13, through LD_LIBRARY_PATH). Where the backend cannot run,
// available() is false, unavailable_reason() says why and what to do, and the
// constructor throws UsageError with that.
//
// Thread-safety: one thread at a time per communicator. Failure: NCCL and
// CUDA errors throw dl::RemoteError with NCCL's message and the rank.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collectives/dtype.h"
#include "rendezvous/store.h"

namespace dl::coll::nccl {

// True when the backend is compiled in and at least one CUDA device is usable.
bool available();
// Number of CUDA devices (0 without CUDA or without the backend).
int device_count();
// The device a rank uses when none is given: the first of $DLAUNCH_GPUS (the
// rank's own GPUs as indices of what it sees, as dlaunch binds them, right
// with --gpus-per-rank K too), else $LOCAL_RANK, else `rank`; modulo `count`.
int default_device(int rank, int count);
// What to add to NCCL's "invalid usage" from ncclCommInitRank when this
// host's ranks outnumber the GPUs they see (NCCL takes one rank of a
// communicator per GPU): "" when they do not. $LOCAL_WORLD_SIZE and
// $DLAUNCH_GPUS are read, as dlaunch sets them.
std::string shared_gpu_hint(int device_count);
// "" when available(); else why not, naming the library or device and what to do.
std::string unavailable_reason();
// "NCCL 2.28.9 (libnccl.so.2), CUDA runtime 13.0" once loaded; "" otherwise.
std::string version();

// Device memory on the calling thread's current device (a communicator's
// constructor makes its device current). Move-only; freed on destruction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* data() const { return static_cast<char*>(p_); }
  size_t size() const { return bytes_; }
 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};
// Synchronous copies between host memory and device memory (any device pointer).
void copy_to_device(void* device, const void* host, size_t bytes);
void copy_to_host(void* host, const void* device, size_t bytes);

class NcclCommunicator {
 public:
  // Joins `size` ranks; rank 0 draws the unique id and publishes it under
  // <prefix>/nccl-id. Uses CUDA device `device` (-1: default_device()). Waits at most `timeout` for the id.
  NcclCommunicator(rdzv::Store& store, int rank, int size, int device = -1, std::string prefix = "dlcoll-nccl",
                   std::chrono::milliseconds timeout = std::chrono::milliseconds(300000));
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }

  // Same contracts as dl::coll::Communicator, on device memory, on `stream`.
  void all_reduce(const void* in, void* out, size_t count, DataType t, ReduceOp op, void* stream = nullptr);
  void broadcast(void* buf, size_t count, DataType t, int root, void* stream = nullptr);
  void reduce(const void* in, void* out, size_t count, DataType t, ReduceOp op, int root, void* stream = nullptr);
  void all_gather(const void* in, void* out, size_t count, DataType t, void* stream = nullptr);
  void reduce_scatter(const void* in, void* out, size_t count, DataType t, ReduceOp op, void* stream = nullptr);
  void all_to_all(const void* in, void* out, size_t count, DataType t, void* stream = nullptr);
  void send(const void* buf, size_t count, DataType t, int peer, void* stream = nullptr);
  void recv(void* buf, size_t count, DataType t, int peer, void* stream = nullptr);
  // Waits for everything enqueued on `stream`.
  void synchronize(void* stream = nullptr);

  // A communicator over `ranks` (called by every rank of this one; nullptr
  // on ranks not listed), through ncclCommSplit.
  std::unique_ptr<NcclCommunicator> new_group(const std::vector<int>& ranks);

 private:
  NcclCommunicator(void* comm, int rank, int size, int device);
  void* comm_ = nullptr;  // ncclComm_t
  int rank_ = 0, size_ = 1, device_ = 0;
};

}  // namespace dl::coll::nccl
