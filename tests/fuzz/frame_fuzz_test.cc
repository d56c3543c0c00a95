// wire::FrameParser on random and mutated byte streams, fed in chunks of
// every size: it must refuse only with dl::Error, and every frame it returns
// must be exactly the bytes it consumed.
#include <catch2/catch.hpp>

#include "tests/fuzz/fuzz_harness.h"
#include "wire/frame.h"

using namespace dl::fuzz;

namespace {

// Input: u8 limit selector | the stream. The chunking comes from a hash of
// the input, so one input is one reproducible run whatever ran before it.
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

bool parse_stream(std::string_view input) {
  if (input.empty()) return false;
  static constexpr size_t kLimits[] = {0, 1, 16, 300, 64 << 10};
  const size_t limit = kLimits[static_cast<unsigned char>(input[0]) % std::size(kLimits)];
  const std::string_view in = input.substr(1);
  Rng rng(fnv1a(input));
  dl::wire::FrameParser parser(limit);
  std::string rebuilt;
  size_t fed = 0;
  while (fed < in.size()) {
    // Chunks of 1 byte up to the rest: a header split anywhere, several
    // frames in one read.
    const size_t n = rng.one_in(4) ? in.size() - fed : 1 + rng.below(std::min<size_t>(in.size() - fed, 64));
    parser.feed(in.data() + fed, n);
    fed += n;
    while (auto f = parser.next()) {  // a RemoteError here is the refusal
      if (f->payload.size() > limit) throw FuzzFailure("frame of " + std::to_string(f->payload.size()) +
                                                       " bytes passed the limit of " + std::to_string(limit));
      dl::wire::append_frame(rebuilt, f->type, f->payload);
    }
  }
  if (rebuilt.size() + parser.buffered() != in.size() || in.substr(0, rebuilt.size()) != rebuilt)
    throw FuzzFailure("frames returned are not the bytes consumed (" + std::to_string(rebuilt.size()) + " rebuilt, " +
                      std::to_string(parser.buffered()) + " buffered, " + std::to_string(in.size()) + " fed)");
  return true;
}

}  // namespace

TEST_CASE("fuzz: wire::FrameParser refuses bad streams with dl::Error and returns what it consumed", "[fuzz][wire]") {
  using dl::wire::encode_frame;
  const std::string big = "\x04", any = "\x03";  // limits 64 KiB and 300 bytes
  const std::vector<std::string> seeds = {
      any,
      any + encode_frame(dl::wire::kJson, R"({"op":"who"})"),
      std::string(1, '\0') + encode_frame(dl::wire::kData, "") + encode_frame(dl::wire::kData, ""),
      any + encode_frame(dl::wire::kHandshake, std::string(40, 'h')) + encode_frame(dl::wire::kErrorText, "refused"),
      big + encode_frame(16, std::string(290, '\xab')) + encode_frame(17, "tail"),
      big + encode_frame(dl::wire::kData, "partial") + encode_frame(dl::wire::kData, "cut here").substr(0, 8),
  };
  FuzzOptions opt;
  opt.seed = 0xf4a3e;
  opt.iterations = 500000;
  opt.max_len = 1024;
  const FuzzStats st = fuzz_decoder("frame parser", parse_stream, seeds, opt);
  CHECK(st.accepted > 0);
  CHECK(st.refused > 0);
}
