#include "rendezvous/store_state.h"

#include <algorithm>

#include "errors/error.h"

namespace dl::rdzv {

using proto::Op;

namespace {
const std::string kNoKey;  // the key of key-less requests (never read)

proto::Reply error_reply(std::string message) { return {proto::Status::kError, std::move(message), 0, {}, nullptr}; }
}  // namespace

StoreState::Result StoreState::execute(const proto::Request& r) { return run(r, nullptr); }

StoreState::Result StoreState::execute(const proto::Request& r, Clock::time_point now) { return run(r, &now); }

// `now` is read only when the request parks: most requests never need it.
StoreState::Result StoreState::run(const proto::Request& r, const Clock::time_point* now) {
  Result out;
  const std::string& key = r.keys.empty() ? kNoKey : r.keys[0];
  switch (r.op) {
    case Op::kSet:
      data_.put(key, r.value);
      notify(key);
      break;
    case Op::kGet:
    case Op::kWait:
      if (!semantics::has_all(data_, r.keys)) {
        out.parked = park(r, 0, now);
        break;
      }
      if (r.op == Op::kGet) out.reply.value = *data_.find(key);
      break;
    case Op::kAdd:
    case Op::kBarrier:
    case Op::kBarrierWeighted: {
      if (proto::is_barrier(r.op)) {
        std::string bad = proto::check_limits(r);
        if (!bad.empty()) return {error_reply(std::move(bad)), nullptr};
      }
      const int64_t step = r.op == Op::kAdd ? r.number : r.op == Op::kBarrier ? 1 : r.weight;
      try {
        out.reply.number = semantics::add(data_, key, step);
      } catch (const RemoteError& e) {
        return {error_reply(e.what()), nullptr};
      }
      // Wakes the others first: the barrier parked below is below its count,
      // so this would not answer it anyway, and parking last keeps the rule
      // that execute() never answers the request it parks.
      notify(key);
      if (proto::is_barrier(r.op) && !semantics::barrier_open(out.reply.number, r.count))
        out.parked = park(r, out.reply.number, now);
      break;
    }
    case Op::kCas: {
      auto cas = semantics::compare_set(data_, key, r.value, r.desired);
      out.reply.value = std::move(cas.value);
      if (cas.swapped) notify(key);
      break;
    }
    case Op::kCheck: out.reply.number = semantics::has_all(data_, r.keys); break;
    case Op::kDelete: out.reply.number = semantics::delete_key(data_, key); break;
    case Op::kNumKeys: out.reply.number = semantics::num_keys(data_); break;
    case Op::kAllGather:
    case Op::kAllGatherMany: return all_gather(r, now);
  }
  return out;
}

StoreState::Result StoreState::all_gather(const proto::Request& r, const Clock::time_point* now) {
  const std::string& prefix = r.keys[0];
  std::string bad = proto::check_limits(r);
  if (!bad.empty()) return {error_reply(std::move(bad)), nullptr};
  if (const Bytes* done = data_.find(prefix)) {
    // Complete already (or a key of that name): answered from what is stored.
    Result out;
    try {
      const size_t n = proto::decode_values(*done).size();
      if (static_cast<int64_t>(n) == r.count) return out.reply.value = *done, out;
    } catch (const RemoteError&) {}
    return {error_reply("all-gather at store key '" + prefix.substr(0, 200) + "' for " + std::to_string(r.count) +
                        " ranks: the key holds another value (an all-gather of another count, or a set): "
                        "use a fresh prefix for each all-gather"),
            nullptr};
  }
  auto [it, fresh] = gathers_.try_emplace(prefix);
  bad = contribute(it->second, r);
  if (!bad.empty()) {
    if (fresh) gathers_.erase(it);
    return {error_reply(std::move(bad)), nullptr};
  }
  if (static_cast<int64_t>(it->second.values.size()) == r.count) return complete(prefix);
  Result out;
  out.parked = park(r, 0, now);
  return out;
}

// Adds (or replaces) r's values in g, all or none; the reason when they are
// refused.
std::string StoreState::contribute(Gather& g, const proto::Request& r) {
  std::vector<Part> parts;
  if (r.op == Op::kAllGather) parts.push_back({r.rank, r.value});
  for (const auto& c : r.parts) parts.push_back({c.rank, c.value});
  const std::string what = "all-gather at store key '" + r.keys[0].substr(0, 200) + "'";
  if (g.count == 0) g.count = r.count, g.list_bytes = proto::values_list_size(0, 0);
  if (g.count != r.count)
    return what + ": rank " + std::to_string(parts[0].rank) + " says " + std::to_string(r.count) +
           " ranks, others said " + std::to_string(g.count);
  size_t bytes = g.list_bytes;
  for (const auto& [rank, value] : parts) {
    auto old = g.values.find(rank);
    bytes = bytes - (old == g.values.end() ? 0 : 4 + old->second.size()) + 4 + value.size();
  }
  if (bytes > proto::kMaxGatherBytes)
    return what + ": the value of rank " + std::to_string(parts.back().rank) + " takes the values over the limit of " +
           std::to_string(proto::kMaxGatherBytes) + " bytes";
  g.list_bytes = bytes;
  for (const auto& [rank, value] : parts) g.values.insert_or_assign(rank, Bytes(value));
  return {};
}

// The last value arrived: the list goes under the prefix and to every
// caller parked on it; the caller that completed it gets it in the Result.
StoreState::Result StoreState::complete(const std::string& prefix) {
  auto node = gathers_.extract(prefix);
  Gather& g = node.mapped();
  std::vector<Bytes> ordered(static_cast<size_t>(g.count));
  for (auto& [rank, value] : g.values) ordered[static_cast<size_t>(rank)] = std::move(value);
  g.values.clear();
  auto list = std::make_shared<const std::string>(proto::encode_values(ordered));
  ordered.clear();
  data_.put(prefix, *list);
  proto::Reply done;
  done.list = list;
  for (const auto& w : g.ws) {
    if (w->done) continue;
    unpark(w);
    answer_(w, done);
  }
  notify(prefix);  // get(prefix) and wait callers
  return {std::move(done), nullptr};
}

// The kTimeout reply of a parked all-gather: "rank/<r>" for the ranks whose
// value has not come, at most kMaxNamedMissing of them, then "... and N more".
proto::Reply StoreState::gather_timeout(const proto::Request& req) const {
  proto::Reply r;
  r.status = proto::Status::kTimeout;
  auto it = gathers_.find(req.keys[0]);
  if (it == gathers_.end()) return r;
  const Gather& g = it->second;
  int64_t unnamed = 0;
  for (int64_t rank = 0; rank < g.count; ++rank) {
    if (g.values.count(rank)) continue;
    if (r.keys.size() < proto::kMaxNamedMissing) r.keys.push_back("rank/" + std::to_string(rank));
    else ++unnamed;
  }
  if (unnamed > 0) r.keys.push_back("... and " + std::to_string(unnamed) + " more ranks");
  return r;
}

size_t StoreState::erase_all_but(const std::string& keep) {
  for (auto it = gathers_.begin(); it != gathers_.end();) {
    if (it->first.rfind(keep, 0) == 0) {
      ++it;
      continue;
    }
    const std::vector<WaiterPtr> ws = std::move(it->second.ws);
    it = gathers_.erase(it);
    for (const auto& w : ws) {
      if (w->done) continue;
      unpark(w);
      answer_(w, error_reply("the all-gather at store key '" + w->req.keys[0].substr(0, 200) +
                             "' was dropped: the job restarted and its store keys were cleared"));
    }
  }
  return data_.erase_all_but(keep);
}

StoreState::WaiterPtr StoreState::park(const proto::Request& req, int64_t arrival, const Clock::time_point* now) {
  auto w = std::make_shared<Waiter>(req);
  w->arrival = arrival;
  if (proto::is_gather(req.op)) {  // the values are kept once, in the Gather
    std::string().swap(w->req.value);
    std::vector<proto::Contribution>().swap(w->req.parts);
  }
  if (proto::is_barrier(req.op)) {
    auto& b = barriers_[req.keys[0]];
    b.ws.push_back(w);
    b.min_count = std::min(b.min_count, req.count);
  } else if (proto::is_gather(req.op)) {
    gathers_[req.keys[0]].ws.push_back(w);
  } else {
    for (const auto& k : semantics::missing(data_, req.keys)) waiters_[k].push_back(w);
  }
  const auto ms = std::chrono::milliseconds(std::clamp<int64_t>(req.number, 0, int64_t{1} << 40));
  w->deadline = deadlines_.emplace((now ? *now : Clock::now()) + ms, w);
  return w;
}

void StoreState::cancel(const WaiterPtr& w) { unpark(w); }

void StoreState::unpark(const WaiterPtr& w) {
  if (w->done) return;
  w->done = true;
  deadlines_.erase(w->deadline);  // the server's timer may fire for nothing: harmless
  if (proto::is_barrier(w->req.op)) {
    auto it = barriers_.find(w->req.keys[0]);
    if (it == barriers_.end()) return;
    auto& v = it->second.ws;
    v.erase(std::remove(v.begin(), v.end(), w), v.end());  // min_count may stay low: one extra scan
    if (v.empty()) barriers_.erase(it);
    return;
  }
  if (proto::is_gather(w->req.op)) {
    auto it = gathers_.find(w->req.keys[0]);
    if (it == gathers_.end()) return;
    auto& v = it->second.ws;
    v.erase(std::remove(v.begin(), v.end(), w), v.end());  // the values so far stay
    return;
  }
  for (const auto& k : w->req.keys) {
    auto it = waiters_.find(k);
    if (it == waiters_.end()) continue;
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), w), v.end());
    if (v.empty()) waiters_.erase(it);
  }
}

