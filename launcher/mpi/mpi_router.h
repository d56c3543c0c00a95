#pragma once
// The launcher's MPI side: every MPI message an agent sends (control::MpiUp)
// is answered here, by messages to the agents that need them. MPI_Abort and
// a refused MPI_Init decide the job's fate; MPI_Comm_spawn places the
// children (launcher/mpi/spawn_answer.h) and makes them ranks of the job;
// publish/lookup go to the name service (launcher/mpi/name_service.h); connects
// across hosts to the connect relay (launcher/mpi/connect_relay.h); a spawned
// rank's data is fetched from its host for another (direct modex).
// docs/mpi.md says what the user sees.
//
// The Job reaches it with one call (receive) and it reaches the Job only
// through JobPort, so it is tested with a fake port, without sockets.
//
// Threading: the launcher's io_context thread only.
#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "control/messages.h"
#include "launcher/mpi/connect_relay.h"
#include "launcher/mpi/name_service.h"
#include "launcher/mpi/spawn_answer.h"

namespace dl::launcher {

class Fate;

class MpiRouter {
 public:
  // What the router needs of the job.
  class JobPort {
   public:
    virtual ~JobPort() = default;
    // Node `node`'s agent is connected (and started here, not by another
    // node's dlaunch): send() reaches it.
    virtual bool connected(int node) const = 0;
    virtual void send(int node, const control::MpiDown& m) = 0;
    // The node whose agent runs dlaunch rank `rank` (spawned ranks
    // included), or -1.
    virtual int node_of(int rank) const = 0;
    virtual std::string host(int node) const = 0;
    // The job serves MPI (--mpi, decided at the launch).
    virtual bool serves_mpi() const = 0;
    // Spawns are placed only while the job runs (not while it ends).
    virtual bool launched() const = 0;
    // What node `node` has for a spawn's children.
    virtual SpawnRoom room(int node) const = 0;
    // A spawned child is a rank of the job on `node` from now on: its
    // output is tagged `tag`, its exit counted.
    virtual void add_rank(int node, int rank, const std::string& tag) = 0;
    // The verdict's keeper, and the teardown it may call for.
    virtual Fate& fate() = 0;
    virtual void teardown() = 0;
    // -v's log, and a line for dlaunch's stderr at once.
    virtual void log(const std::string& line) = 0;
    virtual void say(const std::string& line) = 0;
  };

  // `job_nspace`: the job's PMIx namespace; `world_size` its ranks;
  // `timeout` bounds a lookup's wait and a connect across hosts
  // (--fence-timeout).
  MpiRouter(boost::asio::io_context& io, std::string job_nspace, int world_size, std::chrono::milliseconds timeout,
            std::unique_ptr<JobPort> port);
  ~MpiRouter();

  // An MPI message from node `node`'s agent. Throws RemoteError for one it
  // may not send (a rank that is not its own, a bad process name, MPI
  // traffic outside an MPI job): the Job closes that agent's connection.
  void receive(int node, const control::MpiUp& m);
  // "rank 3", or a spawned child's name ("spawn1:0 (spawned by rank 0)").
  std::string describe(int rank) const { return spawns_.describe(rank); }

 private:
  void own(int node, int rank) const;
  void spawn_request(int node, const control::msg::SpawnRequest& r);
  void tell_peers(int node, const control::msg::SpawnLaunch& launch);
  void spawn_known(int node, const control::msg::SpawnKnown& k);
  void connect(int node, const control::msg::MpiConnect& c);
  void dmodex(int node, const control::msg::MpiDmodex& d);
  void dmodex_data(const control::msg::MpiDmodexData& d);
  void lookup(int node, const control::msg::MpiLookup& l);
  void send_if_connected(int node, const control::MpiDown& m);
  ConnectRelay::Hooks connect_hooks();

  std::unique_ptr<JobPort> port_;
  std::chrono::milliseconds timeout_;
  SpawnBook spawns_;     // MPI_Comm_spawn's children
  NameService names_;    // PMIx_Publish/PMIx_Lookup
  ConnectRelay connects_;  // PMIx_Connect across hosts
  std::map<uint64_t, std::pair<int, uint64_t>> dmodex_;  // our request id -> (asking node, its id)
  uint64_t next_dmodex_ = 0;
  // Spawns waiting for the parent's other hosts to know the namespace:
  // nspace -> (the children's node, its spawn_launch, the nodes not yet answered).
  struct PendingSpawn {
    int node = 0;
    control::msg::SpawnLaunch launch;
    std::set<int> waiting;
  };
  std::map<std::string, PendingSpawn> pending_spawns_;
};

}  // namespace dl::launcher
