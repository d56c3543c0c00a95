#include "collectives/bench/bench_command.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>

#include "collectives/bench/bench_report.h"
#include "collectives/half.h"
#include "collectives/nccl/communicator.h"
#include "errors/error.h"
#include "errors/exit_codes.h"
#include "wire/record.h"

namespace dl::coll {
namespace {

using BClock = std::chrono::steady_clock;

double load(const char* b, size_t i, DataType t) {
  switch (t) {
    case DataType::kInt8: return reinterpret_cast<const int8_t*>(b)[i];
    case DataType::kUint8: return reinterpret_cast<const uint8_t*>(b)[i];
    case DataType::kInt32: return reinterpret_cast<const int32_t*>(b)[i];
    case DataType::kInt64: return double(reinterpret_cast<const int64_t*>(b)[i]);
    case DataType::kFloat16: return half_to_float(reinterpret_cast<const uint16_t*>(b)[i]);
    case DataType::kBFloat16: return bf16_to_float(reinterpret_cast<const uint16_t*>(b)[i]);
    case DataType::kFloat32: return reinterpret_cast<const float*>(b)[i];
    case DataType::kFloat64: return reinterpret_cast<const double*>(b)[i];
  }
  return 0;
}

void store(char* b, size_t i, DataType t, double v) {
  switch (t) {
    case DataType::kInt8: reinterpret_cast<int8_t*>(b)[i] = int8_t(int64_t(v)); break;
    case DataType::kUint8: reinterpret_cast<uint8_t*>(b)[i] = uint8_t(int64_t(v)); break;
    case DataType::kInt32: reinterpret_cast<int32_t*>(b)[i] = int32_t(int64_t(v)); break;
    case DataType::kInt64: reinterpret_cast<int64_t*>(b)[i] = int64_t(v); break;
    case DataType::kFloat16: reinterpret_cast<uint16_t*>(b)[i] = float_to_half(float(v)); break;
    case DataType::kBFloat16: reinterpret_cast<uint16_t*>(b)[i] = float_to_bf16(float(v)); break;
    case DataType::kFloat32: reinterpret_cast<float*>(b)[i] = float(v); break;
    case DataType::kFloat64: reinterpret_cast<double*>(b)[i] = v; break;
  }
}

// Inputs from (seed, rank, index): small integers, so every reduction over
// a few ranks is exact in every dtype.
double input(const BenchOptions& o, int rank, size_t i) {
  const bool uns = o.dtype == DataType::kUint8;
  const uint64_t k = o.seed * 7 + uint64_t(rank) * 3 + i * 5;
  if (o.redop == ReduceOp::kProd) return uns ? 1 + k % 2 : (k % 3 == 2 ? -1.0 : double(k % 3 + 1));
  if (o.redop == ReduceOp::kMin || o.redop == ReduceOp::kMax) return double(k % 13) - (uns ? 0 : 6);
  return double(k % 9) - (uns ? 0 : 4);
}

double reduced(const BenchOptions& o, int n, size_t i) {
  double acc = input(o, 0, i);
  for (int r = 1; r < n; ++r) {
    double v = input(o, r, i);
    switch (o.redop) {
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      default: acc += v;
    }
  }
  if (o.redop != ReduceOp::kAvg) return acc;
  bool fl = o.dtype >= DataType::kFloat16;
  if (!fl) return double(int64_t(acc) / n);
  return o.dtype == DataType::kFloat64 ? acc / n : double(float(acc) / float(n));
}

// One measured configuration: count elements per the nccl-tests convention
// (all_gather: output total, reduce_scatter/all_to_all: input total). The
// collectives run on `in`/`out`: host memory through `c`, or device memory
// through `gpu`; the checks stage through the host buffers `hin`/`hout`.
struct Case {
  Communicator& c;
  nccl::NcclCommunicator* gpu;
  const BenchOptions& o;
  size_t count, esz;
  char* in;
  char* out;
  std::vector<char>& hin;
  std::vector<char>& hout;
  int n() const { return c.size(); }
  int me() const { return c.rank(); }
  size_t block() const { return count / n(); }

  // Pointers for out-of-place or in-place.
  std::pair<char*, char*> bufs(bool inplace) {
    if (!inplace) return {in, out};
    if (o.op == OpKind::kAllGather) return {out + me() * block() * esz, out};
    if (o.op == OpKind::kReduceScatter) return {in, in + me() * block() * esz};
    return {in, in};
  }

