// The one adapter file for NCCL and the CUDA runtime (STYLE.md point 3).
#include "collectives/nccl/communicator.h"

#include <cstdlib>
#include <cstring>

#include "control/env_names.h"
#include "errors/error.h"

#ifndef DLAUNCH_HAVE_NCCL
#define DLAUNCH_HAVE_NCCL 0
#endif

#if DLAUNCH_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace dl::coll::nccl {

#if DLAUNCH_HAVE_NCCL
namespace {

ncclComm_t C(void* p) { return static_cast<ncclComm_t>(p); }
cudaStream_t S(void* s) { return static_cast<cudaStream_t>(s); }

void check(ncclResult_t r, const char* what, int rank) {
  if (r != ncclSuccess && r != ncclInProgress)
    throw RemoteError(std::string("nccl: ") + what + " failed on rank " + std::to_string(rank) + ": " +
                      ncclGetErrorString(r));
}
void check(cudaError_t r, const char* what, int rank) {
  if (r != cudaSuccess)
    throw RemoteError(std::string("cuda: ") + what + " failed on rank " + std::to_string(rank) + ": " +
                      cudaGetErrorString(r));
}

ncclDataType_t T(DataType t) {
  switch (t) {
    case DataType::kInt8: return ncclInt8;
    case DataType::kUint8: return ncclUint8;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
  }
  throw UsageError("nccl: unknown dtype");
}

ncclRedOp_t O(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kProd: return ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kAvg: return ncclAvg;
  }
  throw UsageError("nccl: unknown op");
}

}  // namespace

int device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

bool available() { return device_count() > 0; }

NcclCommunicator::NcclCommunicator(rdzv::Store& store, int rank, int size, int device, std::string prefix,
                                   std::chrono::milliseconds timeout)
    : rank_(rank), size_(size) {
  const int n = device_count();
  if (n == 0) throw UsageError("nccl: no CUDA device is visible on this host (check CUDA_VISIBLE_DEVICES and the driver)");
  if (device < 0) {
    const char* lr = std::getenv(env::kLocalRank);
    device = (lr ? std::atoi(lr) : rank) % n;
  }
  device_ = device;
  check(cudaSetDevice(device_), "cudaSetDevice", rank_);
  ncclUniqueId id;
  const std::string key = prefix + "/nccl-id";
  if (rank == 0) {
    check(ncclGetUniqueId(&id), "ncclGetUniqueId", rank_);
    store.set(key, std::string(reinterpret_cast<char*>(&id), sizeof id));
  }
  store.wait({key}, timeout);
  std::string v = store.get(key);
  if (v.size() != sizeof id) throw RemoteError("nccl: malformed unique id under store key " + key);
  std::memcpy(&id, v.data(), sizeof id);
  ncclComm_t comm;
  check(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank", rank_);
  comm_ = comm;
}

NcclCommunicator::NcclCommunicator(void* comm, int rank, int size, int device)
    : comm_(comm), rank_(rank), size_(size), device_(device) {}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) ncclCommDestroy(C(comm_));
}

