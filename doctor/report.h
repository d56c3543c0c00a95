#pragma once
// The doctor's findings: a table of host x check, each cell a mark (ok,
// warning, failure, not run) with a short text, and one Problem per thing
// wrong, naming where and how to fix it. Pure data and formatting: the
// stages fill it, the command prints it (table or JSON) and exits with
// exit_code().
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

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

class Report {
 public:
  explicit Report(std::vector<std::string> hosts);

  const std::vector<std::string>& hosts() const { return hosts_; }
  // REQUIRES: 0 <= host < hosts().size().
  void set(int host, Check c, Mark m, std::string text = "");
  const Cell& cell(int host, Check c) const;
  void add(Problem p);
  const std::vector<Problem>& problems() const { return problems_; }
  // Extra facts shown under the table and in the JSON ("interface", "busbw", ...).
  void note(const std::string& key, nlohmann::json value);
  nlohmann::json& host_facts(int host) { return facts_[static_cast<size_t>(host)]; }

  // True when no cell of `host` failed.
  bool host_passed(int host) const;
  // 0 when nothing failed (warnings allowed), 1 otherwise.
  int exit_code() const;

  // The table, the problems (one line each) and a summary. `utf8` picks
  // ✓ ✗ ! or their ASCII stand-ins (ok FAIL warn).
  std::string render(bool utf8) const;
  nlohmann::json to_json() const;

 private:
  std::vector<std::string> hosts_;
  std::vector<std::vector<Cell>> cells_;
  std::vector<nlohmann::json> facts_;
  std::vector<Problem> problems_;
  nlohmann::json notes_ = nlohmann::json::object();
};

}  // namespace dl::doctor
