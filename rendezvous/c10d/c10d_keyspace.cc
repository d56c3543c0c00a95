#include "rendezvous/c10d/c10d_keyspace.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "errors/error.h"

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

// The value at `key`, "" when it is missing (torch's server answers a GET of
// a missing key with nothing only after its client has waited for it).
const std::string& Keyspace::value(const std::string& key) const {
  static const std::string none;
  const Bytes* v = find(key);
  return v ? *v : none;
}

std::string Keyspace::handle(Client client, const Query& q, std::string& reply) {
  try {
    answer(client, q, reply);
  } catch (const RemoteError& e) {
    return e.what();  // a bound, or ADD on a value that is no integer: nothing was changed
  }
  return "";
}

void Keyspace::answer(Client client, const Query& q, std::string& reply) {
  switch (q.op) {
    case Op::kValidate: break;
    case Op::kPing: put_u32(reply, static_cast<uint32_t>(q.number)); break;
    case Op::kSet:
      put(q.keys[0], q.values[0]);
      set_by(client, q.keys[0]);
      break;
    case Op::kAppend: put(q.keys[0], value(q.keys[0]) + q.values[0]); break;
    case Op::kCompareSet: put_bytes(reply, semantics::compare_set(*this, q.keys[0], q.values[0], q.values[1]).value); break;
    case Op::kGet:
      fits_reply(reply, 8 + value(q.keys[0]).size());
      put_bytes(reply, value(q.keys[0]));
      break;
    case Op::kAdd: {
      const int64_t v = semantics::add(*this, q.keys[0], q.number);
      note(client, q.keys[0], q.number, v);
      put_i64(reply, v);
      break;
    }
    case Op::kCheck: put_u8(reply, semantics::has_all(*this, q.keys) ? kReady : kNotReady); break;
    case Op::kWait: park(client, q.keys, reply); break;
    case Op::kNumKeys: put_i64(reply, semantics::num_keys(*this)); break;
    case Op::kDelete: put_i64(reply, semantics::delete_key(*this, q.keys[0]) ? 1 : 0); break;
    case Op::kMultiGet: {
      size_t more = 0;
      for (const auto& k : q.keys) more += 8 + value(k).size();
      fits_reply(reply, more);
      for (const auto& k : q.keys) put_bytes(reply, value(k));
      break;
    }
    case Op::kMultiSet:
      for (size_t i = 0; i < q.keys.size(); ++i) put(q.keys[i], q.values[i]);
      break;
    case Op::kCancelWait:
      unpark(client);
      put_u8(reply, kWaitCanceled);
      break;
  }
}

// Throws RemoteError when `more` bytes would take `reply` over max_reply:
// the query is refused before its reply is built.
void Keyspace::fits_reply(const std::string& reply, size_t more) const {
  if (reply.size() + more <= limits_.max_reply) return;
  throw RemoteError("its reply would take " + std::to_string((reply.size() + more) >> 20) + " MiB, over the " +
                    std::to_string(limits_.max_reply >> 20) + " MiB one query may be answered with");
}

const Bytes* Keyspace::find(const std::string& key) const {
  auto it = data_.find(key);
  return it == data_.end() ? nullptr : &it->second;
}

// Sets `key` and wakes its waiters; throws RemoteError (nothing changed)
// when the keyspace would pass its limits.
void Keyspace::put(const std::string& key, Bytes value) {
  auto it = data_.find(key);
  const size_t old = it == data_.end() ? 0 : key.size() + it->second.size();
  const size_t now = key.size() + value.size();
  if (it == data_.end() && data_.size() >= limits_.max_keys)
    throw RemoteError("the store holds " + std::to_string(data_.size()) + " keys, its most");
  if (bytes_ - old + now > limits_.max_bytes)
    throw RemoteError("the store would hold over " + std::to_string(limits_.max_bytes >> 20) + " MiB, its most");
  bytes_ = bytes_ - old + now;
  data_[key] = std::move(value);
  changed(key);
}

bool Keyspace::erase(const std::string& key) {
  auto it = data_.find(key);
  if (it == data_.end()) return false;
  bytes_ -= it->first.size() + it->second.size();
  data_.erase(it);
  return true;
}

// What torch's rendezvous says through its keys: gloo publishes each
// rank's address as ".../rank_N"; every TCPStore client adds 1 to "init/";
// torch 1.x's store-based barrier counts ranks in "...store_based_barrier_key:N".
void Keyspace::note(Client client, const std::string& key, int64_t delta, int64_t count) {
  if (ends_with(key, "init/")) {
    registered = std::max(registered, count);
    if (delta > 0) ranked_.insert(client);
  }
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
  ranked_.insert(client);
  if (barrier_unknown_.erase(client)) at_barrier.insert(r);
}

void Keyspace::changed(const std::string& key) {
  if (int r = rank_of(key); r >= 0) ranks.insert(r);
  auto w = waiting_.find(key);
  if (w == waiting_.end()) return;
  for (Client c : w->second) {
    auto p = parked_.find(c);
    if (p == parked_.end()) continue;
    if (p->second.erase(key)) waiting_bytes_ -= key.size();
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
  size_t bytes = 0;
  for (const auto& k : missing) bytes += k.size();
  if (waiting_bytes_ + bytes > limits_.max_waiting)
    throw RemoteError("a WAIT for " + std::to_string(missing.size()) + " keys would take the keys waited for over " +
                      std::to_string(limits_.max_waiting >> 20) + " MiB, the most the store holds for all clients");
  waiting_bytes_ += bytes;
  for (const auto& k : missing) waiting_[k].insert(client);
  parked_[client] = std::move(missing);
}

void Keyspace::unpark(Client client) {
  auto p = parked_.find(client);
  if (p == parked_.end()) return;
  for (const auto& k : p->second) {
    waiting_bytes_ -= k.size();
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
  ranked_.erase(client);
}

void Keyspace::clear() {
  data_.clear();
  bytes_ = 0;
  ranks.clear();
  registered = barrier = 0;
  at_barrier.clear();
  rank_of_.clear();
  barrier_unknown_.clear();
  ranked_.clear();
}

}  // namespace dl::rdzv::c10d
