#pragma once
// The job's name service for PMIx_Publish / PMIx_Lookup (MPI_Publish_name,
// MPI_Lookup_name, and OpenMPI's MPI_Comm_spawn/connect/accept, whose roots
// exchange their members this way): one table in the launcher, so that a
// name published on one host is found on every other.
//
// A lookup that waits (PMIX_WAIT) is answered once all its keys are there,
// or with an error after its timeout, whose text names the missing keys.
//
// Threading: the launcher's io_context thread only.
#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "control/messages.h"

namespace dl::launcher {

class NameService {
 public:
  // Called once per lookup: the names found (every key) or an error.
  using Answer = std::function<void(std::vector<control::msg::PublishedName> names, std::string error)>;

  // `default_timeout`: for a waiting lookup that gave none.
  NameService(boost::asio::io_context& io, std::chrono::milliseconds default_timeout);
  ~NameService();

  // Publishes (a key published again gets the new value); answers waiting lookups.
  void publish(const control::msg::MpiPublish& m);
  void unpublish(const std::vector<std::string>& keys);
  // Answers at once (found, or "not published" when !wait) or later.
  void lookup(const control::msg::MpiLookup& m, Answer answer);
  // Waiting lookups (for tests).
  size_t waiting() const { return waiting_.size(); }

 private:
  struct Entry {
    control::msg::PublishedName name;
    bool first_read = false;
  };
  struct Waiter {
    std::vector<std::string> keys;
    Answer answer;
    std::unique_ptr<boost::asio::steady_timer> timer;
  };
  bool try_answer(const std::vector<std::string>& keys, const Answer& answer);
  void expire(uint64_t waiter);

  boost::asio::io_context& io_;
  std::chrono::milliseconds default_timeout_;
  std::map<std::string, Entry> names_;
  std::map<uint64_t, Waiter> waiting_;
  uint64_t next_waiter_ = 0;
};

}  // namespace dl::launcher
