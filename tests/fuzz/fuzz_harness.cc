#include "tests/fuzz/fuzz_harness.h"

#include <catch2/catch.hpp>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <typeinfo>

#include "errors/error.h"

#if defined(__SANITIZE_ADDRESS__) && __has_include(<sanitizer/common_interface_defs.h>)
#include <sanitizer/common_interface_defs.h>
#define DL_FUZZ_DEATH_CALLBACK 1
#endif

// Defaults for a run without ASAN_OPTIONS/UBSAN_OPTIONS (ctest sets none): a
// UBSan report with its stack, and the process ends at the first report.
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }
extern "C" const char* __asan_default_options() { return "abort_on_error=0:detect_leaks=1"; }

namespace dl::fuzz {
namespace {

// What is being decoded right now, for the sanitizer's death callback: an
// ASan or UBSan report ends the process, and the input is what reproduces it.
const char* g_case = "";
size_t g_iteration = 0;
const std::string* g_input = nullptr;

[[maybe_unused]] void print_current_input() {
  if (!g_input) return;
  std::fprintf(stderr, "\nfuzz case '%s', input %zu (%zu bytes): \"%s\"\n", g_case, g_iteration, g_input->size(),
               escaped(*g_input, 4096).c_str());
}

std::string type_name(const std::type_info& t) {
  int status = 0;
  char* d = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && d ? d : t.name();
  std::free(d);
  return name;
}

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

uint32_t interesting32(Rng& rng, size_t len) {
  static constexpr uint32_t kEdges[] = {0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 0x7fffffff,
                                        0x80000000, 0xfffffffe, 0xffffffff};
  switch (rng.below(3)) {
    case 0: return kEdges[rng.below(std::size(kEdges))];
    case 1: return static_cast<uint32_t>(len + rng.below(9)) - 4;  // around the real size: off by a few
    default: return static_cast<uint32_t>(rng.next());
  }
}

uint64_t interesting64(Rng& rng) {
  static constexpr uint64_t kEdges[] = {0, 1, 0x7fffffffffffffffull, 0x8000000000000000ull, 0xffffffffffffffffull,
                                        0xffffffff, 0x100000000ull};
  return rng.one_in(4) ? rng.next() : kEdges[rng.below(std::size(kEdges))];
}

void put_be(std::string& s, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s[at + i] = static_cast<char>(v >> (8 * (bytes - 1 - i)));
}

std::string random_input(Rng& rng, const FuzzOptions& opt) {
  std::string s;
  const size_t len = rng.below(std::min<size_t>(opt.max_len, 256) + 1);
  // Text grammars refuse random bytes at the first character; a soup of
  // their own words and printable bytes gets further.
  const bool soup = !opt.dictionary.empty() && rng.one_in(2);
  while (s.size() < len) {
    if (soup && rng.one_in(3)) s += opt.dictionary[rng.below(opt.dictionary.size())];
    else s.push_back(static_cast<char>(soup ? 32 + rng.below(95) : rng.below(256)));
  }
  return s;
}

}  // namespace

std::string escaped(std::string_view s, size_t max) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\' || c == '"') out += '\\', out += static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c >= 32 && c < 127) out += static_cast<char>(c);
    else {
      char b[5];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  if (s.size() > max) out += "...(" + std::to_string(s.size() - max) + " more bytes)";
  return out;
}

std::string mutate(Rng& rng, std::string s, std::string_view other, const FuzzOptions& opt) {
  const size_t edits = 1 + rng.below(4);
  for (size_t e = 0; e < edits; ++e) {
    const size_t at = s.empty() ? 0 : rng.below(s.size());
    switch (rng.below(10)) {
      case 0:  // flip one bit
        if (!s.empty()) s[at] = static_cast<char>(s[at] ^ (1 << rng.below(8)));
        break;
      case 1: {  // set one byte, often to a value parsers special-case
        static constexpr char kBytes[] = {0, '\xff', '\x7f', '\x80', '\n', ' ', '\t', '0', '9', ':', '[', ']'};
        if (!s.empty()) s[at] = rng.one_in(2) ? kBytes[rng.below(sizeof kBytes)] : static_cast<char>(rng.next());
        break;
      }
      case 2: {  // insert a few random bytes
        std::string ins(1 + rng.below(8), '\0');
        for (char& c : ins) c = static_cast<char>(rng.next());
        s.insert(s.empty() ? 0 : rng.below(s.size() + 1), ins);
        break;
      }
      case 3:  // delete a range
        if (!s.empty()) s.erase(at, 1 + rng.below(std::min<size_t>(16, s.size() - at)));
        break;
      case 4: {  // duplicate a range somewhere else (repeated fields, keys)
        if (s.empty()) break;
        const std::string piece = s.substr(at, 1 + rng.below(std::min<size_t>(64, s.size() - at)));
        s.insert(rng.below(s.size() + 1), piece);
        break;
      }
      case 5:  // a big-endian u32 (a length or count field) set to an edge value
        if (s.size() >= 4) put_be(s, rng.below(s.size() - 3), interesting32(rng, s.size()), 4);
        break;
      case 6:  // a big-endian i64 (a timeout, delta or count) set to an edge value
        if (s.size() >= 8) put_be(s, rng.below(s.size() - 7), interesting64(rng), 8);
        break;
      case 7:  // a word of the grammar, inserted or written over
        if (!opt.dictionary.empty()) {
          const std::string& w = opt.dictionary[rng.below(opt.dictionary.size())];
          if (rng.one_in(2) || s.size() < w.size()) s.insert(s.empty() ? 0 : rng.below(s.size() + 1), w);
          else s.replace(rng.below(s.size() - w.size() + 1), w.size(), w);
        }
        break;
      case 8:  // splice: this input's head, another's tail
        if (!other.empty()) s = s.substr(0, s.empty() ? 0 : rng.below(s.size() + 1)) +
                                std::string(other.substr(rng.below(other.size())));
        break;
      default:  // truncate
        if (!s.empty()) s.resize(at);
        break;
    }
  }
  if (s.size() > opt.max_len) s.resize(opt.max_len);
  return s;
}

FuzzStats fuzz_decoder(std::string_view name, const std::function<bool(std::string_view)>& decode,
                       const std::vector<std::string>& seeds, FuzzOptions opt) {
  REQUIRE_FALSE(seeds.empty());
  opt.seed = env_u64("DL_FUZZ_SEED", opt.seed);
  opt.iterations *= env_u64("DL_FUZZ_SCALE", 1);
  const std::string case_name(name);
  g_case = case_name.c_str();
#ifdef DL_FUZZ_DEATH_CALLBACK
  __sanitizer_set_death_callback(print_current_input);
#endif
  FuzzStats st;
  Rng rng(opt.seed);
  std::string input;
  std::string failure;
  const size_t total = seeds.size() + opt.iterations;
  for (size_t i = 0; i < total && failure.empty(); ++i) {
    const bool is_seed = i < seeds.size();
    if (is_seed) input = seeds[i];
    else if (opt.random_one_in && rng.one_in(opt.random_one_in)) input = random_input(rng, opt);
    else input = mutate(rng, seeds[rng.below(seeds.size())], seeds[rng.below(seeds.size())], opt);
    g_iteration = i;
    g_input = &input;
    // The decoder sees a heap block of exactly the input's size: a read one
    // byte past the end lands in ASan's redzone (a std::string's spare
    // capacity and terminator would hide it).
    const std::unique_ptr<char[]> exact(new char[input.size()]);
    std::memcpy(exact.get(), input.data(), input.size());
    try {
      if (decode(std::string_view(exact.get(), input.size()))) {
        ++st.accepted;
      } else {
        if (is_seed) failure = "seed refused";
        ++st.refused;
      }
    } catch (const dl::Error& e) {
      // A clean refusal; but the seeds are valid inputs, and a harness whose
      // seeds are refused explores nothing past the first check.
      if (is_seed) failure = std::string("seed refused: ") + e.what();
      ++st.refused;
    } catch (const FuzzFailure& e) {
      failure = e.what();
    } catch (const std::exception& e) {
      failure = "threw " + type_name(typeid(e)) + " (not a dl::Error): " + e.what();
    } catch (...) {
      failure = "threw something that is not a std::exception";
    }
    ++st.runs;
  }
  g_input = nullptr;
  if (!failure.empty()) {
    FAIL(case_name << " input " << g_iteration << " (seed " << opt.seed << ") \"" << escaped(input) << "\": "
                   << failure);
  }
  std::cout << "fuzz " << case_name << ": " << st.runs << " inputs, " << st.accepted << " accepted, " << st.refused
            << " refused (seed " << opt.seed << ")\n";
  return st;
}

}  // namespace dl::fuzz