void NcclCommunicator::all_reduce(const void* in, void* out, size_t n, DataType t, ReduceOp op, void* s) {
  check(ncclAllReduce(in, out, n, T(t), O(op), C(comm_), S(s)), "ncclAllReduce", rank_);
}
void NcclCommunicator::broadcast(void* buf, size_t n, DataType t, int root, void* s) {
  check(ncclBroadcast(buf, buf, n, T(t), root, C(comm_), S(s)), "ncclBroadcast", rank_);
}
void NcclCommunicator::reduce(const void* in, void* out, size_t n, DataType t, ReduceOp op, int root, void* s) {
  check(ncclReduce(in, out, n, T(t), O(op), root, C(comm_), S(s)), "ncclReduce", rank_);
}
void NcclCommunicator::all_gather(const void* in, void* out, size_t n, DataType t, void* s) {
  check(ncclAllGather(in, out, n, T(t), C(comm_), S(s)), "ncclAllGather", rank_);
}
void NcclCommunicator::reduce_scatter(const void* in, void* out, size_t n, DataType t, ReduceOp op, void* s) {
  check(ncclReduceScatter(in, out, n, T(t), O(op), C(comm_), S(s)), "ncclReduceScatter", rank_);
}
void NcclCommunicator::all_to_all(const void* in, void* out, size_t n, DataType t, void* s) {
  const size_t b = n * dtype_size(t);
  check(ncclGroupStart(), "ncclGroupStart", rank_);
  for (int j = 0; j < size_; ++j) {
    check(ncclSend(static_cast<const char*>(in) + j * b, n, T(t), j, C(comm_), S(s)), "ncclSend", rank_);
    check(ncclRecv(static_cast<char*>(out) + j * b, n, T(t), j, C(comm_), S(s)), "ncclRecv", rank_);
  }
  check(ncclGroupEnd(), "ncclGroupEnd", rank_);
}
void NcclCommunicator::send(const void* buf, size_t n, DataType t, int peer, void* s) {
  check(ncclSend(buf, n, T(t), peer, C(comm_), S(s)), "ncclSend", rank_);
}
void NcclCommunicator::recv(void* buf, size_t n, DataType t, int peer, void* s) {
  check(ncclRecv(buf, n, T(t), peer, C(comm_), S(s)), "ncclRecv", rank_);
}
void NcclCommunicator::synchronize(void* s) { check(cudaStreamSynchronize(S(s)), "cudaStreamSynchronize", rank_); }

std::unique_ptr<NcclCommunicator> NcclCommunicator::new_group(const std::vector<int>& ranks) {
  int key = -1;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == rank_) key = static_cast<int>(i);
  ncclComm_t out = nullptr;
  check(ncclCommSplit(C(comm_), key >= 0 ? 0 : NCCL_SPLIT_NOCOLOR, key, &out, nullptr), "ncclCommSplit", rank_);
  if (key < 0) return nullptr;
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(out, key, static_cast<int>(ranks.size()), device_));
}

#else  // !DLAUNCH_HAVE_NCCL

int device_count() { return 0; }
bool available() { return false; }

[[noreturn]] static void missing() {
  throw UsageError("nccl: this dlaunch was built without NCCL (configure with -DDLAUNCH_NCCL=ON and a CUDA "
                   "toolkit with NCCL under DLAUNCH_CUDA_ROOT)");
}
NcclCommunicator::NcclCommunicator(rdzv::Store&, int, int, int, std::string, std::chrono::milliseconds) { missing(); }
NcclCommunicator::NcclCommunicator(void*, int, int, int) { missing(); }
NcclCommunicator::~NcclCommunicator() = default;
void NcclCommunicator::all_reduce(const void*, void*, size_t, DataType, ReduceOp, void*) { missing(); }
void NcclCommunicator::broadcast(void*, size_t, DataType, int, void*) { missing(); }
void NcclCommunicator::reduce(const void*, void*, size_t, DataType, ReduceOp, int, void*) { missing(); }
void NcclCommunicator::all_gather(const void*, void*, size_t, DataType, void*) { missing(); }
void NcclCommunicator::reduce_scatter(const void*, void*, size_t, DataType, ReduceOp, void*) { missing(); }
void NcclCommunicator::all_to_all(const void*, void*, size_t, DataType, void*) { missing(); }
void NcclCommunicator::send(const void*, size_t, DataType, int, void*) { missing(); }
void NcclCommunicator::recv(void*, size_t, DataType, int, void*) { missing(); }
void NcclCommunicator::synchronize(void*) { missing(); }
std::unique_ptr<NcclCommunicator> NcclCommunicator::new_group(const std::vector<int>&) { missing(); }

#endif

}  // namespace dl::coll::nccl
