#pragma once
// The agent's store door for its ranks (docs/rendezvous.md, "Per-host
// aggregation"): the ranks of this host reach the job's store through an
// AF_UNIX socket of the agent's (rendezvous/host/host_store.h), and the store
// server sees one connection from this host, whatever its number of ranks.
//
// A launch whose variables name the job's store (DLAUNCH_STORE_ADDR, with
// DLAUNCH_TOKEN) gets DLAUNCH_STORE_DOOR added, so env:// in each rank
// connects to the door; a launch that names no store is left alone. The door
// is made at the first such launch and kept for later ones (restarts) until
// the agent leaves; it lives in a 0700 directory of its own,
// $TMPDIR/dlaunch-<agent pid>-store-<start>.<pidns>.<random>: named so that,
// when this agent is killed outright, the next agent on the host removes it
// with the other directories of dead agents (errors/temp_dirs.h).
// When the door cannot be made (no temp directory), the agent says why on
// stderr once and its ranks connect to the store directly.
//
// Making the door is local and cheap; its link to the store is made only
// when a rank's request must go up (rendezvous/host/store_upstream.h), without
// holding up the agent's loop, so a host whose ranks never use the store
// (MPI programs, /bin/true) costs the store no connection. When the link
// cannot be made within kUpstreamConnectTimeout the ranks' store requests
// fail naming the store and what was waited for, and the agent says so on
// stderr; a later request, after a growing pause, tries again (a restart
// finds a store that came up meanwhile). When it breaks after it was made,
// they fail saying why, for good.
//
// Threading: the agent's io_context thread.
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "agent/rank_environment.h"

namespace dl::rdzv { class HostStore; }

namespace dl::agent {

class StoreDoorService {
 public:
  explicit StoreDoorService(boost::asio::io_context& io);
  // close().
  ~StoreDoorService();
  StoreDoorService(const StoreDoorService&) = delete;
  StoreDoorService& operator=(const StoreDoorService&) = delete;

  // See above: opens the door when `env` names the store, for `local_ranks`
  // ranks of this host, and adds DLAUNCH_STORE_DOOR to `env`.
  void open_for(EnvVars& env, size_t local_ranks);
  // Closes the door, its clients and its link, and removes its directory
  // (the agent's main ends with _exit: no destructor runs). Idempotent.
  void close();

 private:
  void open(const EnvVars& env, size_t local_ranks);

  boost::asio::io_context& io_;
  std::string dir_;
  std::unique_ptr<rdzv::HostStore> host_;
  bool failed_ = false;  // tried and said why: the ranks go direct
};

}  // namespace dl::agent
