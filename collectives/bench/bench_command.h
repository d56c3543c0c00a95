#pragma once
// `dlaunch bench`: the nccl-tests style collective benchmark, run inside
// every rank (`dlaunch -n 4 dlaunch bench -b 8 -e 256M -f 2 --op all_reduce`).
// Rank 0 prints one row per size: size, count, type, redop, root, then time
// (us), algbw, busbw (GB/s) and #wrong for out-of-place and in-place.
// Formulas: docs/benchmarks.md.
#include <iosfwd>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/op_header.h"

namespace dl::coll {

struct BenchOptions {
  size_t min_bytes = 8;               // -b
  size_t max_bytes = 256 << 20;       // -e
  double factor = 2;                  // -f: size multiplier between rows
  OpKind op = OpKind::kAllReduce;     // --op all_reduce|all_gather|broadcast|reduce_scatter|all_to_all|reduce
  DataType dtype = DataType::kFloat32;  // -d/--dtype
  ReduceOp redop = ReduceOp::kSum;    // -o/--redop
  int root = 0;                       // -r/--root (broadcast, reduce)
  int iters = 20;                     // -n/--iters timed iterations per size
  int warmup = 5;                     // -w/--warmup
  bool check = true;                  // -c/--check 0|1: verify every element once per size
  bool json = false;                  // --json: one JSON document instead of the table
  uint64_t seed = 1;                  // --seed: inputs are a function of (seed, rank, index)
  std::string url = "env://";         // --url: rendezvous URL
  bool help = false;                  // -h/--help: print the usage, run nothing
  bool cuda = false;                  // --device cpu|cuda: where the buffers live (cuda: NCCL on
                                      // the rank's GPU, LOCAL_RANK modulo the visible devices)
};

// What `dlaunch bench --help` (and `dlaunch help bench`) prints.
extern const char* const kBenchUsage;

// Parses bench arguments (sizes accept K, M, G suffixes). Throws UsageError.
BenchOptions parse_bench_args(const std::vector<std::string>& args);

namespace nccl { class NcclCommunicator; }

// Runs the benchmark on `comm`; rank 0 writes the table (or JSON) to `out`.
// With `gpu`, the collectives measured run through it on device buffers, and
// `comm` carries only the barriers and the result counts. Returns the total
// number of wrong elements over all ranks and sizes.
size_t run_bench(Communicator& comm, const BenchOptions& opt, std::ostream& out,
                 nccl::NcclCommunicator* gpu = nullptr);

// The subcommand: parses args, joins through --url (default env://), runs.
// Returns 0 when every element was right, 1 when any was wrong, the error's
// exit code (errors/exit_codes.h) on failure, printing "dlaunch bench: error: ...".
int run_bench_command(const std::vector<std::string>& args);

// nccl-tests' bus bandwidth factor for `op` on n ranks.
double busbw_factor(OpKind op, int n);

}  // namespace dl::coll