void StoreState::expire(Clock::time_point now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    WaiterPtr w = deadlines_.begin()->second;
    finish(w, true);  // erases its entry
  }
}

// Answers the barriers parked on key whose count its value has reached.
void StoreState::wake_barriers(const std::string& key) {
  auto it = barriers_.find(key);
  if (it == barriers_.end()) return;
  const Bytes* text = data_.find(key);
  auto v = text ? semantics::parse_integer(*text) : std::nullopt;
  if (!v || *v < it->second.min_count) return;
  std::vector<WaiterPtr> ready, rest;
  int64_t min_count = INT64_MAX;
  for (auto& w : it->second.ws) {
    if (semantics::barrier_open(*v, w->req.count)) ready.push_back(std::move(w));
    else min_count = std::min(min_count, w->req.count), rest.push_back(std::move(w));
  }
  if (rest.empty()) barriers_.erase(it);
  else it->second.ws = std::move(rest), it->second.min_count = min_count;
  for (const auto& w : ready) finish(w, false);
}

void StoreState::notify(const std::string& key) {
  if (!barriers_.empty()) wake_barriers(key);
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<WaiterPtr> ws = std::move(it->second);
  waiters_.erase(it);
  for (const auto& w : ws)
    if (!w->done && semantics::has_all(data_, w->req.keys)) finish(w, false);
}

void StoreState::finish(const WaiterPtr& w, bool timed_out) {
  unpark(w);
  proto::Reply r;
  if (timed_out && proto::is_gather(w->req.op)) {
    r = gather_timeout(w->req);
  } else if (timed_out) {
    r.status = proto::Status::kTimeout;
    r.keys = proto::is_barrier(w->req.op) ? w->req.keys : semantics::missing(data_, w->req.keys);
  } else if (w->req.op == Op::kGet) {
    if (const Bytes* v = data_.find(w->req.keys[0])) r.value = *v;
  } else if (proto::is_barrier(w->req.op)) {
    r.number = w->arrival;
  }
  answer_(w, r);
}

}  // namespace dl::rdzv
