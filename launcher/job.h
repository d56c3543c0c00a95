#pragma once
// One job, from start to verdict: the job's state machine. It owns the
// phase (launcher/job_phase.h) and decides what happens next; the work is
// done by its parts:
//   ControlServer   the agents' connections, typed messages in and out
//   AgentStarter    starting agents (local fork/exec, ssh; a fake in tests)
//   plan_launch     the launch messages (pure)
//   FenceRelay      MPI fences across hosts
//   MpiRouter       every other MPI message (spawn, publish/lookup, connect)
//   Fate            which failure decides the verdict and exit code
//   OutputSink      the ranks' output, tagged
//
// Threading: one io_context thread runs everything; the starter's helper
// threads and the stdin reader post to it.
#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hostfiles/placement.h"
#include "remote/agent_starter.h"
#include "remote/early_agent.h"
#include "launcher/attempts.h"
#include "launcher/cooldown.h"
#include "launcher/agent_links.h"
#include "launcher/fate.h"
#include "launcher/mpi/fence_relay.h"
#include "launcher/job_phase.h"
#include "launcher/launch_plan.h"
#include "launcher/launch_tree.h"
#include "launcher/mpi/mpi_router.h"
#include "launcher/options/options.h"
#include "launcher/output/output_flow.h"
#include "launcher/output/output_sink.h"
#include "launcher/peers.h"
#include "launcher/output/progress_line.h"
#include "launcher/stacks/stack_collector.h"

namespace dl::rdzv { class TcpStoreServer; }

namespace dl::launcher {

namespace asio = boost::asio;
class TorchStore;

// Makes the Job's agent starter (the real one by default; tests pass a fake).
// The Job's agent starter is remote/agent_starter.h's interface.
using remote::AgentStarter;
using remote::AgentStartSpec;
using StarterFactory = std::function<std::unique_ptr<AgentStarter>(asio::io_context&, AgentStarter::Events)>;
// Makes the Job's links to its agents (launcher/agent_links.h): the
// ControlServer by default; tests pass one that records what is sent.
using LinksFactory = std::function<std::unique_ptr<AgentLinks>(asio::io_context&, const std::string& token,
                                                               size_t nodes, AgentLinks::Handler&)>;

// What a Job is made of besides its options and placement; each empty part
// is the real one.
struct JobParts {
  Peers* peers = nullptr;  // not owned; null: hostfile mode (Peers::none())
  StarterFactory make_starter;
  LinksFactory make_links;
};

class Job : public AgentLinks::Handler {
 public:
  Job(RunOptions opts, hostfiles::Placement placement, JobParts parts = {});
  ~Job() override;
  // The local agent forked before this Job's event loop existed
  // (remote/early_agent.h): the local node's first start uses it. Before run().
  void use_early_agent(std::unique_ptr<remote::EarlyAgent> early) { early_agent_ = std::move(early); }
  // Runs the job; returns dlaunch's exit code. Prints the verdict line.
  // Is start(), the event loop until the job is done, and conclude().
  int run();
  Phase phase() const { return phase_.now(); }

  // For tests that drive the Job step by step on their own thread: start()
  // opens the links and starts the agents; io() runs what is due (poll());
  // conclude() is run()'s end, once phase() is kDone.
  void start();
  asio::io_context& io() { return io_; }
  int conclude();

