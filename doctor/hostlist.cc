#include "doctor/hostlist.h"

#include <map>
#include <set>
#include <tuple>

namespace dl::doctor {

namespace {
// A name split at its last run of digits: prefix, digits, suffix.
struct Split {
  std::string prefix, digits, suffix;
};

Split split(const std::string& name) {
  size_t end = name.size();
  while (end > 0 && !(name[end - 1] >= '0' && name[end - 1] <= '9')) --end;
  size_t begin = end;
  while (begin > 0 && name[begin - 1] >= '0' && name[begin - 1] <= '9') --begin;
  return {name.substr(0, begin), name.substr(begin, end - begin), name.substr(end)};
}

// What the numbers of one bracket share: the text around them and, when
// zero-padded, their width (0: not padded, any width).
using Key = std::tuple<std::string, std::string, size_t>;

size_t width_of(const std::string& digits) { return digits.size() > 1 && digits[0] == '0' ? digits.size() : 0; }

std::string padded(unsigned long long v, size_t width) {
  std::string s = std::to_string(v);
  return width > s.size() ? std::string(width - s.size(), '0') + s : s;
}

// "01-03,10" of ascending numbers.
std::string ranges(const std::set<unsigned long long>& nums, size_t width) {
  std::string out;
  for (auto it = nums.begin(); it != nums.end();) {
    auto last = it;
    while (std::next(last) != nums.end() && *std::next(last) == *last + 1) ++last;
    out += (out.empty() ? "" : ",") + padded(*it, width) + (last == it ? "" : "-" + padded(*last, width));
    it = std::next(last);
  }
  return out;
}
}  // namespace

std::string compress_hosts(const std::vector<std::string>& hosts) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& h : hosts)
    if (seen.insert(h).second) names.push_back(h);
  // The padded widths each prefix and suffix has: an unpadded number as wide
  // as one of them joins it (node0999 and node1000 are node[0999-1000]).
  std::set<Key> padded_groups;
  for (const auto& h : names) {
    const Split s = split(h);
    if (!s.digits.empty() && s.digits.size() <= 18 && width_of(s.digits))
      padded_groups.insert({s.prefix, s.suffix, s.digits.size()});
  }
  std::vector<Key> order;                          // groups in the order of their first host
  std::map<Key, std::set<unsigned long long>> nums;
  std::vector<std::string> plain;                  // names with no digits, or too many of them
  std::vector<std::pair<bool, size_t>> slots;      // (grouped, index into order / plain)
  for (const auto& h : names) {
    const Split s = split(h);
    if (s.digits.empty() || s.digits.size() > 18) {
      slots.emplace_back(false, plain.size());
      plain.push_back(h);
      continue;
    }
    Key k{s.prefix, s.suffix, width_of(s.digits)};
    if (!std::get<2>(k) && padded_groups.count({s.prefix, s.suffix, s.digits.size()})) std::get<2>(k) = s.digits.size();
    if (!nums.count(k)) slots.emplace_back(true, order.size()), order.push_back(k);
    nums[k].insert(std::stoull(s.digits));
  }
  std::string out;
  for (const auto& [grouped, i] : slots) {
    std::string part;
    if (!grouped) {
      part = plain[i];
    } else {
      const auto& [prefix, suffix, width] = order[i];
      const auto& n = nums[order[i]];
      part = prefix + (n.size() == 1 ? padded(*n.begin(), width) : "[" + ranges(n, width) + "]") + suffix;
    }
    out += (out.empty() ? "" : ",") + part;
  }
  return out;
}

std::string name_hosts(const std::vector<std::string>& hosts) {
  std::set<std::string> distinct(hosts.begin(), hosts.end());
  if (distinct.empty()) return "";
  if (distinct.size() == 1) return *distinct.begin();
  return std::to_string(distinct.size()) + " hosts (" + compress_hosts(hosts) + ")";
}

}  // namespace dl::doctor
