#include "rendezvous/store_semantics.h"

#include <cctype>
#include <charconv>

#include "errors/error.h"
#include "rendezvous/store_protocol.h"

namespace dl::rdzv::semantics {

namespace {
// A key as error texts quote it: keys may be 4096 bytes (the TCP store's
// limit), which no message needs in full.
std::string quoted(const std::string& key) {
  constexpr size_t kShown = 200;
  return "'" + (key.size() > kShown ? key.substr(0, kShown) + "..." : key) + "'";
}
}  // namespace

std::optional<int64_t> parse_integer(std::string_view text) {
  size_t at = 0;
  while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
  // from_chars takes a '-' but not a '+'; "+-1" stays refused.
  if (at < text.size() && text[at] == '+' && at + 1 < text.size() && text[at + 1] != '-') ++at;
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data() + at, end, v, 10);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

int64_t integer_at(const KeyValue& kv, const std::string& key) {
  const Bytes* v = kv.find(key);
  if (!v) return 0;
  if (auto n = parse_integer(*v)) return *n;
  throw RemoteError("add: the value at store key " + quoted(key) + " is not an integer");
}

int64_t add(KeyValue& kv, const std::string& key, int64_t delta) {
  const int64_t now = integer_at(kv, key);
  int64_t sum = 0;
  if (__builtin_add_overflow(now, delta, &sum))
    throw RemoteError("add: adding " + std::to_string(delta) + " to " + std::to_string(now) + " at store key " +
                      quoted(key) + " overflows a 64-bit integer");
  kv.put(key, std::to_string(sum));
  return sum;
}

CasResult compare_set(KeyValue& kv, const std::string& key, const Bytes& expected, const Bytes& desired) {
  const Bytes* now = kv.find(key);
  if (!now && !expected.empty()) return {expected, false};
  if (now && *now != expected) return {*now, false};
  kv.put(key, desired);
  return {desired, true};
}

bool has_all(const KeyValue& kv, const std::vector<std::string>& keys) {
  for (const auto& k : keys)
    if (!kv.find(k)) return false;
  return true;
}

std::vector<std::string> missing(const KeyValue& kv, const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  for (const auto& k : keys)
    if (!kv.find(k)) out.push_back(k);
  return out;
}

std::string barrier_count_error(const std::string& key, int64_t count) {
  if (count >= 1) return {};
  return "barrier at store key " + quoted(key) + " for " + std::to_string(count) +
         " callers: the count must be at least 1";
}

std::string all_gather_error(const std::string& prefix, int64_t rank, int64_t count, size_t value_size) {
  const std::string what = "all-gather at store key " + quoted(prefix);
  if (count < 1 || count > proto::kMaxGatherCount)
    return what + " for " + std::to_string(count) + " ranks: the count must be in [1, " +
           std::to_string(proto::kMaxGatherCount) + "]";
  if (rank < 0 || rank >= count)
    return what + ": rank " + std::to_string(rank) + " is outside [0, " + std::to_string(count) + ")";
  if (proto::values_list_size(static_cast<size_t>(count), value_size) > proto::kMaxGatherBytes)
    return what + ": a value of " + std::to_string(value_size) + " bytes from rank " + std::to_string(rank) +
           " is over the all-gather's limit (" + std::to_string(proto::kMaxGatherBytes) + " bytes for all " +
           std::to_string(count) + " values with their lengths; the server also bounds their running total)";
  return {};
}

}  // namespace dl::rdzv::semantics
