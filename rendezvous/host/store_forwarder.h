#pragma once
// The back end of a host's store door (store_door.h): forwards its local
// clients' requests to the job's store server over one store/2 link
// (store_upstream.h), combining what it can, so the server sees one
// connection per host and one request per host for each collective step
// (docs/rendezvous.md, "Per-host aggregation"):
//
// - barriers: arrivals at one key and count go up as one weighted arrival;
//   each local caller gets a distinct arrival number, as if they had come
//   one after another;
// - all-gathers: contributions to one prefix and count go up as one
//   request carrying every local rank's value; each caller gets the list;
// - adds to one key made while an add of that key is on its way up go up
//   next as one add of their sum, and each caller gets the running total
//   its own add would have made;
// - gets of one key: one upstream get answers every local waiter whose
//   deadline is not earlier than its own;
// - everything else goes up as it came.
//
// When to send a barrier or all-gather up: at once when the arrivals
// reach its count, or, when the count is the job's world size, once every
// one of this host's ranks has arrived; otherwise `window` after the first
// arrival (a sub-group's count: the forwarder cannot know how many of its
// ranks belong). A batch that waits for ranks that never come goes up at its
// first caller's deadline and times out there, so the server's timeout reply
// names the key and, for an all-gather, the missing ranks.
//
// Threading: the io_context's one thread, as the door's.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "rendezvous/host/store_door.h"
#include "rendezvous/host/store_upstream.h"

namespace dl::rdzv {

struct ForwarderOptions {
  int64_t world_size = 0;   // the job's ranks; 0 when unknown
  int64_t local_ranks = 0;  // this host's ranks the door serves; 0 when unknown
  std::chrono::microseconds window{1000};  // how long a sub-group's batch gathers
};

class StoreForwarder final : public StoreBackend {
 public:
  StoreForwarder(boost::asio::io_context& io, StoreUpstream& upstream, ForwarderOptions opt);
  ~StoreForwarder() override;
  void execute(const proto::Request& r, Done done, std::weak_ptr<void> client) override;
  // Local callers waiting on upstream gets, all keys together.
  size_t waiting_gets() const;

  struct Batch;
  struct Caller {
    proto::Request req;
    Done done;
    std::chrono::steady_clock::time_point deadline;
    std::weak_ptr<void> client;  // expired: the client left
  };

 private:
  // fn, run only while this forwarder exists.
  template <class F>
  auto guarded(F fn) {
    return [alive = std::weak_ptr<bool>(alive_), fn = std::move(fn)](const proto::Reply& r) mutable {
      if (alive.lock()) fn(r);
    };
  }
  void add(const proto::Request& r, Done done);
  void send_adds(const std::string& key);
  void get(const proto::Request& r, Done done);
  void send_get(const std::string& key);
  void got(const std::string& key, const proto::Reply& rep);
  void collective(const proto::Request& r, Done done, std::weak_ptr<void> client);
  static void forget_gone(Batch& b);
  void send_batch(const std::string& id);
  bool batch_full(const Batch& b) const;

  boost::asio::io_context& io_;
  StoreUpstream& up_;
  ForwarderOptions opt_;
  // Adds queued behind the one in flight, by key (empty queue: one in flight).
  std::unordered_map<std::string, std::vector<Caller>> adds_;
  // Gets by key: those the get in flight answers, and those that wait for the next.
  struct Gets {
    std::chrono::steady_clock::time_point deadline;  // of the get in flight
    std::vector<Caller> riding;                      // whom it answers
  };
  std::unordered_map<std::string, Gets> gets_;
  std::map<std::string, std::shared_ptr<Batch>> batches_;  // barriers and all-gathers gathering
  // Upstream replies may come after this forwarder is gone: they check it.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dl::rdzv
