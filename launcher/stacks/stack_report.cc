#include "launcher/stacks/stack_report.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "wire/record.h"

namespace dl::launcher {

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

std::string trim_left(const std::string& s) {
  const size_t i = s.find_first_not_of(" \t");
  return i == std::string::npos ? "" : s.substr(i);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
  }
  return out;
}

// One thread of a tool's output: its header line and its frame lines.
struct Thread {
  std::string header;
  std::vector<std::string> frames;
};

// Splits `lines` into threads at each line for which is_header() holds;
// frame lines before the first header form a thread of their own.
template <class IsHeader, class IsFrame>
std::vector<Thread> threads_of(const std::vector<std::string>& lines, IsHeader is_header, IsFrame is_frame) {
  std::vector<Thread> out;
  for (const auto& line : lines) {
    if (is_header(line)) out.push_back({line, {}});
    else if (is_frame(line)) {
      if (out.empty()) out.push_back({"", {}});
      out.back().frames.push_back(line);
    }
  }
  return out;
}

// `  File "/work/train.py", line 12 in step` -> "step (train.py:12)": a
// Python rank's place is its line (every rank runs the same files).
std::string python_function(const std::string& line) {
  const size_t in = line.rfind(" in ");
  if (in == std::string::npos) return "??";
  const std::string name = line.substr(in + 4);
  const size_t open = line.find('"'), close = line.rfind("\", line ", in);
  if (open == std::string::npos || close == std::string::npos || close <= open) return name;
  std::string file = line.substr(open + 1, close - open - 1);
  file = file.substr(file.rfind('/') + 1);  // npos + 1 == 0: a name without a directory
  const size_t number = close + 8;
  return name + " (" + file + ":" + line.substr(number, in - number) + ")";
}

std::vector<std::string> python_frames(const std::vector<std::string>& lines) {
  auto threads = threads_of(
      lines, [](const std::string& l) { return starts_with(l, "Thread 0x") || starts_with(l, "Current thread 0x"); },
      [](const std::string& l) { return starts_with(trim_left(l), "File \""); });
  // faulthandler lists the newest thread first: the main thread comes last.
  std::vector<std::string> out;
  if (threads.empty()) return out;
  for (const auto& f : threads.back().frames) out.push_back(python_function(f));
  return out;
}

std::vector<std::string> native_frames(const std::string& how, const std::vector<std::string>& lines, int pid) {
  const std::string p = std::to_string(pid);
  auto is_frame = [](const std::string& l) { return starts_with(l, "#"); };
  std::vector<Thread> threads;
  const Thread* main = nullptr;
  if (how == "eu-stack") {
    threads = threads_of(lines, [](const std::string& l) { return starts_with(l, "TID "); }, is_frame);
    for (const auto& t : threads)
      if (t.header == "TID " + p + ":") main = &t;
  } else {
    threads = threads_of(lines, [](const std::string& l) { return starts_with(l, "Thread "); }, is_frame);
    for (const auto& t : threads)
      if (t.header.find("(LWP " + p + ")") != std::string::npos) main = &t;
  }
  if (!main && !threads.empty()) main = how == "eu-stack" ? &threads.front() : &threads.back();
  std::vector<std::string> out;
  if (!main) return out;
  for (const auto& f : main->frames) {
    out.push_back(frame_function(f));
    if (out.back() == "main") break;  // what is outside main is the C runtime's
  }
  return out;
}

