#pragma once
// The keys of dlaunch's c10d store (rendezvous/c10d/c10d_store.h) and what each
// of torch's queries does to them, with the c10d semantics every dlaunch
// store shares (rendezvous/store_semantics.h: ADD on decimal integers,
// COMPARE_SET's rule), WAIT parked until every key exists and CANCEL_WAIT
// ending a parked WAIT. Pure: no sockets; clients are numbers.
//
// Thread-safety: none; one keyspace belongs to its server's thread.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rendezvous/c10d/c10d_protocol.h"
#include "rendezvous/store_semantics.h"

namespace dl::rdzv::c10d {

class Keyspace : private KeyValue {
 public:
  using Client = uint64_t;
  struct Limits {
    size_t max_keys = 1u << 20;
    size_t max_bytes = 256u << 20;   // keys and values
    size_t max_reply = 64u << 20;    // one query's reply (a MULTI_GET naming a large value many times)
    size_t max_waiting = 64u << 20;  // the keys of every parked WAIT, all clients together
  };
  Keyspace() = default;
  explicit Keyspace(Limits l) : limits_(l) {}

  // Handles `q` from `client` and appends its reply (if its type has one)
  // to `reply`. Returns "" or why the query is refused (the keyspace would
  // pass its limits, an ADD to a value that is no integer or overflows);
  // what it would have written is not (a MULTI_SET keeps the keys before
  // the refused one). A reply over max_reply, or a WAIT whose keys would
  // take the parked keys over max_waiting, is refused before any of it is
  // built.
  std::string handle(Client client, const Query& q, std::string& reply);
  // Clients whose parked WAIT the queries handled since the last call
  // completed; each must be sent kStopWaiting.
  std::vector<Client> take_woken();
  // `client` closed: its parked WAIT is dropped.
  void forget(Client client);
  // Every key goes; parked WAITs stay parked.
  void clear();
  size_t keys() const { return data_.size(); }
  // Whether `client` is one of the job's ranks by what it did: it counted
  // itself into torch's "init/" key (every rank's TCPStore client does) or
  // published a rank's address (gloo's ".../rank_N").
  bool is_rank(Client client) const { return ranked_.count(client) > 0; }

  // What torch's rendezvous left in the keys (C10dStore::Seen).
  std::set<int> ranks;       // N of every key set that ends in "/rank_N" (gloo's rank N, its host name)
  int64_t registered = 0;    // the value of torch's "init/" key (TCPStore clients counted in)
  int64_t barrier = 0;       // the highest value of a "store_based_barrier_key" key
  std::set<int> at_barrier;  // ranks whose client added to it (a client is rank N once it set ".../rank_N")

 private:
  void answer(Client client, const Query& q, std::string& reply);
  const std::string& value(const std::string& key) const;
  // KeyValue, for store_semantics; put() throws RemoteError over the limits.
  const Bytes* find(const std::string& key) const override;
  void put(const std::string& key, Bytes value) override;
  bool erase(const std::string& key) override;
  size_t size() const override { return data_.size(); }
  void changed(const std::string& key);
  void park(Client client, const std::vector<std::string>& keys, std::string& reply);
  void unpark(Client client);
  void note(Client client, const std::string& key, int64_t delta, int64_t count);
  void set_by(Client client, const std::string& key);
  void fits_reply(const std::string& reply, size_t more) const;

  Limits limits_;
  std::unordered_map<std::string, std::string> data_;
  size_t bytes_ = 0;
  // A parked WAIT: the keys it still misses; and who waits for each key.
  std::unordered_map<Client, std::unordered_set<std::string>> parked_;
  std::unordered_map<std::string, std::unordered_set<Client>> waiting_;
  std::vector<Client> woken_;
  std::unordered_map<Client, int> rank_of_;      // from the "/rank_N" key a client set
  std::unordered_set<Client> barrier_unknown_;   // added to the barrier before naming its rank
  std::unordered_set<Client> ranked_;            // is_rank()
  size_t waiting_bytes_ = 0;                     // the keys of parked_, summed
};

}  // namespace dl::rdzv::c10d