 private:
  enum class NodeState {
    kExternal,     // per-node mode: another node's dlaunch runs it
    kStarting,     // its agent is being started (or started anew for a restart)
    kStartFailed,  // its agent could not be started
    kUp,           // its agent said hello and the connection is open
    kGone,         // its agent's connection closed
  };
  // One host of the job and its agent. `index` is the agent's (its control
  // connection's); the node rank (NODE_RANK) it runs is the seat it holds
  // (seats_), which moves to a spare when its host is lost (--spares).
  struct Node {
    int index = 0;
    std::string host;  // as the hostfile names it
    hostfiles::HostEntry entry;  // the hostfile's line (user, port, slots)
    bool local = false;
    NodeState state = NodeState::kStarting;
    int seat = -1;      // the node rank it runs; -1: a spare, or a host that was lost
    bool lost = false;  // its ranks moved to a spare (or a spare that was lost): not used again
    std::string why_gone;  // why its agent's connection closed
    enum class Health { kUnknown, kPending, kPassed, kFailed } health = Health::kUnknown;  // the health gate
    long long health_sent_ns = 0;  // the launcher's wall clock when the gate's check went (the clock check)
    std::vector<int> ranks;
    std::optional<control::msg::Hello> hello;  // its agent's (the last, after a restart)
    std::string reach_addr;  // this host's address as the other hosts reach it
    // --return-cooldown (launcher/job_return.cc): a lost host on its way
    // back, waiting out its cooldown, its new agent starting, or that agent
    // at the health gate; `lost` stays true until it passed.
    enum class Back { kNo, kCooling, kStarting, kChecking } back = Back::kNo;
    double cooldown_s = 0;                             // the cooldown it waits (or waited) last
    std::shared_ptr<asio::steady_timer> back_timer;  // the cooldown, or the bound of a try
    bool ours() const { return state != NodeState::kExternal; }
  };

  // AgentLinks::Handler
  std::string on_hello(const control::msg::Hello& m) override;
  void on_message(int node, const control::FromAgent& m) override;
  void on_output(int node, const control::DataChunk& c) override;
  void on_fence(int node, uint64_t id, std::string_view blob) override;
  void on_closed(int node, const std::string& why) override;
  void log(const std::string& line) override;

