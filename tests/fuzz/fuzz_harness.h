#pragma once
// A small, deterministic mutation fuzzer for the decoders that read bytes a
// peer or a user controls. test_fuzz is built with ASan+UBSan (CMakeLists.txt
// here), so an out-of-bounds read, an overflow or a leak aborts the run; the
// harness itself fails a case when a decoder throws anything that is not a
// dl::Error, since only dl::Error maps to an exit code and a clean refusal.
//
// Adding a decoder: write a TEST_CASE that calls fuzz_decoder() with a
// callable and a few valid inputs to mutate. The callable returns true when
// the input was accepted, false when it was refused without an exception (a
// decoder that returns nullopt); a dl::Error it throws is a refusal too, and
// it throws FuzzFailure when an accepted input breaks a property. Everything is a function of FuzzOptions::seed, so a
// failure reproduces by rerunning the case; DL_FUZZ_SEED and DL_FUZZ_SCALE
// (a multiplier on every iteration count) explore further without a rebuild.
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dl::fuzz {

// splitmix64: tiny, fast, and the same sequence on every platform and libc
// (std::uniform_int_distribution is not specified bit-for-bit).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n > 0.
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
  bool one_in(size_t n) { return below(n) == 0; }

 private:
  uint64_t s_;
};

// Thrown by a decoder callable when an accepted input breaks a property
// (a round trip that does not match, say): fails the case like a crash.
struct FuzzFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct FuzzOptions {
  uint64_t seed = 1;
  size_t iterations = 10000;  // mutated inputs (seeds themselves always run first)
  size_t max_len = 4096;      // longer mutants are cut here
  // Tokens a mutation may insert whole: the grammar's words, so mutants get
  // past the first check more often than random bytes do.
  std::vector<std::string> dictionary;
  // One input in this many is random bytes instead of a mutant (0: never).
  size_t random_one_in = 8;
};

struct FuzzStats {
  size_t runs = 0, accepted = 0, refused = 0;
};

// Runs `decode` on every seed, then on `opt.iterations` mutants of them.
// Returns the counts; fails the current Catch2 test case (with the input as
// escaped text) on the first input whose decode throws anything but
// dl::Error, or when a seed is refused. Under a sanitizer, the input being decoded is printed when the
// sanitizer aborts the process.
FuzzStats fuzz_decoder(std::string_view name, const std::function<bool(std::string_view)>& decode,
                       const std::vector<std::string>& seeds, FuzzOptions opt);

// One mutant of `in` (1-4 stacked edits: bit flips, byte sets, inserts,
// deletes, duplications, big-endian length fields set to edge values,
// dictionary tokens, splices with `other`). Exposed for decoders that need
// their own driver (a stream fed in chunks).
std::string mutate(Rng& rng, std::string in, std::string_view other, const FuzzOptions& opt);

// "ab\x00\xff" style, for failure messages.
std::string escaped(std::string_view s, size_t max = 512);

}  // namespace dl::fuzz
