// The one adapter file for NCCL and the CUDA runtime (scripts/check_architecture.py fences its headers).
#include "collectives/nccl/communicator.h"

#include <cstdlib>
#include <cstring>

#include "control/env_names.h"
#include "errors/error.h"
#include "hostfiles/binding.h"
#include "wire/shared_library.h"

#ifndef DLAUNCH_HAVE_NCCL
#define DLAUNCH_HAVE_NCCL 0
#endif

#if DLAUNCH_HAVE_NCCL
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <type_traits>
#include <vector>
#endif

#ifndef DLAUNCH_CUDA_LIBDIR
#define DLAUNCH_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

namespace dl::coll::nccl {

int default_device(int rank, int count) {
  if (count <= 0) return 0;
  int d = rank;
  if (const char* own = std::getenv(hostfiles::kDlaunchGpus); own && *own >= '0' && *own <= '9') d = std::atoi(own);
  else if (const char* lr = std::getenv(env::kLocalRank); lr && *lr) d = std::atoi(lr);
  return (d % count + count) % count;
}

std::string shared_gpu_hint(int device_count) {
  const char* lws = std::getenv(env::kLocalWorldSize);
  const int local = lws && *lws ? std::atoi(lws) : 0;
  if (device_count <= 0 || local <= device_count) return "";
  const char* own = std::getenv(hostfiles::kDlaunchGpus);
  return "; this host's " + std::to_string(local) + " ranks share " + std::to_string(device_count) + " GPU" +
         (device_count == 1 ? "" : "s") + (own && *own ? std::string(" (this one has GPU ") + own + ")" : "") +
         ", and NCCL takes one rank of a communicator per GPU: run at most " + std::to_string(device_count) +
         (device_count == 1 ? " rank" : " ranks") +
         " per host for NCCL, or use gloo or dlaunch's host collectives for ranks that share a GPU";
}

#if DLAUNCH_HAVE_NCCL
namespace {

// The entry points this file uses, resolved from the libraries at run time.
// Their types come from the headers, so a signature change is a compile error.
struct Api {
  std::string error;    // why not loaded ("" when loaded)
  std::string version;  // what was loaded
#define DL_NCCL_FN(name) decltype(&::name) name = nullptr;
#define DL_NCCL_ALL(X)                                                                                           \
  X(ncclGetErrorString) X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy)           \
  X(ncclAllReduce) X(ncclBroadcast) X(ncclReduce) X(ncclAllGather) X(ncclReduceScatter) X(ncclGroupStart)    \
  X(ncclGroupEnd) X(ncclSend) X(ncclRecv)
#define DL_CUDA_ALL(X)                                                                                           \
  X(cudaGetErrorString) X(cudaRuntimeGetVersion) X(cudaGetDeviceCount) X(cudaSetDevice) X(cudaFree)            \
  X(cudaMemcpy) X(cudaStreamSynchronize)
  DL_NCCL_ALL(DL_NCCL_FN)
  DL_CUDA_ALL(DL_NCCL_FN)
  cudaError_t (*cudaMalloc)(void**, size_t) = nullptr;  // overloaded in C++: the C entry point
  DL_NCCL_FN(ncclCommSplit)  // NCCL 2.18 and later; checked where used
#undef DL_NCCL_FN
};

// The library: the file `env_var` names, and only that one when it is set
// (a file the user chose that does not load is an error, not a reason to take
// another), else the first of `names` that loads. nullptr with every loader
// message in `why`.
void* open_library(const char* env_var, const std::vector<std::string>& names, std::string& loaded,
                   std::string& why) {
  const char* chosen = std::getenv(env_var);
  const std::vector<std::string> tried =
      chosen && *chosen ? std::vector<std::string>{chosen} : names;
  const auto lib = wire::open_shared_library(tried, RTLD_NOW | RTLD_LOCAL);
  if (lib.handle) {
    loaded = lib.name;
    return lib.handle;
  }
  why += (why.empty() || lib.errors.empty() ? "" : "; ") + lib.why();
  if (chosen && *chosen) why = std::string(env_var) + "=" + chosen + " does not load (" + why + ")";
  return nullptr;
}

Api load() {
  Api a;
  std::string cudart_name, nccl_name, why;
  const std::string major = std::to_string(CUDART_VERSION / 1000);
  void* cudart = open_library("DLAUNCH_CUDART_LIBRARY",
                              {"libcudart.so." + major, DLAUNCH_CUDA_LIBDIR "/libcudart.so." + major}, cudart_name, why);
  if (!cudart) {
    a.error = "nccl: the CUDA runtime (libcudart.so." + major + ") cannot be loaded: " + why +
              "; install the CUDA " + major + " runtime, add its lib directory to LD_LIBRARY_PATH, or point "
              "DLAUNCH_CUDART_LIBRARY at the file (pip's nvidia-cuda-runtime has it)";
    return a;
  }
  why.clear();
  void* lib = open_library("DLAUNCH_NCCL_LIBRARY", {"libnccl.so.2", DLAUNCH_CUDA_LIBDIR "/libnccl.so.2"}, nccl_name, why);
  if (!lib) {
    a.error = "nccl: libnccl.so.2 cannot be loaded: " + why +
              "; install NCCL, add its lib directory to LD_LIBRARY_PATH, or point DLAUNCH_NCCL_LIBRARY at the "
              "file (pip's nvidia-nccl-cu" + major + " has it under site-packages/nvidia/nccl/lib)";
    return a;
  }
  std::string missing;
  auto bind = [&missing](void* handle, const char* name, auto& fn, bool required = true) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
    if (!fn && required) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
#define DL_NCCL_SYM(name) bind(lib, #name, a.name);
#define DL_CUDA_SYM(name) bind(cudart, #name, a.name);
  DL_NCCL_ALL(DL_NCCL_SYM)
  DL_CUDA_ALL(DL_CUDA_SYM)
#undef DL_NCCL_SYM
#undef DL_CUDA_SYM
  bind(cudart, "cudaMalloc", a.cudaMalloc);
  bind(lib, "ncclCommSplit", a.ncclCommSplit, false);
  if (!missing.empty()) {
    a.error = "nccl: " + nccl_name + " or " + cudart_name + " lacks " + missing + " (too old a NCCL or CUDA runtime?)";
    return a;
  }
  int nv = 0, cv = 0;
  a.ncclGetVersion(&nv);
  a.cudaRuntimeGetVersion(&cv);
  a.version = "NCCL " + std::to_string(nv / 10000) + "." + std::to_string(nv / 100 % 100) + "." +
              std::to_string(nv % 100) + " (" + nccl_name + "), CUDA runtime " + std::to_string(cv / 1000) + "." +
              std::to_string(cv / 10 % 100) + " (" + cudart_name + ")";
  return a;
}

const Api& api() {
  static const Api a = load();
  return a;
}

// The loaded entry points; throws UsageError saying why when they are not.
const Api& need() {
  const Api& a = api();
  if (!a.error.empty()) throw UsageError(a.error);
  return a;
}

ncclComm_t C(void* p) { return static_cast<ncclComm_t>(p); }
cudaStream_t S(void* s) { return static_cast<cudaStream_t>(s); }

void check(ncclResult_t r, const char* what, int rank, const std::string& hint = "") {
  if (r != ncclSuccess && r != ncclInProgress)
    throw RemoteError(std::string("nccl: ") + what + " failed on rank " + std::to_string(rank) + ": " +
                      api().ncclGetErrorString(r) + hint);
}
void check(cudaError_t r, const char* what, int rank) {
  if (r != cudaSuccess)
    throw RemoteError(std::string("cuda: ") + what + " failed" + (rank >= 0 ? " on rank " + std::to_string(rank) : "") +
                      ": " + api().cudaGetErrorString(r));
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
  const Api& a = api();
  int n = 0;
  return a.error.empty() && a.cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::string unavailable_reason() {
  const Api& a = api();
  if (!a.error.empty()) return a.error;
  int n = 0;
  const cudaError_t rc = a.cudaGetDeviceCount(&n);
  if (rc != cudaSuccess)
    return std::string("nccl: the CUDA runtime sees no device (cudaGetDeviceCount: ") + a.cudaGetErrorString(rc) +
           "); check the driver, the device files and CUDA_VISIBLE_DEVICES";
  if (n == 0) return "nccl: no CUDA device is visible on this host (check CUDA_VISIBLE_DEVICES and the driver)";
  return "";
}

bool available() { return unavailable_reason().empty(); }

std::string version() { return api().version; }

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  check(need().cudaMalloc(&p_, bytes ? bytes : 1), ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str(), -1);
}
DeviceBuffer::~DeviceBuffer() {
  if (p_) api().cudaFree(p_);
}
void copy_to_device(void* device, const void* host, size_t bytes) {
  if (bytes) check(need().cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device", -1);
}
void copy_to_host(void* host, const void* device, size_t bytes) {
  if (bytes) check(need().cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host", -1);
}

NcclCommunicator::NcclCommunicator(rdzv::Store& store, int rank, int size, int device, std::string prefix,
                                   std::chrono::milliseconds timeout)
    : rank_(rank), size_(size) {
  const std::string why = unavailable_reason();
  if (!why.empty()) throw UsageError(why);
  const Api& a = api();
  const int n = device_count();  // > 0: unavailable_reason() said so
  if (device < 0) device = default_device(rank, n);
  device_ = device;
  check(a.cudaSetDevice(device_), "cudaSetDevice", rank_);
  ncclUniqueId id;
  const std::string key = prefix + "/nccl-id";
  if (rank == 0) {
    check(a.ncclGetUniqueId(&id), "ncclGetUniqueId", rank_);
    store.set(key, std::string(reinterpret_cast<char*>(&id), sizeof id));
  }
  store.wait({key}, timeout);
  std::string v = store.get(key);
  if (v.size() != sizeof id) throw RemoteError("nccl: malformed unique id under store key " + key);
  std::memcpy(&id, v.data(), sizeof id);
  ncclComm_t comm;
  const ncclResult_t rc = a.ncclCommInitRank(&comm, size, id, rank);
  check(rc, "ncclCommInitRank", rank_, rc == ncclInvalidUsage ? shared_gpu_hint(n) : "");
  comm_ = comm;
}

NcclCommunicator::NcclCommunicator(void* comm, int rank, int size, int device)
    : comm_(comm), rank_(rank), size_(size), device_(device) {}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) api().ncclCommDestroy(C(comm_));
}

void NcclCommunicator::all_reduce(const void* in, void* out, size_t n, DataType t, ReduceOp op, void* s) {
  check(api().ncclAllReduce(in, out, n, T(t), O(op), C(comm_), S(s)), "ncclAllReduce", rank_);
}
void NcclCommunicator::broadcast(void* buf, size_t n, DataType t, int root, void* s) {
  check(api().ncclBroadcast(buf, buf, n, T(t), root, C(comm_), S(s)), "ncclBroadcast", rank_);
}
void NcclCommunicator::reduce(const void* in, void* out, size_t n, DataType t, ReduceOp op, int root, void* s) {
  check(api().ncclReduce(in, out, n, T(t), O(op), root, C(comm_), S(s)), "ncclReduce", rank_);
}
void NcclCommunicator::all_gather(const void* in, void* out, size_t n, DataType t, void* s) {
  check(api().ncclAllGather(in, out, n, T(t), C(comm_), S(s)), "ncclAllGather", rank_);
}
void NcclCommunicator::reduce_scatter(const void* in, void* out, size_t n, DataType t, ReduceOp op, void* s) {
  check(api().ncclReduceScatter(in, out, n, T(t), O(op), C(comm_), S(s)), "ncclReduceScatter", rank_);
}
void NcclCommunicator::all_to_all(const void* in, void* out, size_t n, DataType t, void* s) {
  const size_t b = n * dtype_size(t);
  check(api().ncclGroupStart(), "ncclGroupStart", rank_);
  for (int j = 0; j < size_; ++j) {
    check(api().ncclSend(static_cast<const char*>(in) + j * b, n, T(t), j, C(comm_), S(s)), "ncclSend", rank_);
    check(api().ncclRecv(static_cast<char*>(out) + j * b, n, T(t), j, C(comm_), S(s)), "ncclRecv", rank_);
  }
  check(api().ncclGroupEnd(), "ncclGroupEnd", rank_);
}
void NcclCommunicator::send(const void* buf, size_t n, DataType t, int peer, void* s) {
  check(api().ncclSend(buf, n, T(t), peer, C(comm_), S(s)), "ncclSend", rank_);
}
void NcclCommunicator::recv(void* buf, size_t n, DataType t, int peer, void* s) {
  check(api().ncclRecv(buf, n, T(t), peer, C(comm_), S(s)), "ncclRecv", rank_);
}
void NcclCommunicator::synchronize(void* s) { check(api().cudaStreamSynchronize(S(s)), "cudaStreamSynchronize", rank_); }

std::unique_ptr<NcclCommunicator> NcclCommunicator::new_group(const std::vector<int>& ranks) {
  int key = -1;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == rank_) key = static_cast<int>(i);
  ncclComm_t out = nullptr;
  if (!api().ncclCommSplit) throw UsageError("nccl: new_group needs ncclCommSplit (NCCL 2.18 or later); " + version());
  check(api().ncclCommSplit(C(comm_), key >= 0 ? 0 : NCCL_SPLIT_NOCOLOR, key, &out, nullptr), "ncclCommSplit", rank_);
  if (key < 0) return nullptr;
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(out, key, static_cast<int>(ranks.size()), device_));
}

#else  // !DLAUNCH_HAVE_NCCL

static const char* const kNotBuilt =
    "nccl: this dlaunch was built without NCCL (configure with -DDLAUNCH_NCCL=ON and the CUDA toolkit's and "
    "NCCL's headers under DLAUNCH_CUDA_ROOT)";

int device_count() { return 0; }
bool available() { return false; }
std::string unavailable_reason() { return kNotBuilt; }
std::string version() { return ""; }

[[noreturn]] static void missing() { throw UsageError(kNotBuilt); }
DeviceBuffer::DeviceBuffer(size_t) { missing(); }
DeviceBuffer::~DeviceBuffer() = default;
void copy_to_device(void*, const void*, size_t) { missing(); }
void copy_to_host(void*, const void*, size_t) { missing(); }
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
