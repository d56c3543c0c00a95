#include "doctor/peer_fan.h"

#include <poll.h>

#include <chrono>
#include <climits>
#include <functional>
#include <semaphore>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "doctor/analysis.h"
#include "doctor/peer_start.h"
#include "errors/error.h"

namespace dl::doctor {

namespace {
using Clock = std::chrono::steady_clock;

// Runs fn(i) for i in [0, n), each on a thread of its own.
void in_parallel(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> t;
  for (size_t i = 0; i < n; ++i) t.emplace_back(fn, i);
  for (auto& x : t) x.join();
}

// The levels of a subtree in launch tree order (1 for leaves only).
int levels(const std::vector<TreeNode>& sub, size_t from, size_t to) {
  int deepest = 0;
  for (size_t i = from; i < to; i += 1 + static_cast<size_t>(sub[i].below))
    deepest = std::max(deepest, 1 + levels(sub, i + 1, i + 1 + static_cast<size_t>(sub[i].below)));
  return deepest;
}

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Three exchanges with `p`; the one with the shortest round trip gives the offset.
ClockNote read_clock(PeerLink& p, int node) {
  ClockNote best{node, 0, 1e18, ""};
  for (int i = 0; i < 3; ++i) {
    const long long t0 = now_ns();
    const auto reply = p.call<ClockReply>(ClockRequest{}, Millis(10000));
    const long long t1 = now_ns();
    const double rtt = (t1 - t0) / 1e3;
    if (rtt < best.rtt_us) best.rtt_us = rtt, best.offset_ns = clock_offset_ns(t0, t1, reply.time_ns);
  }
  return best;
}
}  // namespace

PeerFan::~PeerFan() {
  in_parallel(children_.size(), [this](size_t i) { children_[i].link.reset(); });
}

std::vector<NodeError> PeerFan::start(std::vector<TreeNode> below, const StartHow& how, bool sim) {
  std::vector<NodeError> failed;
  while (!below.empty()) {
    std::vector<TreeNode> tops;
    std::vector<std::vector<TreeNode>> subs;
    for (size_t i = 0; i < below.size(); i += 1 + static_cast<size_t>(below[i].below)) {
      if (below[i].below < 0 || i + 1 + static_cast<size_t>(below[i].below) > below.size())
        throw RemoteError("the doctor's tree: node " + std::to_string(below[i].node) + " has " +
                          std::to_string(below[i].below) + " nodes beneath it, past the end of the list");
      tops.push_back(below[i]);
      subs.emplace_back(below.begin() + static_cast<long>(i) + 1, below.begin() + static_cast<long>(i) + 1 + below[i].below);
    }
    auto started = start_peers(tops, how, token_);
    std::vector<std::string> errors(tops.size());
    std::vector<bool> reached(tops.size(), false);
    std::vector<TreeReply> replies(tops.size());
    in_parallel(tops.size(), [&](size_t i) {
      if (!started[i].link) return void(errors[i] = started[i].error);
      const Millis wait((how.ssh_timeout_ms + 15000) * (2 * levels(subs[i], 0, subs[i].size()) + 1));
      try {
        replies[i] = started[i].link->call<TreeReply>(TreeRequest{tops[i], sim, how, subs[i]}, wait);
      } catch (const std::exception& e) {
        errors[i] = e.what();
        reached[i] = true;
        started[i].link.reset();
      }
    });
    std::vector<TreeNode> orphans;
    for (size_t i = 0; i < tops.size(); ++i) {
      if (!errors[i].empty()) {
        failed.push_back({tops[i].node, errors[i] + (from_.empty() ? "" : " (started from " + from_ + ", its parent in the doctor's launch tree)"),
                          reached[i]});
        orphans.insert(orphans.end(), subs[i].begin(), subs[i].end());
        continue;
      }
      std::set<int> lost;
      for (const auto& f : replies[i].failed) lost.insert(f.node), failed.push_back(f);
      Child c{tops[i], std::move(started[i].link), {tops[i].node}, ""};
      names_[tops[i].node] = tops[i].name;
      for (const auto& n : subs[i])
        if (!lost.count(n.node)) c.nodes.push_back(n.node), names_[n.node] = n.name;
      for (int n : c.nodes) via_[n] = children_.size();
      children_.push_back(std::move(c));
    }
    below = std::move(orphans);
  }
  return failed;
}

std::vector<RouteAnswer> merge_answers(std::vector<RouteAnswer> answers) {
  // Grouped by views of the answers' own text, then moved: a thousand
  // hosts' link replies are a thousand distinct lines, none copied.
  struct Key {
    std::string_view line, error;
    bool operator==(const Key&) const = default;
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      return std::hash<std::string_view>{}(k.line) * 31 + std::hash<std::string_view>{}(k.error);
    }
  };
  std::unordered_map<Key, size_t, Hash> at;
  at.reserve(answers.size());
  std::vector<size_t> group(answers.size());
  for (size_t i = 0; i < answers.size(); ++i)
    group[i] = at.emplace(Key{answers[i].line, answers[i].error}, at.size()).first->second;
  at.clear();  // (its views are of the strings moved below)
  std::vector<RouteAnswer> out;
  out.reserve(answers.size());
  for (size_t i = 0; i < answers.size(); ++i) {
    if (group[i] == out.size()) {
      out.push_back(std::move(answers[i]));
      continue;
    }
    auto& nodes = out[group[i]].nodes;
    nodes.insert(nodes.end(), answers[i].nodes.begin(), answers[i].nodes.end());
  }
  return out;
}

