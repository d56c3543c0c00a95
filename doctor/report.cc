#include "doctor/report.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "doctor/hostlist.h"

#include "wire/record.h"

namespace dl::doctor {

namespace {
const char* const kNames[kCheckCount] = {"hostfile", "ssh",   "dlaunch", "program", "env",
                                         "clock",    "gpus",  "network", "links",   "all_reduce", "nccl"};

const char* mark_word(Mark m) {
  switch (m) {
    case Mark::kOk: return "ok";
    case Mark::kWarn: return "warn";
    case Mark::kFail: return "fail";
    default: return "not_run";
  }
}

const char* symbol(Mark m, bool utf8) {
  switch (m) {
    case Mark::kOk: return utf8 ? "\u2713" : "ok";
    case Mark::kWarn: return utf8 ? "!" : "warn";
    case Mark::kFail: return utf8 ? "\u2717" : "FAIL";
    default: return "-";
  }
}

// Terminal columns of UTF-8 text (every code point one column wide).
size_t width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string pad(const std::string& s, size_t w) { return s + std::string(w > width(s) ? w - width(s) : 0, ' '); }
}  // namespace

const char* check_name(Check c) { return kNames[static_cast<int>(c)]; }

Report::Report(std::vector<std::string> hosts)
    : hosts_(std::move(hosts)),
      cells_(hosts_.size(), std::vector<Cell>(kCheckCount)),
      facts_(hosts_.size()) {}

void Report::set(int host, Check c, Mark m, std::string text) {
  cells_[static_cast<size_t>(host)][static_cast<size_t>(c)] = {m, std::move(text)};
}

const Cell& Report::cell(int host, Check c) const { return cells_[static_cast<size_t>(host)][static_cast<size_t>(c)]; }

void Report::add(Problem p) { problems_.push_back(std::move(p)); }


bool Report::host_passed(int host) const {
  for (const Cell& c : cells_[static_cast<size_t>(host)])
    if (c.mark == Mark::kFail) return false;
  return true;
}

int Report::exit_code() const {
  for (const Problem& p : problems_)
    if (p.mark == Mark::kFail) return 1;
  for (size_t h = 0; h < hosts_.size(); ++h)
    if (!host_passed(static_cast<int>(h))) return 1;
  return 0;
}

std::vector<Problem> group_problems(const std::vector<Problem>& problems) {
  using Key = std::tuple<Mark, Check, std::string, std::string>;  // mark, check, detail, fix
  std::vector<Problem> out;
  std::map<Key, size_t> at;                      // a group's index in out
  std::map<size_t, std::string> detail;          // by index in out: its shared words
  for (const Problem& p : problems) {
    const std::string head = p.hosts.size() == 1 ? p.hosts[0] + ": " : "";
    if (head.empty() || p.what.compare(0, head.size(), head) != 0) {
      out.push_back(p);
      continue;
    }
    const Key k{p.mark, p.check, p.what.substr(head.size()), p.fix};
    auto [it, fresh] = at.emplace(k, out.size());
    if (fresh) {
      detail[out.size()] = std::get<2>(k);
      out.push_back(p);
    } else {
      out[it->second].hosts.push_back(p.hosts[0]);
    }
  }
  for (auto& [i, d] : detail)
    if (out[i].hosts.size() > 1) out[i].what = name_hosts(out[i].hosts) + ": " + d;
  return out;
}

namespace {
bool warned_or_failed(const std::vector<Cell>& row) {
  return std::any_of(row.begin(), row.end(), [](const Cell& c) { return c.mark == Mark::kFail || c.mark == Mark::kWarn; });
}
}  // namespace

std::string Report::render(bool utf8, bool verbose) const {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head{"host"};
  for (int c = 0; c < kCheckCount; ++c) head.push_back(kNames[c]);
  rows.push_back(head);
  const bool every = verbose || hosts_.size() <= kEveryRow;
  size_t left_out = 0;
  for (size_t h = 0; h < hosts_.size(); ++h) {
    if (!every && !warned_or_failed(cells_[h])) {
      ++left_out;
      continue;
    }
    std::vector<std::string> row{hosts_[h]};
    for (const Cell& c : cells_[h]) row.push_back(c.text.empty() ? symbol(c.mark, utf8) : std::string(symbol(c.mark, utf8)) + " " + c.text);
    rows.push_back(row);
  }
  std::vector<size_t> w(head.size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], width(r[i]));
  std::string out;
  if (rows.size() > 1)
    for (const auto& r : rows) {
      std::string line;
      for (size_t i = 0; i < r.size(); ++i) line += pad(r[i], w[i] + 2);
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
  if (left_out)
    out += std::string(symbol(Mark::kOk, utf8)) + " " + (rows.size() > 1 ? "the other " : "all ") + std::to_string(left_out) +
           " hosts passed every check (-v lists them)\n";
  const std::vector<Problem> problems = group_problems(problems_);
  if (!problems.empty()) out += "\n";
  for (const Problem& p : problems)
    out += std::string(symbol(p.mark, utf8)) + " " + kNames[static_cast<int>(p.check)] + ": " + p.what +
           (p.fix.empty() ? "" : "; " + p.fix) + "\n";
  if (notes_.interface) out += "\nnetwork: " + *notes_.interface + "\n";
  if (notes_.links_summary) out += "links: " + *notes_.links_summary + "\n";
  if (notes_.all_reduce) out += "all_reduce: " + *notes_.all_reduce + "\n";
  if (notes_.nccl) out += "nccl: " + *notes_.nccl + "\n";
  int passed = 0;
  for (size_t h = 0; h < hosts_.size(); ++h) passed += host_passed(static_cast<int>(h)) ? 1 : 0;
  const int fails = static_cast<int>(std::count_if(problems.begin(), problems.end(), [](const Problem& p) { return p.mark == Mark::kFail; }));
  const int warns = static_cast<int>(problems.size()) - fails;
  out += "\n" + std::string(exit_code() == 0 ? "healthy: " : "NOT healthy: ") + std::to_string(passed) + " of " +
         std::to_string(hosts_.size()) + " hosts passed, " + std::to_string(fails) + " problem" + (fails == 1 ? "" : "s") +
         ", " + std::to_string(warns) + " warning" + (warns == 1 ? "" : "s") + "\n";
  return out;
}

std::string Report::to_json() const {
  ReportRecord r;
  r.healthy = exit_code() == 0;
  r.exit_code = exit_code();
  for (size_t h = 0; h < hosts_.size(); ++h) {
    HostRecord& host = r.hosts.emplace_back();
    host.host = hosts_[h];
    host.passed = host_passed(static_cast<int>(h));
    for (int c = 0; c < kCheckCount; ++c) host.checks[kNames[c]] = {mark_word(cells_[h][static_cast<size_t>(c)].mark), cells_[h][static_cast<size_t>(c)].text};
    host.facts = facts_[h];
  }
  for (const Problem& p : group_problems(problems_))
    r.problems.push_back({mark_word(p.mark), kNames[static_cast<int>(p.check)], p.hosts, p.what, p.fix});
  r.notes = notes_;
  return wire::indent_json(wire::encode_record(r));
}

}  // namespace dl::doctor
