#include "launcher/options/std_spec.h"

#include <string_view>

#include "errors/error.h"

namespace dl::launcher {

namespace {
// A non-empty run of digits as an int (no sign, no spaces, at most 6 digits).
bool small_number(std::string_view t, int* out) {
  if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string_view::npos) return false;
  *out = std::stoi(std::string(t));
  return true;
}

std::vector<std::string_view> split_commas(std::string_view t) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    size_t c = t.find(',', start);
    parts.push_back(t.substr(start, c == std::string_view::npos ? std::string_view::npos : c - start));
    if (c == std::string_view::npos) return parts;
    start = c + 1;
  }
}
}  // namespace

int StdSpec::mask(int local_rank) const {
  if (!mapped) return all;
  auto it = by_local_rank.find(local_rank);
  return it == by_local_rank.end() ? 0 : it->second;
}

bool StdSpec::any() const {
  if (!mapped) return all != 0;
  for (const auto& [rank, m] : by_local_rank)
    if (m != 0) return true;
  return false;
}

StdSpec parse_std_spec(const std::string& text, const std::string& option) {
  auto bad = [&] {
    return UsageError(option + " takes 0 (none), 1 (stdout), 2 (stderr) or 3 (both), or LOCAL_RANK:VALUE pairs such "
                      "as 0:3,1:2, got '" + text + "'");
  };
  StdSpec s;
  int v = 0;
  if (text.find(':') == std::string::npos) {
    if (!small_number(text, &v) || v > 3) throw bad();
    s.all = v;
    return s;
  }
  s.mapped = true;
  for (std::string_view pair : split_commas(text)) {
    const size_t colon = pair.find(':');
    int rank = 0;
    if (colon == std::string_view::npos || !small_number(pair.substr(0, colon), &rank) ||
        !small_number(pair.substr(colon + 1), &v) || v > 3)
      throw bad();
    s.by_local_rank[rank] = v;
  }
  return s;
}

std::vector<int> parse_rank_list(const std::string& text, const std::string& option) {
  std::vector<int> ranks;
  if (text.empty()) return ranks;
  for (std::string_view r : split_commas(text)) {
    int v = 0;
    if (!small_number(r, &v))
      throw UsageError(option + " takes a comma-separated list of ranks such as 0 or 0,2, got '" + text + "'");
    ranks.push_back(v);
  }
  return ranks;
}

}  // namespace dl::launcher
