#include "control/tree_words.h"

namespace dl::control {

namespace {
// "; the N host(s) WHERE (a, b, ...) END", at most 8 named.
std::string hosts_clause(const std::vector<std::string>& hosts, const char* where, const char* end) {
  if (hosts.empty()) return "";
  constexpr size_t kNamed = 8;
  std::string list;
  for (size_t i = 0; i < hosts.size() && i < kNamed; ++i) list += (i ? ", " : "") + hosts[i];
  if (hosts.size() > kNamed) list += ", ...";
  return "; the " + std::to_string(hosts.size()) + (hosts.size() == 1 ? " host " : " hosts ") + where + " (" + list +
         ") " + end;
}
}  // namespace

std::string lost_with_beneath(const std::string& why, const std::vector<std::string>& beneath) {
  return why + hosts_clause(beneath, "beneath it", "were lost with it");
}

std::string lost_with_relay(const std::string& relay, const std::string& why) {
  return "lost with the agent on " + relay + ", which relayed for it (" + why + ")";
}

std::string not_started_beneath(const std::string& why, const std::vector<std::string>& beneath) {
  return why + hosts_clause(beneath, "it was to start", "were not started");
}

}  // namespace dl::control