std::vector<RouteAnswer> PeerFan::route(RouteRequest r) {
  std::vector<RouteRequest> share(children_.size());
  std::vector<bool> busy(children_.size(), false);
  std::vector<RouteAnswer> answers;
  auto place = [&](int node) -> RouteRequest* {
    auto it = via_.find(node);
    if (it == via_.end()) {
      answers.push_back({{node}, "", "node " + std::to_string(node) + " has no doctor's peer (it was not started)"});
      return nullptr;
    }
    busy[it->second] = true;
    return &share[it->second];
  };
  for (auto& c : r.calls)
    if (auto* s = place(c.node)) s->calls.push_back(std::move(c));
  for (int n : r.nodes)
    if (auto* s = place(n)) s->nodes.push_back(n);
  std::vector<std::vector<RouteAnswer>> got(children_.size());
  std::vector<size_t> work;
  bool pollable = true;
  for (size_t i = 0; i < children_.size(); ++i)
    if (busy[i]) {
      work.push_back(i);
      Child& c = children_[i];
      share[i].every = r.every, share[i].timeout_ms = std::max(1000L, r.timeout_ms - kHopMs);
      pollable = pollable && (!c.lost.empty() || c.link->pollable());
    }
  // r.at_once shared among the busy children; `pace` is by index into `work`.
  std::vector<size_t> counts;
  for (size_t i : work) counts.push_back(share[i].calls.size() + share[i].nodes.size());
  Pacing pace = pace_shares(counts, r.at_once, r.timeout_ms);
  for (size_t k = 0; k < work.size(); ++k) share[work[k]].at_once = pace.at_once[k];
  for (size_t& o : pace.order) o = work[o];
  std::vector<long> wait_ms(children_.size(), r.timeout_ms);
  for (size_t k = 0; k < work.size(); ++k) wait_ms[work[k]] = pace.wait_ms[k];
  pace.wait_ms = std::move(wait_ms);
  // A child whose link failed is lost, and so is every node beneath it,
  // each said as its own line ("HOST: ..."), so that the hosts beneath one
  // lost peer are one problem.
  auto lose = [&](size_t i, const std::string& why) {
    Child& c = children_[i];
    if (c.lost.empty()) c.lost = why;
    std::vector<int> asked = share[i].nodes;
    for (const auto& call : share[i].calls) asked.push_back(call.node);
    got[i].clear();
    for (int n : asked)
      got[i].push_back({{n}, "", n == c.node.node ? c.lost : names_[n] + ": not reached: the doctor's peer on " + c.node.name +
                                                             ", which relays for it, was lost (" + c.lost + ")"});
  };
  if (pollable) {
    route_polled(pace, share, got, lose);
  } else {
    // A helper per child, at most pace.slots of them calling at once.
    std::counting_semaphore<> slots(static_cast<std::ptrdiff_t>(pace.slots));
    pool_.run(pace.order.size(), [&](size_t w) {
      const size_t i = pace.order[w];
      Child& c = children_[i];
      slots.acquire();
      try {
        if (!c.lost.empty()) throw RemoteError(c.lost);
        got[i] = c.link->call<RouteReply>(share[i], Millis(pace.wait_ms[i])).answers;
      } catch (const std::exception& e) {
        lose(i, e.what());
      }
      slots.release();
    });
  }
  for (size_t i : work)
    answer_unanswered(share[i], got[i], [&](int n) {
      return names_.at(n) + ": no answer came for it from the doctor's peer on " + children_[i].node.name +
             ", which relays for it (is dlaunch there the same version?)";
    });
  for (auto& g : got) answers.insert(answers.end(), std::make_move_iterator(g.begin()), std::make_move_iterator(g.end()));
  return merge_answers(std::move(answers));
}

