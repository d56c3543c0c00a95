// The collectives' greeting decoder (collectives/tcp/greeting.h) on what
// anyone who reaches a rank's port may send, fed in chunks of every size:
// it refuses with a state (never an exception, never a crash), reads no
// byte past what it asked for, only moves forward, and names a connecting
// rank only after a proof made with the token.
#include <catch2/catch.hpp>

#include "collectives/tcp/greeting.h"
#include "tests/fuzz/fuzz_harness.h"
#include "wire/coding.h"
#include "wire/frame.h"
#include "wire/handshake.h"

using namespace dl::fuzz;
using dl::coll::tcp::Greeting;

namespace {

const std::string kToken = "fuzz-token";
const std::string kServerNonce(dl::wire::kNonceSize, 's');

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// What a rank holding the token sends: hello, proof (for kServerNonce), rank.
std::string greeting(const std::string& token, char nonce_c, uint32_t rank) {
  const std::string tag = dl::coll::tcp::kHandshakeTag, nc(dl::wire::kNonceSize, nonce_c);
  const std::string hello = "DLH2" + std::string(1, static_cast<char>(tag.size())) + tag + nc;
  const std::string proof = dl::wire::hmac_sha256(token, "dlaunch-client" + tag + kServerNonce + nc);
  char r[4];
  dl::wire::put_be32(r, rank);
  return dl::wire::encode_frame(dl::wire::kHandshake, hello) + dl::wire::encode_frame(dl::wire::kHandshake, proof) +
         std::string(r, 4);
}

// Input: u8 (this rank, size) selector | the peer's bytes.
bool greet(std::string_view input) {
  if (input.empty()) return false;
  const int rank = static_cast<unsigned char>(input[0]) % 4, size = rank + 1 + static_cast<unsigned char>(input[0]) / 64;
  const std::string_view in = input.substr(1);
  Greeting g(kToken, rank, size, kServerNonce);
  Rng rng(fnv1a(input));
  size_t fed = 0;
  int last = 0;
  while (fed < in.size() && g.wanted() > 0) {
    const size_t want = g.wanted();
    const size_t n = rng.one_in(3) ? in.size() - fed : 1 + rng.below(std::min<size_t>(in.size() - fed, 600));
    const size_t used = g.feed(in.substr(fed, n));
    if (used > want || used > n) throw FuzzFailure("took " + std::to_string(used) + " bytes, wanted " + std::to_string(want));
    if (used == 0) throw FuzzFailure("took nothing while it wanted " + std::to_string(want));
    fed += used;
    const int now = static_cast<int>(g.state());
    if (now < last) throw FuzzFailure("state went back");
    last = now;
    (void)g.take_reply();
  }
  if (g.state() == Greeting::State::kRefused && g.error().empty()) throw FuzzFailure("refused without a reason");
  if (g.state() != Greeting::State::kDone) return false;
  if (g.peer() <= rank || g.peer() >= size) throw FuzzFailure("named rank " + std::to_string(g.peer()));
  if (g.wanted() != 0) throw FuzzFailure("wants more once done");
  return true;
}

}  // namespace

TEST_CASE("fuzz: the collectives greeting refuses what is not a rank of this job, by state", "[fuzz][collectives]") {
  using dl::wire::encode_frame;
  // Selector: rank = s % 4, size = rank + 1 + s / 64.
  const std::string rank0of2(1, '\x40'), rank1of4(1, '\x81'), rank2of4(1, '\x42');
  const std::vector<std::string> seeds = {
      rank0of2 + greeting(kToken, 'a', 1),
      rank0of2 + greeting(kToken, 'b', 1) + "trailing bytes for the transports",
      rank1of4 + greeting(kToken, 'c', 3),
      rank2of4 + greeting(kToken, 'd', 3),
  };
  FuzzOptions opt;
  opt.seed = 0xc0112;
  opt.iterations = 200000;
  opt.max_len = 700;
  opt.dictionary = {"DLH2", "DLH1", dl::coll::tcp::kHandshakeTag, std::string("\0\0\0\x20\0", 5),
                    std::string("\0\0\0\x01", 4), encode_frame(dl::wire::kErrorText, "go away"), "GET / HTTP/1.0"};
  const FuzzStats st = fuzz_decoder("coll greeting", greet, seeds, opt);
  CHECK(st.accepted > st.runs / 1000);  // mutants of the rank and the tail still get in
  CHECK(st.refused > 0);
}
