#include "rendezvous/host/store_forwarder.h"

#include <algorithm>
#include <limits>

namespace dl::rdzv {

using Clock = std::chrono::steady_clock;
using proto::Op;
using proto::Reply;
using proto::Request;
using proto::Status;

namespace {
Clock::time_point deadline_of(const Request& r) {
  return Clock::now() + std::chrono::milliseconds(std::clamp<int64_t>(r.number, 0, int64_t{1} << 40));
}

// The timeout, in ms, of an upstream request that must end by `deadline`.
int64_t ms_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return std::max<int64_t>(left, 0);
}
}  // namespace

// A barrier or all-gather gathering this host's callers of one key and count.
struct StoreForwarder::Batch {
  Op op;
  std::string key;
  int64_t count = 0;
  std::vector<Caller> callers;
  std::map<int64_t, std::string> values;  // all-gathers: by rank, the last caller's value
  Clock::time_point latest;               // the latest deadline among the callers
  boost::asio::steady_timer timer;
  explicit Batch(boost::asio::io_context& io) : timer(io) {}
  size_t arrivals() const { return op == Op::kAllGather ? values.size() : callers.size(); }
};

StoreForwarder::StoreForwarder(boost::asio::io_context& io, StoreUpstream& upstream, ForwarderOptions opt)
    : io_(io), up_(upstream), opt_(opt) {}

StoreForwarder::~StoreForwarder() {
  for (auto& [id, b] : batches_) b->timer.cancel();
}

void StoreForwarder::execute(const Request& r, Done done, std::weak_ptr<void> client) {
  switch (r.op) {
    case Op::kAdd: return add(r, std::move(done));
    case Op::kGet: return get(r, std::move(done));
    case Op::kBarrier:
    case Op::kAllGather: return collective(r, std::move(done), std::move(client));
    default: return up_.call(r, std::move(done));
  }
}

// An add goes up at once unless one of its key is on its way; then it waits
// for that one's reply and goes up with the others that waited, as their sum.
void StoreForwarder::add(const Request& r, Done done) {
  const std::string& key = r.keys[0];
  auto [it, fresh] = adds_.try_emplace(key);
  if (!fresh) return it->second.push_back({r, std::move(done), {}, {}});
  up_.call(r, guarded([this, key, done = std::move(done)](const Reply& rep) {
    done(rep);
    send_adds(key);
  }));
}

void StoreForwarder::send_adds(const std::string& key) {
  auto it = adds_.find(key);
  if (it->second.empty()) return void(adds_.erase(it));
  std::vector<Caller> queued = std::move(it->second);
  it->second.clear();
  int64_t sum = 0;
  bool overflow = false;
  for (const auto& c : queued) overflow |= __builtin_add_overflow(sum, c.req.number, &sum);
  if (overflow) {
    for (auto& c : queued) c.done({Status::kError, "add: this host's adds to store key '" + key.substr(0, 200) + "' overflow int64 together", 0, {}, nullptr});
    return send_adds(key);
  }
  up_.call({Op::kAdd, {key}, {}, {}, sum}, guarded([this, key, sum, queued = std::move(queued)](const Reply& rep) {
    // The running total each add would have made, had they come one by one.
    int64_t running = rep.number - sum;
    for (const auto& c : queued) {
      Reply mine = rep;
      if (rep.status == Status::kOk) mine.number = running += c.req.number;
      c.done(mine);
    }
    send_adds(key);
  }));
}

// A get rides the one in flight for its key when it may wait at least as
// long; one that may not goes up on its own.
void StoreForwarder::get(const Request& r, Done done) {
  const std::string& key = r.keys[0];
  Caller c{r, std::move(done), deadline_of(r), {}};
  auto& g = gets_[key];
  if (!g.riding.empty() && c.deadline < g.deadline) return up_.call(r, std::move(c.done));
  g.riding.push_back(std::move(c));
  if (g.riding.size() == 1) send_get(key);
}

void StoreForwarder::send_get(const std::string& key) {
  auto& g = gets_[key];
  g.deadline = g.riding.front().deadline;
  for (const auto& c : g.riding) g.deadline = std::min(g.deadline, c.deadline);
  up_.call({Op::kGet, {key}, {}, {}, ms_until(g.deadline)}, guarded([this, key](const Reply& rep) { got(key, rep); }));
}

