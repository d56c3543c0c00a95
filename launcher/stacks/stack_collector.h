#pragma once
// Asks every agent for its ranks' stacks, waits for the answers (bounded),
// prints the grouped summary on stderr and writes the full report
// (launcher/stacks/stack_report.h) to the report directory: on --timeout before the
// teardown, and whenever dlaunch gets SIGQUIT (Ctrl-\), after which the job
// goes on. docs/hangs.md is the user's side of it.
//
// Threading: the Job's io_context thread.
#include <boost/asio.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/messages.h"
#include "launcher/stacks/stack_report.h"
#include "wire/private_dir.h"

namespace dl::launcher {

struct StackOptions {
  double timeout_s = 10;    // --stack-timeout: each agent's bound; 0 = collect nothing
  std::string report_dir;   // --report-dir; "" = a new temp dir, named on stderr and left behind
  std::string report_json;  // --report-json FILE: the latest report as JSON there too; "" = none
};

// Refuses (UsageError naming the option) a --report-dir or --report-json
// that the report could not be written to safely (wire/private_dir.h);
// makes nothing. "" is not checked.
void check_report_paths(const std::string& report_dir, const std::string& report_json);

// An agent to ask: its node, its host, and the ranks it runs.
struct StackSource {
  int node = 0;
  std::string host;
  std::vector<int> ranks;
};

class StackCollector {
 public:
  struct Hooks {
    // The agents to ask now (connected, ranks launched); empty before the launch.
    std::function<std::vector<StackSource>()> sources;
    std::function<void(int node, const control::msg::DumpStacks&)> send;
    // The job's membership changes so far (each report lists them); null: none.
    std::function<std::vector<MembershipChange>()> membership;
  };
  // Starts listening for SIGQUIT.
  StackCollector(boost::asio::io_context& io, StackOptions opts, Hooks hooks);

  // Collects, reports, then calls `then` (at once when collection is off).
  // A request while one runs joins it: `then` runs after that report.
  void collect(const std::string& reason, std::function<void()> then);
  // --timeout `seconds` fired: collect("--timeout N s", then).
  void on_timeout(double seconds, std::function<void()> then);
  // An agent's answer; one for another request is ignored.
  void on_stacks(int node, const control::msg::Stacks& m);
  // The agent on `node` is gone: its ranks are reported as unanswered now.
  void on_closed(int node);
  // The job's end: --report-json gets the latest stack report again with
  // every membership change, or the changes alone; nothing when there was
  // neither. Returns why it could not be written ("" when it was, or was not
  // to be).
  std::string write_final();

 private:
  void on_quit();
  void finish();
  std::vector<MembershipChange> membership() const;
  wire::PrivateDir report_dir();
  void write_report(const std::string& reason, const std::vector<StackGroup>& groups,
                    const std::vector<RankStackEntry>& stacks, std::string& where);

  boost::asio::io_context& io_;
  StackOptions opts_;
  Hooks hooks_;
  boost::asio::signal_set quit_;
  boost::asio::steady_timer deadline_;
  uint64_t id_ = 0;
  bool busy_ = false;
  int reports_ = 0;
  std::string reason_;
  std::map<int, StackSource> waiting_;         // by node: asked, not answered
  std::vector<RankStackEntry> got_;
  std::vector<std::function<void()>> then_;
  struct Written {  // the latest report, for write_final()
    std::string reason;
    std::vector<StackGroup> groups;
    std::vector<RankStackEntry> stacks;
  };
  std::optional<Written> last_;
  bool temp_dir_ = false;                      // report_dir was made by us
};

}  // namespace dl::launcher