  void run(bool inplace) {
    auto [i, r] = bufs(inplace);
    // The host communicator and NCCL's take the same arguments in the same order.
    auto go = [&](auto& x) {
      switch (o.op) {
        case OpKind::kAllReduce: x.all_reduce(i, r, count, o.dtype, o.redop); break;
        case OpKind::kReduce: x.reduce(i, r, count, o.dtype, o.redop, o.root); break;
        case OpKind::kBroadcast: x.broadcast(i, count, o.dtype, o.root); break;
        case OpKind::kAllGather: x.all_gather(i, r, block(), o.dtype); break;
        case OpKind::kReduceScatter: x.reduce_scatter(i, r, block(), o.dtype, o.redop); break;
        case OpKind::kAllToAll: x.all_to_all(i, r, block(), o.dtype); break;
        default: throw UsageError("dlaunch bench: unsupported op");
      }
    };
    if (gpu) go(*gpu);
    else go(c);
  }

  // Waits for what run() enqueued (NCCL returns before the GPU is done).
  void sync() {
    if (gpu) gpu->synchronize();
  }
  void put(char* dst, const char* host, size_t bytes) {
    if (gpu) nccl::copy_to_device(dst, host, bytes);
    else if (dst != host) std::memmove(dst, host, bytes);
  }
  void get(char* host, const char* src, size_t bytes) {
    if (gpu) nccl::copy_to_host(host, src, bytes);
    else if (host != src) std::memmove(host, src, bytes);
  }

  // Fills the inputs, runs once, counts wrong elements on this rank.
  size_t check(bool inplace) {
    auto [i, r] = bufs(inplace);
    const size_t b = block();
    const bool gather = o.op == OpKind::kAllGather;
    const size_t n_in = gather ? b : count;
    for (size_t k = 0; k < n_in; ++k) store(hin.data(), k, o.dtype, input(o, me(), k));
    put(i, hin.data(), n_in * esz);
    run(inplace);
    sync();
    const bool per_rank = o.op == OpKind::kReduceScatter;
    const size_t n_out = gather || o.op == OpKind::kAllToAll ? b * n() : per_rank ? b : count;
    get(hout.data(), o.op == OpKind::kBroadcast ? i : r, n_out * esz);
    const char* res = hout.data();
    size_t bad = 0;
    auto expect = [&](size_t k, double want) {
      char tmp[8];
      store(tmp, 0, o.dtype, want);
      if (load(res, k, o.dtype) != load(tmp, 0, o.dtype)) ++bad;
    };
    switch (o.op) {
      case OpKind::kAllReduce: for (size_t k = 0; k < count; ++k) expect(k, reduced(o, n(), k)); break;
      case OpKind::kReduce:
        if (me() == o.root) for (size_t k = 0; k < count; ++k) expect(k, reduced(o, n(), k));
        break;
      case OpKind::kBroadcast: for (size_t k = 0; k < count; ++k) expect(k, input(o, o.root, k)); break;
      case OpKind::kAllGather: for (size_t k = 0; k < b * n(); ++k) expect(k, input(o, int(k / b), k % b)); break;
      case OpKind::kReduceScatter: for (size_t k = 0; k < b; ++k) expect(k, reduced(o, n(), me() * b + k)); break;
      case OpKind::kAllToAll:
        for (size_t k = 0; k < b * n(); ++k) expect(k, input(o, int(k / b), me() * b + k % b));
        break;
      default: break;
    }
    return bad;
  }