  void on_rank_exit(RankExit e);
  void on_peer_failed(int code, const std::string& verdict);
  int own_nodes() const { return own_nodes_; }
  bool per_node() const { return peers_->per_node(); }
  // start()'s steps: the links and their port, the stores, the MPI relays,
  // the timers.
  std::string open_links(bool any_remote);
  void start_stores(const std::string& bind);
  void start_mpi_relays();
  void arm_timers(bool any_remote);
  void show_progress();
  // Agents (launcher/job_agents.cc): the starter (remote::make_agent_starter,
  // or the test's), starting them (with_port: those that need the control
  // port, once it is open; else the local one, first), their failures.
  void make_starter();
  void start_agents(bool with_port);
  AgentStartSpec agent_spec(const Node& n) const;
  // The launch tree (launcher/launch_tree.h): its shape, the agents a
  // greeted agent is to start, and starting one node's agent again
  // (the launcher's starter for a root, its parent agent for the others).
  void plan_tree();
  control::msg::StartAgents tree_message(int to, std::vector<control::msg::TreeAgent> agents) const;
  void greeted(Node& n, const control::msg::Hello& m);
  void start_again(int node);
  void node_failed_to_start(int node, const std::string& why);
  bool all_agents_settled() const;
  void on_agent_timeout();
  void launch_all();
  void teardown(int grace_ms);
  void abort_before_launch();
  // Signals (launcher/job_signals.cc); the decisions are launcher/signal_policy.h's.
  void on_signal(int sig);
  // Ctrl-Z (SIGTSTP, and SIGTTIN/SIGTTOU): the ranks everywhere are stopped
  // (SIGSTOP to their groups, the agents stop counting our silence), then
  // dlaunch stops itself; SIGCONT (fg, bg) continues them and counts
  // silences afresh.
  void suspend(int sig);
  void stop_self_when_sent(int waited_ms);
  void continued();
  PlanInput plan_input() const;
  // --max-restarts (launcher/job_restart.cc).
  bool restartable();
  void restart();
  void on_ready(int node, const control::msg::Ready& r);
  void relaunch(int master_port);
  void all_ready();
  void restart_failed(const std::string& why);
  // The restart's bound on the agents' answers; longer with `new_agents` to wait for.
  void arm_restart_timer(bool new_agents);
  // One membership change, for --report-json and the final line's list
  // (launcher/attempts.h's MembershipChange: `kind` and the rest).
  void note_change(const std::string& kind, const std::string& host, const std::string& why, const std::vector<int>& ranks,
                   const std::string& to_host);
  std::string hello_again(Node& n, const control::msg::Hello& m);
  // --spares: the seats of lost hosts go to free spares (launcher/seats.h);
  // returns the lines that say so, "" if none moved. Nodes left without an
  // agent and without a spare are started anew (returned in `anew`).
  std::string move_to_spares(std::vector<int>& anew, bool again = false);
  // The launch tree: whether `n`'s agent is gone with an agent above it
  // (it ends when its parent's link does), not lost itself.
  bool lost_with_relay(const Node& n) const;
  std::string new_agents_beneath(const std::vector<int>& gone, const std::vector<int>& beneath);
  // The control server's routes from tree_ (its roots, by node).
  void set_routes();
  // A seated host lost while the restart waits for the agents: a spare
  // takes its seat, or the world shrinks (--min-hosts), or the restart fails.
  void lost_while_restarting(Node& n, const std::string& why);
  std::string shrink(const std::vector<int>& dropped);
  // --min-hosts: free spares (a lost host come back, --return-cooldown)
  // take seats again while the world is smaller than it started; "" for none.
  std::string grow();
  // The world placed again on `seats` with `np` ranks (shrink, grow).
  void place_world(const std::vector<int>& seats, int np);
  // A spare's agent holds no ranks: a launch of none starts its heartbeats.
  control::msg::Launch standby_launch() const;
  // The agent that runs node rank `seat`.
  Node& seated(int seat) { return nodes_.at(static_cast<size_t>(seats_.at(static_cast<size_t>(seat)))); }
  // `count` ranks of the attempt started (one agent's `started`, or a
  // relaying agent's started_below for its subtree).
  void on_started(int count);
  // The hosts by node rank (the one that holds each seat now).
  std::vector<std::string> seat_hosts() const;
  // A spare whose agent could not start, did not connect or was lost: the
  // job goes on without it (said once).
  void spare_lost(Node& n, const std::string& why);
  // Every agent connected or gave up, and every seated one is up and passed the health gate.
  bool ready_to_launch() const;
  // The health gate's GPU check, once every host said hello (with spares):
  // a seated host that sees fewer GPUs than its ranks need, where another
  // host of the job has them, fails the gate. True when one did.
  bool short_of_gpus();
  // The health gate (docs/failures.md): the hello's own checks, then
  // --health-check's answer. A host that fails takes no ranks: a spare takes
  // its seat before the launch, or the job cannot start.
  void check_health(Node& n, const control::msg::Hello& m);
  void on_health(Node& n, const control::msg::Health& h);
  void health_failed(Node& n, const std::string& text);
  // The health gate's GPU check of `n` for `ranks` ranks against the host
  // of the job that sees the most GPUs (most_gpus(): their count and host):
  // why it falls short, "" if it does not (or GPUs are not judged).
  std::pair<size_t, std::string> most_gpus() const;
  std::string gpus_short(const Node& n, size_t ranks, const std::pair<size_t, std::string>& most) const;
  // --return-cooldown (launcher/job_return.cc): `n` left the job (its seat
  // went to a spare, the world shrank without it, or it was a spare that
  // was lost): after its cooldown a new agent is started there, by dlaunch
  // itself as a spare's is; one that passes the health gate is a spare
  // again. A try that fails is another loss. The running attempt is not
  // touched.
  void schedule_return(Node& n);
  void try_return(int node);
  std::string hello_returned(Node& n, const control::msg::Hello& m);
  void back_as_spare(Node& n);
  void return_failed(Node& n, const std::string& why);
  void arm_return(Node& n, double s, std::function<void(Node&)> then);
  // The MPI router and its port to this Job (launcher/job_mpi.cc).
  friend class JobMpiPort;
  std::unique_ptr<MpiRouter> make_mpi_router();
  // Each attempt's MPI relays (fences by node rank, the router of its
  // namespace), made once its launch is planned; and a failed attempt's
  // spawned children dropped from their hosts before the next.
  void start_mpi_attempt();
  void end_mpi_attempt();
  void start_stdin_reader();
  void start_stack_collector();
  // torch's c10d store on `bind`, and which node a client's address is.
  void start_torch_store(const std::string& bind, uint16_t port);
  int node_at(const std::string& address) const;
  void check_finished();
  void finish();
  void stop();
  int grace_ms() const { return static_cast<int>(opts_.kill_grace_s * 1000); }
  static std::chrono::milliseconds secs(double s) { return std::chrono::milliseconds(static_cast<long>(s * 1000)); }

