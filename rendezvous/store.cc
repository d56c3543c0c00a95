#include "rendezvous/store.h"

#include "errors/error.h"
#include "rendezvous/store_protocol.h"
#include "rendezvous/store_semantics.h"

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

void Store::check_barrier_count(const std::string& key, int64_t count) {
  std::string bad = semantics::barrier_count_error(key, count);
  if (!bad.empty()) throw UsageError(bad);
}

int64_t Store::barrier(const std::string& key, int64_t count, Millis timeout) {
  check_barrier_count(key, count);
  const int64_t me = add(key, 1);
  const std::string open = key + "/open";
  if (semantics::barrier_open(me, count)) set(open, "1");
  try {
    wait({open}, timeout);
  } catch (const TimeoutError&) {
    throw TimeoutError(barrier_timeout_message(timeout, key, count));
  }
  return me;
}

void Store::check_all_gather(const std::string& prefix, int64_t rank, int64_t count, size_t value_size) {
  std::string bad = semantics::all_gather_error(prefix, rank, count, value_size);
  if (!bad.empty()) throw UsageError(bad);
}

std::vector<Bytes> Store::all_gather(const std::string& prefix, int64_t rank, int64_t count, const Bytes& value,
                                     Millis timeout) {
  check_all_gather(prefix, rank, count, value.size());
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(count));
  for (int64_t r = 0; r < count; ++r) keys.push_back(prefix + "/rank/" + std::to_string(r));
  set(keys[static_cast<size_t>(rank)], value);
  try {
    wait(keys, timeout);
  } catch (const TimeoutError&) {
    std::vector<std::string> missing;
    size_t unnamed = 0;
    for (const auto& k : keys) {
      if (check({k})) continue;
      if (missing.size() < proto::kMaxNamedMissing) missing.push_back("rank/" + std::to_string(rank_of_key(k)));
      else ++unnamed;
    }
    if (unnamed > 0) missing.push_back("... and " + std::to_string(unnamed) + " more ranks");
    throw TimeoutError(all_gather_timeout_message(timeout, prefix, count, missing));
  }
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const auto& k : keys) values.push_back(get(k));
  return values;
}

std::string Store::all_gather_timeout_message(Millis waited, const std::string& prefix, int64_t count,
                                              const std::vector<std::string>& missing) {
  std::string ranks;
  for (const auto& k : missing) {
    const int r = rank_of_key(k);
    ranks += (ranks.empty() ? "" : ", ") + (r >= 0 ? std::to_string(r) : k);
  }
  return "timed out after " + std::to_string(waited.count()) + " ms at the all-gather of " + std::to_string(count) +
         " ranks at store key '" + prefix + "': no value from rank(s) " + ranks +
         " (did they start, are they stuck before it, and can they reach the store?)";
}

std::string Store::barrier_timeout_message(Millis waited, const std::string& key, int64_t count) {
  std::string arrived = "?";
  try {
    arrived = std::to_string(add(key, 0));
  } catch (const Error&) {}
  std::string note;
  {
    std::lock_guard lk(notes_mu_);
    auto it = notes_.find(key);
    if (it != notes_.end()) note = " (" + it->second + ")";
  }
  return "timed out after " + std::to_string(waited.count()) + " ms at the barrier at store key '" + key + "'" + note +
         ": " + arrived + " of " + std::to_string(count) +
         " callers arrived (did the others start, are they stuck before it, and can they reach the store?)";
}

}  // namespace dl::rdzv
