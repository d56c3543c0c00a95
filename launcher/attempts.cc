#include "launcher/attempts.h"

#include "errors/exit_codes.h"

namespace dl::launcher {

void Attempts::begin_restart(std::vector<int> nodes, std::vector<int> anew, int port_node) {
  waiting_ = {nodes.begin(), nodes.end()};
  anew_ = {anew.begin(), anew.end()};
  port_node_ = port_node >= 0 ? port_node : waiting_.empty() ? -1 : *waiting_.begin();
  ports_.clear();
  restarting_ = true;
  for (const auto& [node, port] : early_)
    if (!anew_.count(node) && waiting_.erase(node) > 0) ports_[node] = port;
  early_.clear();
}

bool Attempts::ready(int node, int attempt, int free_port) {
  if (attempt != next()) return false;
  if (!restarting_) {
    early_[node] = free_port;
    return false;
  }
  if (waiting_.erase(node) == 0) return false;
  ports_[node] = free_port;
  return waiting_.empty();
}

int Attempts::master_port() const {
  auto it = ports_.find(port_node_);
  return it == ports_.end() ? 0 : it->second;
}

std::string Attempts::attempt_name(int n) const {
  return "attempt " + std::to_string(n) + " of " + std::to_string(max_ + 1);
}

std::string Attempts::name() const {
  if (max_ == 0) return "";
  return attempt_name(restart_ + 1);
}

std::string Attempts::restarting_line(const std::string& verdict) const {
  const int left = max_ - restart_ - 1;
  return "dlaunch: " + name() + " failed: " + verdict + "; restarting (" +
         (left == 0 ? "the last restart" : std::to_string(left) + " more restart" + (left == 1 ? "" : "s") + " left") +
         ")";
}

std::string Attempts::final_line(const Fate& fate) const {
  std::string line = verdict_line(fate);
  if (changes_.empty()) return line;
  // Also after a first attempt that succeeded: a host failed the gate, or a spare was lost.
  line += std::string(line.empty() ? "" : "\n") + "dlaunch: the job's hosts changed " + std::to_string(changes_.size()) +
          (changes_.size() == 1 ? " time: " : " times: ");
  for (size_t i = 0; i < changes_.size(); ++i) line += (i ? "; " : "") + changes_[i];
  return line;
}

std::string Attempts::verdict_line(const Fate& fate) const {
  if (!fate.failed()) return restart_ > 0 ? "dlaunch: " + name() + " succeeded" : "";
  if (max_ == 0) return fate.said() ? "" : "dlaunch: " + fate.verdict();
  // The verdict went out with "restarting": the reason it did not happen, alone.
  if (!refused_.empty() && restarting_) return "dlaunch: " + name() + " failed (above); cannot restart: " + refused_;
  std::string why;
  if (!refused_.empty()) why = "; cannot restart: " + refused_;
  else if (fate.retryable()) why = "; no restarts left";
  else if (fate.stopped()) why = "; not restarted: dlaunch was stopped (a signal or --timeout)";
  // A usage failure's verdict says what to change (--max-restarts with MPI, --bind-to on too few cores).
  else if (restart_ < max_ && fate.exit_code() != exit_codes::kUsage)
    why = "; not restarted (only a rank's own failure or a lost host is)";
  return "dlaunch: " + name() + " failed: " + fate.verdict() + why;
}

}  // namespace dl::launcher