void answer_unanswered(const RouteRequest& asked, std::vector<RouteAnswer>& got, const std::function<std::string(int)>& why) {
  // Counted first: a whole reply, the usual case, costs no set.
  size_t answered = 0;
  for (const auto& a : got) answered += a.nodes.size();
  if (answered >= asked.calls.size() + asked.nodes.size()) return;
  std::set<int> have;
  for (const auto& a : got) have.insert(a.nodes.begin(), a.nodes.end());
  auto missing = [&](int n) {
    if (have.insert(n).second) got.push_back({{n}, "", why(n)});
  };
  for (const auto& c : asked.calls) missing(c.node);
  for (int n : asked.nodes) missing(n);
}

Pacing pace_shares(const std::vector<size_t>& counts, long at_once, long timeout_ms) {
  // Each child's share of at_once, as the number of its requests says (at
  // least one each, while there are no more children than that); past
  // that, one each and at most at_once children at once, the next sent as
  // soon as one answers, the biggest first. A child is waited for a
  // timeout per turn of its requests.
  const size_t n = counts.size();
  Pacing p;
  p.order.resize(n);
  for (size_t i = 0; i < n; ++i) p.order[i] = i;
  p.slots = n;
  p.at_once.assign(n, 0);
  p.wait_ms.assign(n, timeout_ms);
  size_t total = 0;
  for (size_t c : counts) total += c;
  const size_t budget = at_once > 0 ? static_cast<size_t>(at_once) : total;
  if (total <= budget) return p;  // every request at once: nothing to pace
  std::vector<size_t> give(n, 1);
  if (n <= budget) {
    size_t given = 0;
    for (size_t i = 0; i < n; ++i) given += give[i] = std::max<size_t>(1, budget * counts[i] / total);
    // The ones a child with few requests was given past its share, taken
    // back from the child with the fewest requests a turn ({100, 1, 1, 1}
    // at 4: 3 + 1 + 1 + 1, then 1 + 1 + 1 + 1).
    while (given > budget) {
      size_t least = n;
      for (size_t i = 0; i < n; ++i)
        if (give[i] > 1 && (least == n || counts[i] * give[least] < counts[least] * give[i])) least = i;
      --give[least], --given;  // (n <= budget: some child has 2 or more while given > budget)
    }
    // What rounding left, one at a time to the child with the most requests a turn.
    while (given < budget) {
      size_t most = 0;
      for (size_t i = 1; i < n; ++i)
        if (counts[i] * give[most] > counts[most] * give[i]) most = i;
      if (give[most] >= counts[most]) break;
      ++give[most], ++given;
    }
  } else {
    p.slots = budget;
    std::stable_sort(p.order.begin(), p.order.end(), [&](size_t a, size_t b) { return counts[a] > counts[b]; });
  }
  for (size_t i = 0; i < n; ++i) {
    const size_t turns = counts[i] == 0 ? 1 : (counts[i] + give[i] - 1) / give[i];
    p.at_once[i] = give[i] >= counts[i] ? 0 : static_cast<long>(give[i]);
    p.wait_ms[i] = timeout_ms * static_cast<long>(turns);
  }
  return p;
}

