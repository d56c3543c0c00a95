#include "rendezvous/c10d_keyspace.h"

#include <algorithm>
#include <charconv>
#include <utility>

namespace dl::rdzv::c10d {

namespace {
bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// N of a key ending in "/rank_N", or -1.
int rank_of(const std::string& key) {
  const auto at = key.rfind("/rank_");
  if (at == std::string::npos) return -1;
  int r = -1;
  const char* first = key.data() + at + 6;
  const char* last = key.data() + key.size();
  auto [end, ec] = std::from_chars(first, last, r);
  return ec == std::errc() && end == last && first != last ? r : -1;
}
}  // namespace

std::string Keyspace::handle(Client client, const Query& q, std::string& reply) {
  std::string why;
  switch (q.op) {
    case Op::kValidate: break;
    case Op::kPing: put_u32(reply, static_cast<uint32_t>(q.number)); break;
    case Op::kSet:
      if (store(q.keys[0], q.values[0], why)) set_by(client, q.keys[0]);
      break;
    case Op::kAppend: {
      auto it = data_.find(q.keys[0]);
      store(q.keys[0], (it == data_.end() ? std::string() : it->second) + q.values[0], why);
      break;
    }
    case Op::kCompareSet: {
      auto it = data_.find(q.keys[0]);
      const bool absent = it == data_.end();
      if ((absent && q.values[0].empty()) || (!absent && it->second == q.values[0])) {
        if (store(q.keys[0], q.values[1], why)) put_bytes(reply, q.values[1]);
      } else {
        put_bytes(reply, absent ? q.values[0] : it->second);
      }
      break;
    }
    case Op::kGet: {
      auto it = data_.find(q.keys[0]);
      put_bytes(reply, it == data_.end() ? std::string() : it->second);
      break;
    }
    case Op::kAdd: {
      const int64_t v = add(client, q.keys[0], q.number, why);
      if (why.empty()) put_i64(reply, v);
      break;
    }
    case Op::kCheck: {
      bool all = true;
      for (const auto& k : q.keys) all = all && data_.count(k);
      put_u8(reply, all ? kReady : kNotReady);
      break;
    }
    case Op::kWait: park(client, q.keys, reply); break;
    case Op::kNumKeys: put_i64(reply, static_cast<int64_t>(data_.size())); break;
    case Op::kDelete: {
      auto it = data_.find(q.keys[0]);
      const bool found = it != data_.end();
      if (found) bytes_ -= it->first.size() + it->second.size(), data_.erase(it);
      put_i64(reply, found ? 1 : 0);
      break;
    }
    case Op::kMultiGet:
      for (const auto& k : q.keys) {
        auto it = data_.find(k);
        put_bytes(reply, it == data_.end() ? std::string() : it->second);
      }
      break;
    case Op::kMultiSet:
      for (size_t i = 0; i < q.keys.size() && why.empty(); ++i) store(q.keys[i], q.values[i], why);
      break;
    case Op::kCancelWait:
      unpark(client);
      put_u8(reply, kWaitCanceled);
      break;
  }
  return why;
}

// Sets `key`, unless the keyspace would pass its limits (`why` says so).
bool Keyspace::store(const std::string& key, std::string value, std::string& why) {
  auto it = data_.find(key);
  const size_t old = it == data_.end() ? 0 : key.size() + it->second.size();
  const size_t now = key.size() + value.size();
  if (it == data_.end() && data_.size() >= limits_.max_keys) {
    why = "the store holds " + std::to_string(data_.size()) + " keys, its most";
    return false;
  }
  if (bytes_ - old + now > limits_.max_bytes) {
    why = "the store would hold over " + std::to_string(limits_.max_bytes >> 20) + " MiB, its most";
    return false;
  }
  bytes_ = bytes_ - old + now;
  data_[key] = std::move(value);
  changed(key);
  return true;
}

int64_t Keyspace::add(Client client, const std::string& key, int64_t delta, std::string& why) {
  int64_t v = 0;
  if (auto it = data_.find(key); it != data_.end())
    std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  v += delta;
  if (!store(key, std::to_string(v), why)) return 0;
  note(client, key, delta, v);
  return v;
}

// What torch's rendezvous says through its keys: gloo publishes each
// rank's address as ".../rank_N"; every TCPStore client adds 1 to "init/";
// torch 1.x's store-based barrier counts ranks in "...store_based_barrier_key:N".
void Keyspace::note(Client client, const std::string& key, int64_t delta, int64_t count) {
  if (ends_with(key, "init/")) registered = std::max(registered, count);
  if (key.find("store_based_barrier_key") == std::string::npos || delta <= 0) return;
  barrier = std::max(barrier, count);
  auto r = rank_of_.find(client);
  if (r != rank_of_.end()) at_barrier.insert(r->second);
  else barrier_unknown_.insert(client);
}

// The client that sets gloo's ".../rank_N" is rank N's.
void Keyspace::set_by(Client client, const std::string& key) {
  const int r = rank_of(key);
  if (r < 0) return;
  rank_of_[client] = r;
  if (barrier_unknown_.erase(client)) at_barrier.insert(r);
}

void Keyspace::changed(const std::string& key) {
  if (int r = rank_of(key); r >= 0) ranks.insert(r);
  auto w = waiting_.find(key);
  if (w == waiting_.end()) return;
  for (Client c : w->second) {
    auto p = parked_.find(c);
    if (p == parked_.end()) continue;
    p->second.erase(key);
    if (p->second.empty()) parked_.erase(p), woken_.push_back(c);
  }
  waiting_.erase(w);
}

void Keyspace::park(Client client, const std::vector<std::string>& keys, std::string& reply) {
  unpark(client);  // torch's client waits once at a time; a new WAIT replaces an old one
  std::unordered_set<std::string> missing;
  for (const auto& k : keys)
    if (!data_.count(k)) missing.insert(k);
  if (missing.empty()) return put_u8(reply, kStopWaiting);
  for (const auto& k : missing) waiting_[k].insert(client);
  parked_[client] = std::move(missing);
}

void Keyspace::unpark(Client client) {
  auto p = parked_.find(client);
  if (p == parked_.end()) return;
  for (const auto& k : p->second) {
    auto w = waiting_.find(k);
    if (w == waiting_.end()) continue;
    w->second.erase(client);
    if (w->second.empty()) waiting_.erase(w);
  }
  parked_.erase(p);
}

std::vector<Keyspace::Client> Keyspace::take_woken() { return std::exchange(woken_, {}); }

void Keyspace::forget(Client client) {
  unpark(client);
  barrier_unknown_.erase(client);
}

void Keyspace::clear() {
  data_.clear();
  bytes_ = 0;
  ranks.clear();
  registered = barrier = 0;
  at_barrier.clear();
  rank_of_.clear();
  barrier_unknown_.clear();
}

}  // namespace dl::rdzv::c10d