// Each run of frames without a name as one, "?? x9", so that the named
// ones (PMPI_Barrier <- main under MPICH's stripped libraries) fit the line.
std::vector<std::string> collapse_unnamed(const std::vector<std::string>& frames) {
  std::vector<std::string> out;
  for (size_t i = 0; i < frames.size();) {
    size_t j = i;
    while (frames[i] == "??" && j + 1 < frames.size() && frames[j + 1] == "??") ++j;
    out.push_back(j > i ? "?? x" + std::to_string(j - i + 1) : frames[i]);
    i = j + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

std::string frame_function(const std::string& line) {
  if (line.find("<signal handler called>") != std::string::npos) return "<signal handler>";
  std::istringstream in(line);
  std::string word;
  in >> word;  // "#3"
  if (!(in >> word)) return "??";
  if (starts_with(word, "0x")) {
    if (!(in >> word)) return "??";
    if (word == "in" && !(in >> word)) return "??";
  }
  word = word.substr(0, word.find('('));  // gdb's "name(args)" when no space
  word = word.substr(0, word.find('@'));  // eu-stack's symbol versions: read@GLIBC_2.2.5
  if (starts_with(word, "__GI_")) word = word.substr(5);  // glibc's internal aliases under gdb
  return word.empty() ? "??" : word;
}

std::vector<std::string> main_thread_frames(const std::string& how, const std::string& text, int pid) {
  const auto lines = split_lines(text);
  return how == "python" ? python_frames(lines) : native_frames(how, lines, pid);
}

std::vector<StackGroup> group_stacks(const std::vector<RankStackEntry>& stacks) {
  std::map<std::pair<std::string, std::vector<std::string>>, size_t> index;  // (error, frames) -> group
  std::vector<StackGroup> groups;
  std::vector<RankStackEntry> sorted = stacks;
  std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  for (const auto& s : sorted) {
    std::vector<std::string> frames;
    if (s.error.empty()) frames = main_thread_frames(s.how, s.text, s.pid);
    auto [it, fresh] = index.try_emplace({s.error, frames}, groups.size());
    if (fresh) groups.push_back({{}, {}, frames, s.error});
    StackGroup& g = groups[it->second];
    g.ranks.push_back(s.rank);
    if (std::find(g.hosts.begin(), g.hosts.end(), s.host) == g.hosts.end()) g.hosts.push_back(s.host);
  }
  std::stable_sort(groups.begin(), groups.end(), [](const StackGroup& a, const StackGroup& b) {
    return a.ranks.size() != b.ranks.size() ? a.ranks.size() < b.ranks.size() : a.ranks.front() < b.ranks.front();
  });
  return groups;
}

std::string rank_ranges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return out;
}

std::string summary_line(const StackGroup& g) {
  std::string who = g.ranks.size() == 1
                        ? "rank " + std::to_string(g.ranks[0])
                        : "ranks " + rank_ranges(g.ranks) + " (" + std::to_string(g.ranks.size()) + ")";
  if (g.ranks.size() == 1 || !g.error.empty())
    who += g.hosts.size() <= 3 ? " on " + join(g.hosts, ", ") : " on " + std::to_string(g.hosts.size()) + " hosts";
  if (!g.error.empty()) return who + ": " + g.error;
  if (g.frames.empty()) return who + ": (no frames)";
  const std::vector<std::string> frames = collapse_unnamed(g.frames);
  std::vector<std::string> shown(frames.begin(), frames.begin() + static_cast<long>(std::min(frames.size(), kSummaryFrames)));
  std::string line = who + ": " + join(shown, " <- ");
  if (frames.size() > shown.size()) line += " <- ... (" + std::to_string(frames.size() - shown.size()) + " more)";
  return line;
}

std::string full_report(const std::string& title, const std::vector<StackGroup>& groups,
                        const std::vector<RankStackEntry>& stacks) {
  std::string out = title + "\n\n";
  for (const auto& g : groups) out += "  " + summary_line(g) + "\n";
  std::vector<RankStackEntry> sorted = stacks;
  std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  for (const auto& s : sorted) {
    out += "\n=== rank " + std::to_string(s.rank) + " on " + s.host + " (pid " + std::to_string(s.pid) +
           (s.how.empty() ? "" : ", " + s.how) + ") ===\n";
    if (!s.error.empty()) out += s.error + "\n";
    out += s.text;
    if (!s.text.empty() && s.text.back() != '\n') out += "\n";
  }
  return out;
}

namespace {
// The JSON report's records (wire/record.h).
struct GroupRecord {
  std::vector<int> ranks;
  std::vector<std::string> hosts, frames;
  std::optional<std::string> error;
  template <class S, class V> static void fields(S& s, V& v) {
    v("ranks", s.ranks), v("hosts", s.hosts), v("frames", s.frames), v("error", s.error);
  }
};
struct RankRecord {
  int rank = 0;
  std::string host;
  int pid = 0;
  std::string how, text;
  std::vector<std::string> frames;
  std::optional<std::string> error;
  template <class S, class V> static void fields(S& s, V& v) {
    v("rank", s.rank), v("host", s.host), v("pid", s.pid), v("how", s.how), v("text", s.text);
    v("frames", s.frames), v("error", s.error);
  }
};
// A stack report's fields are there when it is one (json_membership's are not).
struct StackReportRecord {
  std::optional<std::string> reason;
  std::optional<std::vector<GroupRecord>> groups;
  std::optional<std::vector<RankRecord>> ranks;
  std::vector<MembershipChange> membership;
  template <class S, class V> static void fields(S& s, V& v) {
    v("reason", s.reason), v("groups", s.groups), v("ranks", s.ranks), v("membership", s.membership);
  }
};

std::optional<std::string> unless_empty(const std::string& s) {
  return s.empty() ? std::nullopt : std::optional<std::string>(s);
}
}  // namespace

std::string json_report(const std::string& reason, const std::vector<StackGroup>& groups,
                        const std::vector<RankStackEntry>& stacks, const std::vector<MembershipChange>& membership) {
  StackReportRecord r{reason, std::vector<GroupRecord>{}, std::vector<RankRecord>{}, membership};
  for (const auto& g : groups) r.groups->push_back({g.ranks, g.hosts, g.frames, unless_empty(g.error)});
  for (const auto& s : stacks) {
    std::vector<std::string> frames = s.error.empty() ? main_thread_frames(s.how, s.text, s.pid) : std::vector<std::string>{};
    r.ranks->push_back({s.rank, s.host, s.pid, s.how, s.text, std::move(frames), unless_empty(s.error)});
  }
  // A tool's raw bytes may be invalid UTF-8, which JSON readers refuse.
  return wire::indent_json(wire::valid_utf8(wire::encode_record(r))) + "\n";
}

std::string json_membership(const std::vector<MembershipChange>& membership) {
  StackReportRecord r{std::nullopt, std::nullopt, std::nullopt, membership};
  return wire::indent_json(wire::valid_utf8(wire::encode_record(r))) + "\n";
}

}  // namespace dl::launcher
