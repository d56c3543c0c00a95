#include "hostfiles/hostfile.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "errors/error.h"
#include "errors/user_file.h"
#include "hostfiles/host_token.h"
#include "hostfiles/hostlist.h"

namespace dl::hostfiles {
namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string entry_key(const HostEntry& e) { return e.user + '@' + e.host + '#' + std::to_string(e.port); }

// Collects entries, merging those with the same key (by default: the same
// user, host and port) into the first.
class Merger {
 public:
  explicit Merger(std::function<std::string(const HostEntry&)> key = entry_key) : key_(std::move(key)) {}
  // Returns the entry `e` merged into, or nullptr when `e` is a host of its own.
  const HostEntry* add(HostEntry e) {
    auto [it, fresh] = index_.emplace(key_(e), out_.size());
    if (fresh) {
      out_.push_back(std::move(e));
      return nullptr;
    }
    HostEntry& first = out_[it->second];
    first.slots += e.slots;
    first.max_slots = (first.max_slots == 0 || e.max_slots == 0) ? 0 : first.max_slots + e.max_slots;
    first.slots_given = first.slots_given || e.slots_given;
    return &first;
  }
  std::vector<HostEntry> take() { return std::move(out_); }

 private:
  std::function<std::string(const HostEntry&)> key_;
  std::vector<HostEntry> out_;
  std::unordered_map<std::string, std::size_t> index_;
};

struct Token {
  std::string_view text;
  std::size_t col;  // 0-based
};

std::vector<Token> tokenize(std::string_view line) {
  std::vector<Token> tokens;
  std::size_t i = 0;
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; };
  while (i < line.size()) {
    while (i < line.size() && blank(line[i])) ++i;
    std::size_t start = i;
    while (i < line.size() && !blank(line[i])) ++i;
    if (i > start) tokens.push_back({line.substr(start, i - start), start});
  }
  return tokens;
}

// Levenshtein distance, for "did you mean" on misspelt keys.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string suggestion(std::string_view key) {
  for (std::string_view known : {"slots", "max_slots", "port"}) {
    if (distance(key, known) <= 2) return " (did you mean '" + std::string(known) + "='?)";
  }
  return "";
}

// Applies the key=value fields after the host to `spec` and `max_slots`.
void apply_fields(const std::vector<Token>& tokens, HostSpec& spec, int& max_slots) {
  std::size_t max_col = 0;
  bool port_given = spec.port != 0;
  for (std::size_t t = 1; t < tokens.size(); ++t) {
    auto [text, col] = tokens[t];
    std::size_t eq = text.find('=');
    std::string_view key = text.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? std::string_view() : text.substr(eq + 1);
    std::size_t value_col = col + eq + 1;
    if (eq == std::string_view::npos) {
      throw HostSyntaxError(col, "expected key=value (slots=N, max_slots=N or port=N) after the host, got " +
                                     quoted(text));
    }
    if (key == "slots") {
      if (spec.slots_given) throw HostSyntaxError(col, "expected slots once per line, got a second " + quoted(text));
      spec.slots = parse_positive(value, value_col, "'slots='");
      spec.slots_given = true;
    } else if (key == "max_slots" || key == "max-slots") {
      if (max_slots) throw HostSyntaxError(col, "expected max_slots once per line, got a second " + quoted(text));
      max_slots = parse_positive(value, value_col, "'" + std::string(key) + "='");
      max_col = value_col;
    } else if (key == "port") {
      if (port_given) throw HostSyntaxError(col, "expected the port once per line, got a second " + quoted(text));
      spec.port = parse_port(value, value_col, "'port='");
      port_given = true;
    } else {
      throw HostSyntaxError(col, "expected slots=, max_slots= or port=, got " + quoted(text) + suggestion(key));
    }
  }
  if (max_slots && max_slots < spec.slots) {
    throw HostSyntaxError(max_col, "'max_slots=' must be at least slots (" + std::to_string(spec.slots) +
                                       "), got '" + std::to_string(max_slots) + "'");
  }
}

// Parses one line (comment already cut off) into `out`.
void parse_line(std::string_view line, std::string_view origin, Merger& out) {
  std::vector<Token> tokens = tokenize(line);
  if (tokens.empty()) return;
  HostSpec spec;
  try {
    spec = parse_host_spec(tokens[0].text);
  } catch (const HostSyntaxError& e) {
    throw HostSyntaxError(tokens[0].col + e.offset(), e.what());
  }
  int max_slots = 0;
  apply_fields(tokens, spec, max_slots);
  for (auto& host : spec.hosts) {
    out.add(HostEntry{std::move(host), spec.user, spec.port, spec.slots, max_slots, spec.slots_given,
                      std::string(origin)});
  }
}

}  // namespace

std::vector<HostEntry> parse_hostfile_text(std::string_view text, std::string_view filename) {
  Merger out;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    std::string origin = std::string(filename) + ":" + std::to_string(line_no);
    try {
      parse_line(line.substr(0, line.find('#')), origin, out);
    } catch (const HostSyntaxError& e) {
      throw ParseError(origin + ":" + std::to_string(e.offset() + 1) + ": " + e.what());
    }
  }
  std::vector<HostEntry> hosts = out.take();
  if (hosts.empty()) {
    throw ParseError(std::string(filename) + ": no hosts in the file (only blank lines and comments); " +
                     "add lines like 'node1 slots=4'");
  }
  return hosts;
}

std::vector<HostEntry> parse_hostfile(const std::string& path) {
  return parse_hostfile_text(read_user_file(path, "hostfile", "give a file of host lines ('node1 slots=4')").text,
                             path);
}

std::vector<HostEntry> parse_host_list(std::string_view list) {
  if (list.empty()) throw ParseError("-H: expected a comma-separated list of hosts such as 'node1:2,node2:2', got ''");
  Merger out;
  std::size_t n = 0;
  for (auto [item, at] : split_host_items(list)) {
    ++n;
    try {
      if (item.empty()) throw HostSyntaxError(0, "expected a host, got nothing (two commas in a row, or one at an end)");
      HostSpec spec = parse_host_spec(item);
      for (auto& host : spec.hosts) {
        out.add(HostEntry{std::move(host), spec.user, spec.port, spec.slots, 0, spec.slots_given, "-H"});
      }
    } catch (const HostSyntaxError& e) {
      throw ParseError("-H item " + std::to_string(n) + " (" + quoted(item) + "): " + e.what());
    }
  }
  return out.take();
}

std::vector<HostEntry> merge_local(std::vector<HostEntry> hosts,
                                   const std::function<bool(const std::string&)>& is_local,
                                   std::vector<std::string>* merged) {
  // '@' cannot start a host name: the key of every local entry is one key.
  Merger out([&](const HostEntry& e) { return is_local(e.host) ? std::string("@local") : entry_key(e); });
  for (auto& e : hosts) {
    const std::string name = describe(e);
    const HostEntry* into = out.add(std::move(e));
    if (into && merged) merged->push_back("'" + name + "' into '" + describe(*into) + "'");
  }
  return out.take();
}

std::string describe(const HostEntry& e) {
  std::string s = e.user.empty() ? "" : e.user + "@";
  bool brackets = e.port != 0 || e.host.find(':') != std::string::npos;
  s += brackets ? "[" + e.host + "]" : e.host;
  if (e.port != 0) s += ":" + std::to_string(e.port);
  return s;
}

}  // namespace dl::hostfiles
