#pragma once
// The TCP store server's state, without its sockets: the key/value data, the
// requests parked until their keys exist (get, wait) or their barrier opens,
// and their deadlines. tcp_store_server.cc keeps only the I/O (accept,
// handshake, framing, per-connection buffers) and the one timer that calls
// expire(); this is the part unit tests drive directly.
//
// The semantics are store_semantics.h's. Parked requests cost O(1) each to
// park and to answer: waiters are indexed by the keys they miss, barriers by
// key with the smallest count among them, so an arrival below that count
// wakes no one and costs no scan (W arrivals cost O(W)), and deadlines sit in
// one ordered map (one timer for all of them).
//
// Single-threaded: the server calls it from its one io_context thread.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "rendezvous/store_protocol.h"
#include "rendezvous/store_semantics.h"

namespace dl::rdzv {

class StoreState {
 public:
  using Clock = std::chrono::steady_clock;
  struct Waiter;
  using WaiterPtr = std::shared_ptr<Waiter>;
  using Deadlines = std::multimap<Clock::time_point, WaiterPtr>;

  // A request parked until its keys exist, its barrier opens or its
  // deadline passes.
  struct Waiter {
    proto::Request req;
    // Whom the answer is for (the server's session); the state never looks
    // at it.
    std::weak_ptr<void> owner;
    // Which store/2 request it is (its reply carries the id); the state
    // never looks at it either.
    uint32_t id = 0;
    bool tagged = false;           // a store/2 request: replied with its id
    int64_t arrival = 0;           // barriers: the value this caller's add made
    Deadlines::iterator deadline;  // this waiter's entry in deadlines_
    bool done = false;             // answered or cancelled
    explicit Waiter(proto::Request r) : req(std::move(r)) {}
  };

  // Called with a parked request and its reply (kOk, or kTimeout with the
  // keys still missing) when it is answered; the waiter is no longer parked
  // by then. It must not call execute() (answer later, e.g. posted).
  using Answer = std::function<void(const WaiterPtr& w, const proto::Reply& reply)>;

  explicit StoreState(Answer answer) : answer_(std::move(answer)) {}
  StoreState(const StoreState&) = delete;
  StoreState& operator=(const StoreState&) = delete;

  struct Result {
    proto::Reply reply;  // the answer, unless parked
    WaiterPtr parked;    // set when the request parked: answered later through Answer
  };
  // Executes a decoded request: answers it, or parks it (get or wait of a
  // missing key, a barrier below its count) with its deadline `timeout_ms`
  // after now (Clock::now() unless given). The request parked here is never
  // answered inside this call, so the caller may still fill in its owner.
  // Requests it answers may wake others (through Answer) before it returns.
  // Errors (add on a non-integer value, a barrier count below 1) are kError
  // replies, never exceptions.
  Result execute(const proto::Request& r);
  Result execute(const proto::Request& r, Clock::time_point now);

  // Forgets a parked request without answering it (its client left).
  void cancel(const WaiterPtr& w);
  // Answers every parked request whose deadline is at or before now with
  // kTimeout.
  void expire(Clock::time_point now);
  // The earliest deadline of a parked request; Clock::time_point::max() when
  // nothing is parked.
  Clock::time_point next_deadline() const {
    return deadlines_.empty() ? Clock::time_point::max() : deadlines_.begin()->first;
  }
  // How many requests are parked.
  size_t parked() const { return deadlines_.size(); }
  const KeyValue& data() const { return data_; }
  // Removes every key that does not start with `keep` (a job's restart,
  // launcher/attempts.h), and the all-gathers in progress outside it (their
  // callers get an error reply); other parked requests stay parked. Returns
  // how many keys.
  size_t erase_all_but(const std::string& keep);

 private:
  Result run(const proto::Request& r, const Clock::time_point* now);
  WaiterPtr park(const proto::Request& req, int64_t arrival, const Clock::time_point* now);
  void unpark(const WaiterPtr& w);
  void notify(const std::string& key);
  void wake_barriers(const std::string& key);
  void finish(const WaiterPtr& w, bool timed_out);
  // An all-gather in progress: the values so far by rank, and who waits.
  struct Gather {
    int64_t count = 0;
    size_t list_bytes = 0;  // proto::values_list_size of the values so far
    std::unordered_map<int64_t, Bytes> values;
    std::vector<WaiterPtr> ws;
  };
  Result all_gather(const proto::Request& r, const Clock::time_point* now);
  struct Part {
    int64_t rank;
    std::string_view value;
  };
  static std::string contribute(Gather& g, const proto::Request& r);
  Result complete(const std::string& prefix);
  proto::Reply gather_timeout(const proto::Request& req) const;

  Answer answer_;
  KeyValueMap data_;
  std::unordered_map<std::string, std::vector<WaiterPtr>> waiters_;  // get/wait, by missing key
  // Parked barriers by key, with the smallest count among them.
  struct Barriers {
    int64_t min_count = INT64_MAX;
    std::vector<WaiterPtr> ws;
  };
  std::unordered_map<std::string, Barriers> barriers_;
  std::unordered_map<std::string, Gather> gathers_;  // by prefix
  Deadlines deadlines_;
};

}  // namespace dl::rdzv
