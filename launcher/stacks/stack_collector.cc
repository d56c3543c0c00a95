#include "launcher/stacks/stack_collector.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "errors/error.h"
#include "errors/temp_dirs.h"
#include "launcher/output/output_sink.h"
#include "wire/private_dir.h"

namespace dl::launcher {

namespace asio = boost::asio;
namespace msg = control::msg;
using std::chrono::milliseconds;

namespace {
// Beyond the agents' own bound: their answers' way back.
constexpr milliseconds kAnswerSlack{3000};

void say(const std::string& line) { write_fully(2, "dlaunch: " + line + "\n"); }

std::string seconds_text(double s) {
  std::string t = std::to_string(s);
  t.erase(t.find_last_not_of('0') + 1);
  if (!t.empty() && t.back() == '.') t.pop_back();
  return t;
}
}  // namespace

StackCollector::StackCollector(asio::io_context& io, StackOptions opts, Hooks hooks)
    : io_(io), opts_(std::move(opts)), hooks_(std::move(hooks)), quit_(io, SIGQUIT), deadline_(io) {
  quit_.async_wait([this](auto ec, int) { if (!ec) on_quit(); });
}

void StackCollector::on_quit() {
  quit_.async_wait([this](auto ec, int) { if (!ec) on_quit(); });
  collect("SIGQUIT", {});
}

void StackCollector::on_timeout(double seconds, std::function<void()> then) {
  collect("--timeout " + seconds_text(seconds) + " s", std::move(then));
}

void StackCollector::collect(const std::string& reason, std::function<void()> then) {
  if (then) then_.push_back(std::move(then));
  if (busy_) return say("still collecting stacks (" + reason_ + "); " + reason + " waits for that report");
  if (opts_.timeout_s <= 0) {
    if (reason == "SIGQUIT") say("SIGQUIT: stack collection is off (--stack-timeout 0); the job goes on");
    return finish();
  }
  auto sources = hooks_.sources();
  if (sources.empty()) {
    if (reason == "SIGQUIT") say("SIGQUIT: no ranks are running yet; the job goes on");
    return finish();
  }
  busy_ = true;
  reason_ = reason;
  got_.clear();
  waiting_.clear();
  ++id_;
  const int ms = static_cast<int>(opts_.timeout_s * 1000);
  say(reason + ": collecting the stacks of every rank (at most " + seconds_text(opts_.timeout_s) + " s)");
  for (auto& s : sources) {
    waiting_[s.node] = s;
    hooks_.send(s.node, msg::DumpStacks{id_, ms});
  }
  deadline_.expires_after(milliseconds(ms) + kAnswerSlack);
  deadline_.async_wait([this](boost::system::error_code ec) {
    if (!ec) finish();
  });
}

void StackCollector::on_stacks(int node, const msg::Stacks& m) {
  auto it = waiting_.find(node);
  if (!busy_ || m.id != id_ || it == waiting_.end()) return;
  for (const auto& r : m.ranks)
    got_.push_back({r.rank, it->second.host, r.pid, r.how, r.text, r.error.value_or("")});
  // A rank the agent did not mention (it never started there) is named too.
  for (int rank : it->second.ranks) {
    bool found = false;
    for (const auto& r : m.ranks) found = found || r.rank == rank;
    if (!found) got_.push_back({rank, it->second.host, 0, "", "", "was not started"});
  }
  waiting_.erase(it);
  if (waiting_.empty()) finish();
}

void StackCollector::on_closed(int node) {
  auto it = waiting_.find(node);
  if (!busy_ || it == waiting_.end()) return;
  for (int rank : it->second.ranks) got_.push_back({rank, it->second.host, 0, "", "", "its agent left before answering"});
  waiting_.erase(it);
  if (waiting_.empty()) finish();
}

// Every agent answered or the deadline passed: the report, then what waited for it.
void StackCollector::finish() {
  deadline_.cancel();
  if (busy_) {
    busy_ = false;
    for (auto& [node, s] : waiting_)
      for (int rank : s.ranks)
        got_.push_back({rank, s.host, 0, "", "",
                        "no answer from its agent within " + seconds_text(opts_.timeout_s + kAnswerSlack.count() / 1000.0) + " s"});
    waiting_.clear();
    auto groups = group_stacks(got_);
    std::string where;
    write_report(reason_, groups, got_, where);
    say("where the ranks are (" + reason_ + "), grouped by stack, odd ones out first:");
    for (const auto& g : groups) write_fully(2, "dlaunch:   " + summary_line(g) + "\n");
    say(where);
  }
  auto then = std::move(then_);
  then_.clear();
  for (auto& f : then) f();
}

void check_report_paths(const std::string& report_dir, const std::string& report_json) {
  try {
    if (!report_dir.empty()) wire::PrivateDir::check(report_dir);
  } catch (const Error& e) {
    throw UsageError(std::string("--report-dir: ") + e.what());
  }
  try {
    if (!report_json.empty()) wire::check_private_file(report_json);
  } catch (const Error& e) {
    throw UsageError(std::string("--report-json: ") + e.what());
  }
}

// --report-dir (made 0700 if missing), or a new temp dir.
wire::PrivateDir StackCollector::report_dir() {
  if (!opts_.report_dir.empty()) return wire::PrivateDir::open(opts_.report_dir, true);
  // This user's reports of over a week ago go (errors/temp_dirs.h).
  reap_old_stack_reports(temp_base());
  // No job id in the name: every user can list /tmp.
  std::string tmpl = temp_base() + "/dlaunch-stacks-XXXXXX";
  if (!::mkdtemp(tmpl.data()))
    throw IoError("could not make a directory for the full stacks (" + tmpl + ": " + std::strerror(errno) +
                  "); give one with --report-dir");
  opts_.report_dir = tmpl;
  temp_dir_ = true;
  return wire::PrivateDir::open(tmpl, false);
}

// Writes DIR/stacks-N.txt and .json (and --report-json); `where` says where,
// or why not.
void StackCollector::write_report(const std::string& reason, const std::vector<StackGroup>& groups,
                                  const std::vector<RankStackEntry>& stacks, std::string& where) {
  const std::string json = json_report(reason, groups, stacks, membership());
  if (!opts_.report_json.empty()) last_ = Written{reason, groups, stacks};
  try {
    const wire::PrivateDir dir = report_dir();
    const std::string name = "stacks-" + std::to_string(++reports_);
    dir.write_file(name + ".txt", full_report("dlaunch: where the ranks are (" + reason + ")", groups, stacks));
    dir.write_file(name + ".json", json);
    where = "full stacks: " + dir.path() + "/" + name + ".txt (JSON: " + dir.path() + "/" + name + ".json)";
    if (temp_dir_) where += "; " + dir.path() + " is left for you to read (dlaunch removes its reports after 7 days)";
  } catch (const Error& e) {
    where = std::string("could not write the full stacks (--report-dir): ") + e.what();
    return;
  }
  if (opts_.report_json.empty()) return;
  try {
    wire::write_private_file(opts_.report_json, json);
  } catch (const Error& e) {
    where += std::string("; could not write --report-json: ") + e.what();
  }
}

std::vector<MembershipChange> StackCollector::membership() const {
  return hooks_.membership ? hooks_.membership() : std::vector<MembershipChange>{};
}

std::string StackCollector::write_final() {
  if (opts_.report_json.empty()) return "";
  const auto changes = membership();
  if (!last_ && changes.empty()) return "";
  try {
    wire::write_private_file(opts_.report_json, last_ ? json_report(last_->reason, last_->groups, last_->stacks, changes)
                                                      : json_membership(changes));
  } catch (const Error& e) {
    return std::string("could not write --report-json: ") + e.what();
  }
  return "";
}

}  // namespace dl::launcher
