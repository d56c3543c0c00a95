#include "rendezvous/store.h"

namespace dl::rdzv {

int rank_of_key(const std::string& key) {
  auto slash = key.rfind('/');
  if (slash == std::string::npos || slash + 1 == key.size() || key.size() - slash > 10) return -1;
  std::string_view head = std::string_view(key).substr(0, slash);
  if (head != "rank" && !(head.size() > 5 && head.substr(head.size() - 5) == "/rank")) return -1;
  int n = 0;
  for (size_t i = slash + 1; i < key.size(); ++i) {
    if (key[i] < '0' || key[i] > '9') return -1;
    n = n * 10 + (key[i] - '0');
  }
  return n;
}

void Store::describe_key(const std::string& key, std::string text) {
  std::lock_guard lk(notes_mu_);
  notes_[key] = std::move(text);
}

std::string Store::timeout_message(Millis waited, const std::vector<std::string>& missing) {
  std::vector<std::string> named;
  std::string ranks;
  {
    std::lock_guard lk(notes_mu_);
    for (const auto& k : missing) {
      auto it = notes_.find(k);
      named.push_back("'" + k + "'" + (it == notes_.end() ? "" : " (" + it->second + ")"));
      int r = rank_of_key(k);
      if (r >= 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  std::string msg = "timed out after " + std::to_string(waited.count()) + " ms waiting for store key(s) ";
  for (size_t i = 0; i < named.size(); ++i)
    msg += (i == 0 ? "" : i + 1 == named.size() ? " and " : ", ") + named[i];
  if (!ranks.empty()) msg += "; missing rank(s): " + ranks + " (did they start, and can they reach the store?)";
  return msg;
}

}  // namespace dl::rdzv
