#include "rendezvous/store_state.h"

#include <algorithm>

#include "errors/error.h"

namespace dl::rdzv {

using proto::Op;

namespace {
const std::string kNoKey;  // the key of key-less requests (never read)

proto::Reply error_reply(std::string message) { return {proto::Status::kError, std::move(message), 0, {}}; }
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
    case Op::kBarrier: {
      if (r.op == Op::kBarrier) {
        std::string bad = semantics::barrier_count_error(key, r.count);
        if (!bad.empty()) return {error_reply(std::move(bad)), nullptr};
      }
      try {
        out.reply.number = r.op == Op::kAdd ? semantics::add(data_, key, r.number)
                                            : semantics::barrier_arrive(data_, key);
      } catch (const RemoteError& e) {
        return {error_reply(e.what()), nullptr};
      }
      // Wakes the others first: the barrier parked below is below its count,
      // so this would not answer it anyway, and parking last keeps the rule
      // that execute() never answers the request it parks.
      notify(key);
      if (r.op == Op::kBarrier && !semantics::barrier_open(out.reply.number, r.count))
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
  }
  return out;
}

StoreState::WaiterPtr StoreState::park(const proto::Request& req, int64_t arrival, const Clock::time_point* now) {
  auto w = std::make_shared<Waiter>(req);
  w->arrival = arrival;
  if (req.op == Op::kBarrier) {
    auto& b = barriers_[req.keys[0]];
    b.ws.push_back(w);
    b.min_count = std::min(b.min_count, req.count);
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
  if (w->req.op == Op::kBarrier) {
    auto it = barriers_.find(w->req.keys[0]);
    if (it == barriers_.end()) return;
    auto& v = it->second.ws;
    v.erase(std::remove(v.begin(), v.end(), w), v.end());  // min_count may stay low: one extra scan
    if (v.empty()) barriers_.erase(it);
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
  if (timed_out) {
    r.status = proto::Status::kTimeout;
    r.keys = w->req.op == Op::kBarrier ? w->req.keys : semantics::missing(data_, w->req.keys);
  } else if (w->req.op == Op::kGet) {
    if (const Bytes* v = data_.find(w->req.keys[0])) r.value = *v;
  } else if (w->req.op == Op::kBarrier) {
    r.number = w->arrival;
  }
  answer_(w, r);
}

}  // namespace dl::rdzv
