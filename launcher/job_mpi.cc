// The Job's port for its MPI router (launcher/mpi/mpi_router.h): what the
// router may ask of the job and do to it, and nothing else.
#include "launcher/job.h"

#include <algorithm>

#include "hostfiles/placement.h"
#include "launcher/output/output_sink.h"

namespace dl::launcher {

class JobMpiPort : public MpiRouter::JobPort {
 public:
  explicit JobMpiPort(Job& job) : job_(job) {}

  bool connected(int node) const override { return node_at(node).state == Job::NodeState::kUp; }
  void send(int node, const control::MpiDown& m) override { job_.server_->send(node, m); }
  int node_of(int rank) const override {
    for (const auto& n : job_.nodes_)
      if (std::find(n.ranks.begin(), n.ranks.end(), rank) != n.ranks.end()) return n.index;
    return -1;
  }
  std::string host(int node) const override { return node_at(node).host; }
  bool serves_mpi() const override { return job_.mpi_; }
  bool launched() const override { return job_.phase_.is(Phase::kLaunched); }
  SpawnRoom room(int node) const override {
    const auto& entry = node_at(node).entry;
    SpawnRoom room;
    room.slots = entry.slots;
    room.max_slots = entry.max_slots;
    room.oversubscribe = job_.opts_.oversubscribe;
    room.cpu_slots = entry.origin == hostfiles::kLocalCpusOrigin;
    for (int rank : node_at(node).ranks) room.in_use += job_.fate_.done(rank) ? 0 : 1;
    return room;
  }
  void add_rank(int node, int rank, const std::string& tag) override {
    job_.nodes_.at(static_cast<size_t>(node)).ranks.push_back(rank);
    job_.sink_->add_rank(rank, host(node), tag);
  }
  Fate& fate() override { return job_.fate_; }
  void teardown() override { job_.teardown(job_.grace_ms()); }
  void log(const std::string& line) override { job_.log(line); }
  void say(const std::string& line) override { write_fully(2, line); }

 private:
  const Job::Node& node_at(int node) const { return job_.nodes_.at(static_cast<size_t>(node)); }
  Job& job_;
};

std::unique_ptr<MpiRouter> Job::make_mpi_router() {
  return std::make_unique<MpiRouter>(io_, mpi_nspace(job_id_, attempts_.restarts()),
                                     static_cast<int>(plan_.ranks.size()), secs(opts_.fence_timeout_s),
                                     std::make_unique<JobMpiPort>(*this));
}

// Each attempt's MPI bookkeeping is its own: the fences by node rank, over
// the hosts that hold each seat now (a spare that took one, the hosts that
// remain after a shrink), and from a restart on a router for the attempt's
// namespace, whose spawns, names and connects start empty. What the last
// attempt's relays still held is dropped (its ranks are gone; the agents
// sent nothing of it after their `ready`: mpi/mpi_side.h).
void Job::start_mpi_attempt() {
  if (attempts_.restarts() > 0) mpi_router_ = make_mpi_router();
  fences_.reset();
  if (!mpi_) return;
  std::vector<std::string> hosts;
  std::vector<std::vector<int>> ranks;
  for (int seat : seats_) {
    const Node& n = nodes_.at(static_cast<size_t>(seat));
    hosts.push_back(n.host), ranks.push_back(n.ranks);
  }
  fences_ = std::make_unique<FenceRelay>(
      io_, std::move(hosts), std::move(ranks), secs(opts_.fence_timeout_s),
      FenceRelay::Hooks{[this](uint64_t id, const std::string& all) {
                          log(control::fence_name(id) + " complete (" + std::to_string(all.size()) + " bytes)");
                          server_->broadcast_frame(control::fence_frame(id, all));
                        },
                        [this](uint64_t id, const std::string& missing) {
                          server_->broadcast(control::msg::FenceFailed{id, missing});
                          if (fate_.on_fence_timeout(id, opts_.fence_timeout_s, missing)) teardown(grace_ms());
                        }});
}

// A failed attempt's MPI_Comm_spawn children were ranks of the job only for
// it: the next attempt's hosts hold the job's own ranks (world_size of them).
void Job::end_mpi_attempt() {
  const int world = static_cast<int>(plan_.ranks.size());
  for (auto& n : nodes_)
    n.ranks.erase(std::remove_if(n.ranks.begin(), n.ranks.end(), [world](int r) { return r >= world; }),
                  n.ranks.end());
}

}  // namespace dl::launcher
