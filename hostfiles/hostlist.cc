#include "hostfiles/hostlist.h"

#include <cctype>

#include "errors/error.h"

namespace dl::hostfiles {
namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// Parses a run of at most 9 digits starting at `at` (offset for errors).
unsigned long parse_bound(std::string_view digits, std::size_t at, std::string_view item) {
  if (digits.empty() || digits.size() > 9) {
    throw HostSyntaxError(at, "expected a number or a range like 1-4 inside '[...]', got " + quoted(item));
  }
  unsigned long v = 0;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(digits[i]))) {
      throw HostSyntaxError(at + i, "expected a number or a range like 1-4 inside '[...]', got " + quoted(item));
    }
    v = v * 10 + static_cast<unsigned long>(digits[i] - '0');
  }
  return v;
}

std::string padded(unsigned long v, std::size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// One item of a bracket group: "7" or "01-04"; appends the numbers it names.
void expand_range_item(std::string_view item, std::size_t at, std::vector<std::string>& out) {
  std::size_t dash = item.find('-');
  std::string_view lo_s = item.substr(0, dash);
  std::string_view hi_s = dash == std::string_view::npos ? lo_s : item.substr(dash + 1);
  unsigned long lo = parse_bound(lo_s, at, item);
  unsigned long hi = dash == std::string_view::npos ? lo : parse_bound(hi_s, at + dash + 1, item);
  if (hi < lo) {
    throw HostSyntaxError(at, "expected a range whose end is not below its start, got " + quoted(item) +
                                  " (write " + quoted(std::string(hi_s) + "-" + std::string(lo_s)) + ")");
  }
  if (out.size() + (hi - lo + 1) > kMaxExpandedHosts) {
    throw HostSyntaxError(at, "expected at most " + std::to_string(kMaxExpandedHosts) +
                                  " hosts from one pattern, got range " + quoted(item));
  }
  for (unsigned long v = lo; v <= hi; ++v) out.push_back(padded(v, lo_s.size()));
}

// The inside of one "[...]": comma-separated numbers and ranges.
std::vector<std::string> expand_group(std::string_view group, std::size_t at) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    std::size_t comma = group.find(',', pos);
    std::size_t end = comma == std::string_view::npos ? group.size() : comma;
    expand_range_item(group.substr(pos, end - pos), at + pos, out);
    if (comma == std::string_view::npos) return out;
    pos = comma + 1;
  }
}

}  // namespace

std::vector<std::string> expand_host_pattern(std::string_view p, std::size_t base) {
  if (p.empty()) throw HostSyntaxError(base, "expected a host name, got nothing");
  std::vector<std::string> names{""};
  std::size_t i = 0;
  while (i < p.size()) {
    char c = p[i];
    if (c == '[') {
      std::size_t close = p.find_first_of("[]", i + 1);
      if (close == std::string_view::npos || p[close] == '[') {
        throw HostSyntaxError(base + i, "expected ']' to close this '[', got " +
                                            (close == std::string_view::npos ? std::string("the end of the name")
                                                                             : std::string("a nested '['")));
      }
      std::vector<std::string> tails = expand_group(p.substr(i + 1, close - i - 1), base + i + 1);
      if (names.size() * tails.size() > kMaxExpandedHosts) {
        throw HostSyntaxError(base + i, "expected at most " + std::to_string(kMaxExpandedHosts) +
                                            " hosts from one pattern, got " + quoted(p));
      }
      std::vector<std::string> product;
      product.reserve(names.size() * tails.size());
      for (const auto& head : names)
        for (const auto& tail : tails) product.push_back(head + tail);
      names = std::move(product);
      i = close + 1;
    } else if (c == ']') {
      throw HostSyntaxError(base + i, "expected a host name, got a ']' with no '[' before it");
    } else if (is_name_char(c)) {
      std::size_t end = i;
      while (end < p.size() && is_name_char(p[end])) ++end;
      for (auto& n : names) n.append(p.substr(i, end - i));
      i = end;
    } else {
      throw HostSyntaxError(base + i, std::string("expected a host name (letters, digits, '-', '.', '_'), got '") +
                                          c + "' in " + quoted(p));
    }
  }
  return names;
}

std::vector<std::pair<std::string_view, std::size_t>> split_host_items(std::string_view list) {
  std::vector<std::pair<std::string_view, std::size_t>> items;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      items.emplace_back(list.substr(start, i - start), start);
      start = i + 1;
    } else if (list[i] == '[') {
      ++depth;
    } else if (list[i] == ']' && depth > 0) {
      --depth;
    }
  }
  return items;
}

std::vector<std::string> expand_hostlist(std::string_view list, std::string_view what) {
  std::vector<std::string> out;
  try {
    for (auto [item, at] : split_host_items(list)) {
      if (item.empty()) {
        throw HostSyntaxError(at, "expected a host name, got nothing (two commas in a row, or a comma at an end)");
      }
      for (auto& name : expand_host_pattern(item, at)) {
        if (out.size() >= kMaxExpandedHosts) {
          throw HostSyntaxError(at, "expected at most " + std::to_string(kMaxExpandedHosts) + " hosts in all");
        }
        out.push_back(std::move(name));
      }
    }
  } catch (const HostSyntaxError& e) {
    throw ParseError(std::string(what) + " " + quoted(list) + ", column " + std::to_string(e.offset() + 1) + ": " +
                     e.what());
  }
  return out;
}

}  // namespace dl::hostfiles