  // Average microseconds per operation, the slowest rank's.
  double time(bool inplace) {
    for (int k = 0; k < o.warmup; ++k) run(inplace);
    sync();
    c.barrier();
    auto t0 = BClock::now();
    for (int k = 0; k < o.iters; ++k) run(inplace);
    sync();
    double us = std::chrono::duration<double, std::micro>(BClock::now() - t0).count() / o.iters;
    c.all_reduce(&us, &us, 1, DataType::kFloat64, ReduceOp::kMax);
    return us;
  }
};

size_t sum_over_ranks(Communicator& c, size_t v) {
  int64_t x = static_cast<int64_t>(v);
  c.all_reduce(&x, &x, 1, DataType::kInt64, ReduceOp::kSum);
  return static_cast<size_t>(x);
}

}  // namespace

double busbw_factor(OpKind op, int n) {
  switch (op) {
    case OpKind::kAllReduce: return 2.0 * (n - 1) / n;
    case OpKind::kAllGather: case OpKind::kReduceScatter: case OpKind::kAllToAll: return double(n - 1) / n;
    default: return 1.0;
  }
}

size_t run_bench(Communicator& comm, const BenchOptions& o, std::ostream& os, nccl::NcclCommunicator* gpu) {
  const int n = comm.size();
  const size_t esz = dtype_size(o.dtype);
  const bool reduces = o.op == OpKind::kAllReduce || o.op == OpKind::kReduce || o.op == OpKind::kReduceScatter;
  const bool rooted = o.op == OpKind::kBroadcast || o.op == OpKind::kReduce;
  const size_t unit = (o.op == OpKind::kAllGather || o.op == OpKind::kReduceScatter || o.op == OpKind::kAllToAll) ? n : 1;
  const size_t cap = o.max_bytes + esz * unit;
  std::vector<char> hin(cap), hout(cap);
  std::optional<nccl::DeviceBuffer> din, dout;
  if (gpu) din.emplace(cap), dout.emplace(cap);
  char* in = gpu ? din->data() : hin.data();
  char* out = gpu ? dout->data() : hout.data();
  BenchReport report{kind_name(o.op), n, o.iters, {}, gpu ? "cuda" : "cpu", gpu ? nccl::version() : "dlcoll", 0};
  char line[256];
  if (comm.rank() == 0 && !o.json) {
    os << "# dlaunch bench: " << kind_name(o.op) << ", " << n << " ranks, " << o.iters << " iterations, "
       << o.warmup << " warmup, "
       << (gpu ? "CUDA device buffers through " + nccl::version() : std::string("host buffers over TCP/shared memory"))
       << "\n"
       << (n == 1 ? "# one rank: nothing crosses a link, so busbw is 0 and the times are each call's own cost\n" : "")
       << "#                                                   out-of-place                       in-place\n"
       << "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n"
       << "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\n";
  }
  size_t total_wrong = 0;
  double bw_sum = 0;
  int rows_n = 0;
  for (double sz = double(o.min_bytes); sz <= double(o.max_bytes) + 0.5; sz *= o.factor) {
    size_t count = size_t(sz) / esz / unit * unit;
    const size_t bytes = count * esz;
    Case cs{comm, gpu, o, count, esz, in, out, hin, hout};
    double t[2];
    size_t wrong[2] = {0, 0};
    for (int ip = 0; ip < 2; ++ip) {
      t[ip] = cs.time(ip == 1);
      if (o.check) wrong[ip] = sum_over_ranks(comm, cs.check(ip == 1));
      total_wrong += wrong[ip];
    }
    const double f = busbw_factor(o.op, n);
    const double alg0 = bytes / t[0] / 1e3, alg1 = bytes / t[1] / 1e3;  // B/us = MB/s; /1e3 = GB/s
    bw_sum += alg0 * f;
    ++rows_n;
    if (comm.rank() != 0) continue;
    const char* redop = reduces ? op_name(o.redop) : "none";
    const int root = rooted ? o.root : -1;
    if (o.json) {
      report.rows.push_back({bytes, count, dtype_name(o.dtype), redop, root, {t[0], alg0, alg0 * f, wrong[0]},
                             {t[1], alg1, alg1 * f, wrong[1]}});
    } else {
      std::snprintf(line, sizeof line, "%12zu  %12zu  %8s  %6s  %6d  %8.2f  %6.2f  %6.2f  %6zu  %8.2f  %6.2f  %6.2f  %6zu\n",
                    bytes, count, dtype_name(o.dtype), redop, root, t[0], alg0, alg0 * f, wrong[0], t[1], alg1,
                    alg1 * f, wrong[1]);
      os << line << std::flush;
    }
  }
  if (comm.rank() == 0) {
    if (o.json) {
      report.wrong = total_wrong;
      os << wire::indent_json(wire::encode_record(report)) << "\n";
    } else {
      os << "# Out of bounds values : " << total_wrong << (total_wrong ? " FAILED" : " OK") << "\n"
         << "# Avg bus bandwidth    : " << (rows_n ? bw_sum / rows_n : 0) << "\n";
    }
  }
  return total_wrong;
}

int run_bench_command(const std::vector<std::string>& args) {
  try {
    BenchOptions o = parse_bench_args(args);
    if (o.help) {
      std::cout << kBenchUsage;
      return exit_codes::kOk;
    }
    // Refused before joining, so every rank of a job says why at once
    // instead of the others waiting on the ones that could not join.
    if (o.cuda && !nccl::available()) throw UsageError("--device cuda: " + nccl::unavailable_reason());
    auto comm = Communicator::from_url(o.url);
    if (o.root < 0 || o.root >= comm->size()) throw UsageError("dlaunch bench: --root " + std::to_string(o.root) + " is not a rank");
    std::unique_ptr<nccl::NcclCommunicator> gpu;
    if (o.cuda) gpu = std::make_unique<nccl::NcclCommunicator>(comm->store(), comm->rank(), comm->size());
    size_t wrong = run_bench(*comm, o, std::cout, gpu.get());
    std::cout.flush();
    return wrong == 0 ? exit_codes::kOk : exit_codes::kFailure;
  } catch (const Error& e) {
    std::cout.flush();
    std::string what = e.what();
    if (what.rfind("dlaunch bench: ", 0) == 0) what.erase(0, 15);
    std::cerr << "dlaunch bench: error: " << what << "\n";
    return exit_code_for(e.kind());
  }
}

}  // namespace dl::coll