// The upstream get's answer: to every rider, but a timeout only to those
// whose own deadline has come; the rest wait on with a get of their own.
void StoreForwarder::got(const std::string& key, const Reply& rep) {
  auto it = gets_.find(key);
  std::vector<Caller> riding = std::move(it->second.riding), answered, later;
  const auto now = Clock::now();
  for (auto& c : riding) (rep.status == Status::kTimeout && c.deadline > now ? later : answered).push_back(std::move(c));
  if (later.empty()) gets_.erase(it);
  else it->second.riding = std::move(later), send_get(key);
  // Last: an answered caller may come back at once with another get.
  for (const auto& c : answered) c.done(rep);
}

size_t StoreForwarder::waiting_gets() const {
  size_t n = 0;
  for (const auto& [key, g] : gets_) n += g.riding.size();
  return n;
}

bool StoreForwarder::batch_full(const Batch& b) const {
  const auto n = static_cast<int64_t>(b.arrivals());
  return n >= b.count || (b.count == opt_.world_size && opt_.local_ranks > 0 && n >= opt_.local_ranks);
}

// Drops the callers whose clients have left, and their values.
void StoreForwarder::forget_gone(Batch& b) {
  auto gone = [](const Caller& c) { return c.client.expired(); };
  if (std::none_of(b.callers.begin(), b.callers.end(), gone)) return;
  std::erase_if(b.callers, gone);
  if (b.op != Op::kAllGather) return;
  std::map<int64_t, std::string> kept;
  for (const auto& c : b.callers)
    if (!kept.count(c.req.rank)) kept[c.req.rank] = std::move(b.values[c.req.rank]);
  b.values = std::move(kept);
}

void StoreForwarder::collective(const Request& r, Done done, std::weak_ptr<void> client) {
  const std::string id = std::to_string(static_cast<int>(r.op)) + "/" + std::to_string(r.count) + "/" + r.keys[0];
  auto& slot = batches_[id];
  if (!slot) {
    slot = std::make_shared<Batch>(io_);
    slot->op = r.op, slot->key = r.keys[0], slot->count = r.count;
    // The whole job's count: all of this host's ranks come, so wait for
    // them (until the first caller's deadline); a sub-group's: a window.
    const bool whole_job = r.count == opt_.world_size && opt_.local_ranks > 0;
    if (whole_job) slot->timer.expires_at(deadline_of(r));
    else slot->timer.expires_after(opt_.window);
    slot->timer.async_wait([this, id, alive = std::weak_ptr<bool>(alive_)](boost::system::error_code ec) {
      if (!ec && alive.lock()) send_batch(id);
    });
  }
  Batch& b = *slot;
  forget_gone(b);
  Caller c{r, std::move(done), deadline_of(r), std::move(client)};
  b.latest = std::max(b.latest, c.deadline);
  if (r.op == Op::kAllGather) b.values.insert_or_assign(r.rank, r.value), c.req.value.clear();
  b.callers.push_back(std::move(c));
  if (batch_full(b)) send_batch(id);
}

void StoreForwarder::send_batch(const std::string& id) {
  auto node = batches_.extract(id);
  if (node.empty()) return;
  std::shared_ptr<Batch> b = std::move(node.mapped());
  b->timer.cancel();
  forget_gone(*b);
  if (b->callers.empty()) return;
  Request up{b->op == Op::kBarrier ? Op::kBarrierWeighted : Op::kAllGatherMany, {b->key}, {}, {}, ms_until(b->latest)};
  up.count = b->count;
  up.weight = static_cast<int64_t>(b->callers.size());
  for (auto& [rank, value] : b->values) up.parts.push_back({rank, std::move(value)});
  b->values.clear();
  up_.call(up, guarded([b, weight = up.weight](const Reply& rep) {
    // An all-gather's list: one copy for all the callers.
    Reply shared = rep;
    if (b->op == Op::kAllGather && rep.status == Status::kOk)
      shared.list = std::make_shared<const std::string>(std::move(shared.value)), shared.value.clear();
    // Barrier callers get distinct arrivals: the last is the weighted add's.
    int64_t arrival = rep.number - weight;
    for (const auto& c : b->callers) {
      Reply mine = shared;
      if (b->op == Op::kBarrier && rep.status == Status::kOk) mine.number = ++arrival;
      c.done(mine);
    }
  }));
}

}  // namespace dl::rdzv
