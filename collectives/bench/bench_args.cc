// Argument parsing of `dlaunch bench` (the options struct is in bench_command.h).
#include <cmath>
#include <cstdlib>

#include "collectives/bench/bench_command.h"
#include "errors/error.h"
#include "errors/user_number.h"

namespace dl::coll {
namespace {

constexpr double kMaxBenchBytes = 1024.0 * 1024 * 1024 * 1024;  // 1 TiB: more than any buffer a rank can hold

size_t parse_size(const std::string& s, const std::string& flag) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string suf = end ? std::string(end) : "";
  double mul = 1;
  if (suf == "K" || suf == "k" || suf == "KB") mul = 1024;
  else if (suf == "M" || suf == "m" || suf == "MB") mul = 1024.0 * 1024;
  else if (suf == "G" || suf == "g" || suf == "GB") mul = 1024.0 * 1024 * 1024;
  else if (!suf.empty() || end == s.c_str()) throw UsageError("dlaunch bench: " + flag + ": expected a size like 8, 64K, 256M or 1G, got '" + s + "'");
  if (!(v >= 0) || !(v * mul <= kMaxBenchBytes))  // NaN fails both
    throw UsageError("dlaunch bench: " + flag + " takes a size from 0 to 1T, got '" + s + "'");
  return static_cast<size_t>(std::llround(v * mul));
}

long parse_int(const std::string& s, const std::string& flag) {
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end) throw UsageError("dlaunch bench: " + flag + ": expected a number, got '" + s + "'");
  return v;
}

OpKind parse_kind(const std::string& s) {
  for (OpKind k : {OpKind::kAllReduce, OpKind::kAllGather, OpKind::kBroadcast, OpKind::kReduceScatter,
                   OpKind::kAllToAll, OpKind::kReduce})
    if (s == kind_name(k)) return k;
  throw UsageError("dlaunch bench: --op: unknown collective '" + s +
                   "'; use all_reduce, all_gather, broadcast, reduce_scatter, all_to_all or reduce");
}

}  // namespace

const char* const kBenchUsage =
    "usage: dlaunch -n N [dlaunch options] dlaunch bench [options]\n"
    "\n"
    "Measures a collective on every size from -b to -e, as nccl-tests do; rank 0\n"
    "prints one row per size (time, algbw, busbw, wrong elements, out of place and\n"
    "in place). Every rank joins through --url (env://: the variables dlaunch sets).\n"
    "\n"
    "  -b, --minbytes SIZE   smallest size (8; K, M, G suffixes)\n"
    "  -e, --maxbytes SIZE   largest size (256M)\n"
    "  -f, --stepfactor F    size multiplier between rows (2)\n"
    "  --op OP               all_reduce (default), all_gather, broadcast, reduce_scatter,\n"
    "                        all_to_all, reduce\n"
    "  -d, --dtype T         float32 (default), float64, float16, bfloat16, int8, uint8,\n"
    "                        int32, int64\n"
    "  -o, --redop OP        sum (default), prod, min, max, avg\n"
    "  -r, --root R          root of broadcast and reduce (0)\n"
    "  -n, --iters K         timed iterations per size (20)\n"
    "  -w, --warmup K        untimed iterations first (5)\n"
    "  -c, --check 0|1       check every element once per size (1)\n"
    "  --seed S              inputs are a function of (seed, rank, index) (1)\n"
    "  --device cpu|cuda     host buffers over TCP and shared memory (cpu, default), or\n"
    "                        each rank's GPU through NCCL (cuda; LOCAL_RANK's GPU, NCCL\n"
    "                        from LD_LIBRARY_PATH or DLAUNCH_NCCL_LIBRARY)\n"
    "  --url URL             rendezvous: env:// (default), tcp://HOST:PORT, file:///PATH\n"
    "  --json                one JSON document instead of the table\n"
    "\n"
    "Exit 0 when every element was right, 1 when any was wrong. docs/collectives.md.\n";

BenchOptions parse_bench_args(const std::vector<std::string>& args) {
  BenchOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw UsageError("dlaunch bench: " + a + " needs a value");
      return args[++i];
    };
    if (a == "-b" || a == "--minbytes") o.min_bytes = parse_size(value(), a);
    else if (a == "-e" || a == "--maxbytes") o.max_bytes = parse_size(value(), a);
    else if (a == "-f" || a == "--stepfactor") o.factor = parse_number("dlaunch bench: " + a, value(), 1, 1024);
    else if (a == "--op") o.op = parse_kind(value());
    else if (a == "-d" || a == "--dtype") o.dtype = parse_dtype(value());
    else if (a == "-o" || a == "--redop") o.redop = parse_op(value());
    else if (a == "-r" || a == "--root") o.root = static_cast<int>(parse_int(value(), a));
    else if (a == "-n" || a == "--iters") o.iters = static_cast<int>(parse_int(value(), a));
    else if (a == "-w" || a == "--warmup") o.warmup = static_cast<int>(parse_int(value(), a));
    else if (a == "-c" || a == "--check") o.check = parse_int(value(), a) != 0;
    else if (a == "--seed") o.seed = static_cast<uint64_t>(parse_int(value(), a));
    else if (a == "--url") o.url = value();
    else if (a == "--json") o.json = true;
    else if (a == "-h" || a == "--help") o.help = true;
    else if (a == "--device") {
      const std::string d = value();
      if (d != "cpu" && d != "cuda") throw UsageError("dlaunch bench: --device: expected cpu or cuda, got '" + d + "'");
      o.cuda = d == "cuda";
    }
    else throw UsageError("dlaunch bench: unknown option '" + a + "'; options: -b -e -f --op -d/--dtype -o/--redop "
                          "-r/--root -n/--iters -w/--warmup -c/--check --seed --url --json --device (dlaunch bench --help)");
  }
  if (o.iters < 1 || o.warmup < 0) throw UsageError("dlaunch bench: --iters must be >= 1 and --warmup >= 0");
  if (o.min_bytes > o.max_bytes) throw UsageError("dlaunch bench: -b is larger than -e");
  return o;
}

}  // namespace dl::coll
