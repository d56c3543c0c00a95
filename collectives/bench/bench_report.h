#pragma once
// `dlaunch bench --json`: one record (wire/record.h) on stdout, written by
// bench_command.cc and read by `dlaunch doctor`'s all_reduce stage. Times
// in microseconds, bandwidths in GB/s (docs/benchmarks.md gives algbw's and
// busbw's formulas); a bandwidth JSON cannot hold (a time of 0) is null.
#include <cstdint>
#include <string>
#include <vector>

namespace dl::coll {

struct BenchTiming {
  double time_us = 0, algbw = 0, busbw = 0;
  uint64_t wrong = 0;  // elements that differ from the expected result, over all ranks
  template <class S, class V> static void fields(S& s, V& v) {
    v("time_us", s.time_us), v("algbw", s.algbw), v("busbw", s.busbw), v("wrong", s.wrong);
  }
};

// One message size.
struct BenchRow {
  uint64_t size = 0, count = 0;  // bytes and elements
  std::string type, redop;       // "float32", "sum" ("none" for a collective without one)
  int root = -1;                 // broadcast's and reduce's; -1 for the others
  BenchTiming out_of_place, in_place;
  template <class S, class V> static void fields(S& s, V& v) {
    v("size", s.size), v("count", s.count), v("type", s.type), v("redop", s.redop), v("root", s.root);
    v("out_of_place", s.out_of_place), v("in_place", s.in_place);
  }
};

struct BenchReport {
  std::string op;  // "all_reduce", ...
  int ranks = 0, iters = 0;
  std::vector<BenchRow> rows;
  std::string device;   // "cuda" or "cpu"
  std::string library;  // NCCL's version, or "dlcoll"
  uint64_t wrong = 0;   // over every row
  template <class S, class V> static void fields(S& s, V& v) {
    v("op", s.op), v("ranks", s.ranks), v("iters", s.iters), v("rows", s.rows), v("device", s.device);
    v("library", s.library), v("wrong", s.wrong);
  }
};

}  // namespace dl::coll