  RunOptions opts_;
  hostfiles::Placement plan_;
  std::unique_ptr<Peers> own_peers_;  // hostfile mode's (Peers::none())
  Peers* peers_;
  StarterFactory make_starter_;
  LinksFactory make_links_;
  std::shared_ptr<remote::EarlyAgent> early_agent_;  // until make_starter() hands it on
  JobPhase phase_;
  bool peer_failed_ = false, published_ = false;  // per-node mode: who reported the failure
  asio::io_context io_;
  std::string token_, job_id_, control_host_;
  uint16_t control_port_ = 0;
  std::vector<Node> nodes_;  // the placement's hosts by node rank, then the spares
  std::vector<int> seats_;   // by node rank: the index of the node (agent) that runs it
  // A membership change being carried out: its line, said once every rank
  // of the next attempt has started, with the time since the loss was known.
  struct Change {
    std::string line;
    std::chrono::steady_clock::time_point known;
    int started = 0;
  };
  std::optional<Change> change_;
  std::vector<std::string> lost_hosts_;  // every host the job stopped using, with why
  std::string below_min_;                // --min-hosts: why the world cannot shrink further
  size_t first_seats_ = 0;               // the seats the job started with: a world grows back to no more
  std::vector<int> shrunk_ranks_;        // the ranks each seat that left a shrunk world held, the latest last
  std::chrono::steady_clock::time_point loss_known_{};  // when a host's loss was last seen (on_closed)
  std::chrono::steady_clock::time_point born_ = std::chrono::steady_clock::now();  // a membership change's at_s is from here
  std::unique_ptr<AgentLinks> server_;
  std::unique_ptr<rdzv::TcpStoreServer> store_;
  std::unique_ptr<TorchStore> torch_store_;  // --torch-store served (launcher/torch_store.h)
  std::unique_ptr<FenceRelay> fences_;  // this attempt's MPI fences, by node rank (start_mpi_attempt)
  std::unique_ptr<AgentStarter> starter_;
  asio::signal_set signals_;
  asio::steady_timer agent_timer_, job_timer_, kill_timer_, close_timer_, restart_timer_, suspend_timer_;
  Attempts attempts_;
  LaunchTree tree_;  // flat unless more hosts than --fanout are started by a method that relays
  ProgressLine progress_;                    // agents connected, on a terminal
  std::vector<std::string> start_failures_;  // hosts whose agent could not be started
  bool mpi_ = false;                         // the agents serve PMIx (--mpi), decided at launch
  std::unique_ptr<OutputSink> sink_;
  std::unique_ptr<OutputFlow> output_;      // from start() on
  std::unique_ptr<StackCollector> stacks_;  // where every rank is, on --timeout and SIGQUIT
  Fate fate_;
  std::unique_ptr<MpiRouter> mpi_router_;  // MPI_Abort, spawns, publish/lookup, connects; from run() on
  int own_nodes_ = 0;  // the nodes whose agents this Job starts (not kExternal), fixed at construction
  int hellos_ = 0, signals_seen_ = 0;
  ReturnCooldown cooldown_;         // --return-cooldown: each lost host's next try
  bool no_return_said_ = false;     // under srun: that lost hosts cannot come back, said once
};

}  // namespace dl::launcher
