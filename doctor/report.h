#pragma once
// The doctor's findings: a table of host x check, each cell a mark (ok,
// warning, failure, not run) with a short text, and one Problem per thing
// wrong, naming where and how to fix it. Pure data and formatting: the
// stages fill it, the command prints it (table or JSON) and exits with
// exit_code().
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "doctor/records.h"

namespace dl::doctor {

enum class Mark { kNotRun, kOk, kWarn, kFail };

// The checks in the order they run; a column each in the table.
enum class Check { kHostfile, kSsh, kDlaunch, kProgram, kEnv, kClock, kGpus, kNetwork, kLinks, kAllReduce, kNccl };
inline constexpr int kCheckCount = 11;
const char* check_name(Check c);  // "hostfile", "ssh", ... "all_reduce", "nccl"

struct Cell {
  Mark mark = Mark::kNotRun;
  std::string text;  // short: "0.4ms", "eth0", "2.1GB/s"
};

struct Problem {
  Mark mark = Mark::kFail;         // kFail or kWarn
  Check check = Check::kHostfile;
  std::vector<std::string> hosts;  // every host it names, as the hostfile wrote them
  std::string what;                // one line: what is wrong and where
  std::string fix;                 // one line: what to do; may be empty when `what` says it
};

// The problems as they are printed: one per problem however many hosts share
// it. A problem of one host whose `what` is "HOST: DETAIL" is merged with
// every other such problem of the same mark, check, DETAIL and fix, into
// "N hosts (LIST): DETAIL" (LIST as compress_hosts writes it), in the place
// of the first; every other problem stays as it is.
std::vector<Problem> group_problems(const std::vector<Problem>& problems);

// The JSON report's records.
struct CellRecord {
  std::string mark;  // "ok", "warn", "fail", "not_run"
  std::string text;
  template <class S, class V> static void fields(S& s, V& v) { v("mark", s.mark), v("text", s.text); }
};
struct HostRecord {
  std::string host;
  bool passed = false;
  std::map<std::string, CellRecord> checks;  // by check_name()
  std::optional<HostFacts> facts;
  template <class S, class V> static void fields(S& s, V& v) {
    v("host", s.host), v("passed", s.passed), v("checks", s.checks), v("facts", s.facts);
  }
};
struct ProblemRecord {
  std::string mark;  // "fail" or "warn"
  std::string check;
  std::vector<std::string> hosts;
  std::string what, fix;
  template <class S, class V> static void fields(S& s, V& v) {
    v("mark", s.mark), v("check", s.check), v("hosts", s.hosts), v("what", s.what), v("fix", s.fix);
  }
};
struct ReportRecord {
  bool healthy = false;
  int exit_code = 0;
  std::vector<HostRecord> hosts;
  std::vector<ProblemRecord> problems;
  Notes notes;
  template <class S, class V> static void fields(S& s, V& v) {
    v("healthy", s.healthy), v("exit_code", s.exit_code), v("hosts", s.hosts), v("problems", s.problems);
    v("notes", s.notes);
  }
};

class Report {
 public:
  explicit Report(std::vector<std::string> hosts);

  const std::vector<std::string>& hosts() const { return hosts_; }
  // REQUIRES: 0 <= host < hosts().size().
  void set(int host, Check c, Mark m, std::string text = "");
  const Cell& cell(int host, Check c) const;
  void add(Problem p);
  const std::vector<Problem>& problems() const { return problems_; }
  // Extra facts shown under the table and in the JSON (the interface, busbw, ...).
  Notes& notes() { return notes_; }
  const Notes& notes() const { return notes_; }
  void set_facts(int host, HostFacts f) { facts_[static_cast<size_t>(host)] = std::move(f); }

  // True when no cell of `host` failed.
  bool host_passed(int host) const;
  // 0 when nothing failed (warnings allowed), 1 otherwise.
  int exit_code() const;

  // The table, the problems (one line each, group_problems) and a summary.
  // `utf8` picks ✓ ✗ ! or their ASCII stand-ins (ok FAIL warn). The table
  // has a row for every host when there are at most kEveryRow hosts or
  // `verbose`; else a row for each host that failed or warned, and the
  // others are a count.
  std::string render(bool utf8, bool verbose = false) const;
  static constexpr size_t kEveryRow = 16;
  // The report as JSON (docs/doctor.md, "The JSON report"), indented.
  std::string to_json() const;

 private:
  std::vector<std::string> hosts_;
  std::vector<std::vector<Cell>> cells_;
  std::vector<std::optional<HostFacts>> facts_;  // absent: stage 3 did not reach the host
  std::vector<Problem> problems_;
  Notes notes_;
};

}  // namespace dl::doctor