void PeerFan::route_polled(const Pacing& pace, const std::vector<RouteRequest>& share,
                           std::vector<std::vector<RouteAnswer>>& got,
                           const std::function<void(size_t, const std::string&)>& lose) {
  // Every child's share sent at once (or pace.slots of them, the next as
  // one answers), then their replies waited for from this thread, one poll
  // over all of them: a thousand hosts' link tests are thousands of
  // requests, and a helper thread woken, polling and handing back per
  // child per route was most of what the doctor's CPU did then.
  struct Waiting {
    size_t child;
    Clock::time_point end;
  };
  std::vector<Waiting> waiting, still;
  size_t next = 0;
  auto send_more = [&] {
    while (next < pace.order.size() && waiting.size() < pace.slots) {
      const size_t i = pace.order[next++];
      Child& c = children_[i];
      try {
        if (!c.lost.empty()) throw RemoteError(c.lost);
        c.link->send_request(PeerLink::request_line(share[i]));
        waiting.push_back({i, Clock::now() + Millis(pace.wait_ms[i])});
      } catch (const std::exception& e) {
        lose(i, e.what());
      }
    }
  };
  send_more();
  std::vector<pollfd> fds;
  while (!waiting.empty()) {
    auto end = waiting[0].end;
    for (const auto& w : waiting) end = std::min(end, w.end);
    const auto left = std::chrono::duration_cast<Millis>(end - Clock::now());
    still.clear();
    if (left.count() <= 0) {
      const auto now = Clock::now();
      for (const auto& w : waiting) {
        if (w.end > now) {
          still.push_back(w);
          continue;
        }
        lose(w.child, children_[w.child].link->no_answer(Millis(pace.wait_ms[w.child]), "'" + std::string(RouteRequest::kOp) + "'"));
      }
      waiting.swap(still);
      send_more();
      continue;
    }
    fds.resize(waiting.size() * PeerLink::kPollFds);
    for (size_t k = 0; k < waiting.size(); ++k) children_[waiting[k].child].link->poll_fds(&fds[k * PeerLink::kPollFds]);
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::min<long>(left.count(), INT_MAX))) <= 0) continue;
    for (size_t k = 0; k < waiting.size(); ++k) {
      const size_t i = waiting[k].child;
      const pollfd* ready = &fds[k * PeerLink::kPollFds];
      bool any = false;
      for (size_t f = 0; f < PeerLink::kPollFds; ++f) any = any || ready[f].revents;
      if (!any) {
        still.push_back(waiting[k]);
        continue;
      }
      try {
        PeerLink& link = *children_[i].link;
        if (auto line = link.take_line(ready)) got[i] = link.reply_of<RouteReply>(RouteRequest::kOp, *line).answers;
        else still.push_back(waiting[k]);
      } catch (const std::exception& e) {
        lose(i, e.what());
      }
    }
    waiting.swap(still);
    send_more();
  }
}

std::vector<ClockNote> PeerFan::clocks() {
  std::vector<std::vector<ClockNote>> got(children_.size());
  pool_.run(children_.size(), [&](size_t i) {
    Child& c = children_[i];
    try {
      if (!c.lost.empty()) throw RemoteError(c.lost);
      const ClockNote own = read_clock(*c.link, c.node.node);
      got[i].push_back(own);
      for (ClockNote n : c.link->call<ClocksReply>(ClocksRequest{}, Millis(60000)).clocks) {
        n.offset_ns += own.offset_ns;
        got[i].push_back(n);
      }
    } catch (const std::exception& e) {
      for (int n : c.nodes)
        got[i].push_back({n, 0, 0, n == c.node.node ? e.what() : names_[n] + ": its clock was not read: " + e.what()});
    }
  });
  std::vector<ClockNote> out;
  for (auto& g : got) out.insert(out.end(), g.begin(), g.end());
  return out;
}

}  // namespace dl::doctor
