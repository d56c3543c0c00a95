#pragma once
// dlaunch-agent: one per host. Connects back to the launcher, spawns this
// host's ranks, streams their output, reports their exits, and makes sure
// none of them outlives the job: when the launcher's connection drops, its
// heartbeats stop, or stdin (the ssh channel / local pipe) reaches EOF, every
// rank's process group is killed and the agent exits.
//
// Its parts: the control link (control::Connection, shared with the
// launcher), the ranks (RankSupervisor), their environment (the pipeline of
// launcher/rank_env.h: rank_env_base once per launch, then each rank's own
// and its contributors', agent/rank_contributor.h) and the MPI side
// (mpi/mpi_side.h), to which it hands every MPI message and which is each
// rank's first contributor.
//
// Threading: everything runs on one io_context thread (a launch's clones
// aside: RankSupervisor::spawn_all).
#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <thread>
#include <map>
#include <optional>
#include <tuple>
#include <string>

#include "agent/loop_watch.h"
#include "mpi/mpi_side.h"
#include "agent/rank_contributor.h"
#include "agent/rank_environment.h"
#include "agent/rank_supervisor.h"
#include "agent/relay.h"
#include "agent/stack_dump.h"
#include "agent/store_door_service.h"
#include "control/agent_args.h"
#include "control/connection.h"
#include "control/messages.h"

namespace dl::agent {

using mpi::EnvList;
using mpi::MpiSide;

namespace asio = boost::asio;

// This process's environment, read now.
EnvVars own_environment();

struct AgentOptions {
  control::AgentArgs args;  // the command line (control/agent_args.h)
  std::string token;        // job token, read from stdin
  std::chrono::milliseconds connect_timeout{30000};
};

class Agent {
 public:
  Agent(asio::io_context& io, AgentOptions opts);
  ~Agent();
  // Connects, says hello, then serves until the job ends. Returns the exit
  // code for the agent process. Throws on a failed connect/handshake.
  int run();

 private:
  asio::generic::stream_protocol::socket control_socket();
  void on_frame(wire::Frame& f);
  // The frames that came while the ranks were being started, in order.
  void replay_deferred();
  void on_message(control::FromLauncher m);
  void launch(control::msg::Launch m);
  bool start_mpi(const control::msg::Launch& m);
  // A child of MPI_Comm_spawn, with the PMIx variables its spawn gave it in
  // place of the MPI side's (agent/agent_spawn.cc).
  void start_child(const control::msg::RankSpec& spec, const control::msg::Launch& m, const EnvVars& inherited,
                   const EnvList& pmix);
  // This launch's contributors to a rank's environment, in order
  // (agent/rank_contributor.h): `mpi` (the MPI side's, or a spawned child's
  // PMIx variables), then torch's error files and the stack hook, where the
  // launch has them.
  using Contributors = std::vector<RankContributor*>;
  Contributors contributors(RankContributor& mpi) const;
  // The rank's complete SpawnSpec: its launch's base (stages 0 to 2 of
  // launcher/rank_env.h), its own variables and identity (3), then each
  // contributor's (4); or nothing when it was refused (reported, and every
  // contributor asked told so). Its MPI socket, if any, is its
  // SpawnSpec::inherit_fd, which spawn_rank closes in the agent.
  std::optional<SpawnSpec> prepare_rank(const control::msg::RankSpec& spec, const control::msg::Launch& m,
                                        const RankEnvBase& base, const Contributors& contributors);
  std::string wdir_problem(const std::string& wdir);
  // MPI_Comm_spawn's children on this host (agent/agent_spawn.cc).
  void start_children(const control::msg::SpawnLaunch& m, const std::vector<EnvList>& envs, const std::string& error);
  void watch_stdin();
  void lost_launcher(const std::string& why);
  void finish_if_done();
  void get_ready(int attempt);
  void ready_if_done();
  void add_torch_error(control::msg::Exited& x) const;
  void dump_stacks(const control::msg::DumpStacks& d);
  // The launch tree: start agents beneath this one and relay for them (agent/relay.h).
  void start_agents(const control::msg::StartAgents& m);
  // --health-check: the admin's command, on a thread of its own (agent/health.h); answered by `health`.
  void health_check(const control::msg::HealthCheck& c);
  std::thread health_;

  asio::io_context& io_;
  AgentOptions opts_;
  std::shared_ptr<control::Connection> link_;
  RankSupervisor ranks_;
  std::unique_ptr<MpiSide> mpi_;  // the PMIx and PMI servers of an MPI job, or its tripwires
  std::unique_ptr<RankContributor> mpi_task_;  // mpi_ as the job's ranks' first contributor
  std::unique_ptr<PythonDir> py_dir_;  // the Python ranks' files, named at the first launch (agent/python_dir.h)
  std::unique_ptr<TorchErrorFiles> error_files_;  // the ranks' TORCHELASTIC_ERROR_FILEs, from the launch on
  std::unique_ptr<LoopWatch> loop_watch_;  // says when this loop is held up, and where (loop_watch.h)
  std::unique_ptr<StackDumper> stacks_;           // the ranks' stacks on request, from the launch on
  StoreDoorService store_door_{io_};              // the ranks' way to the job's store (store_door_service.h)
  std::unique_ptr<Relay> relay_;                  // the launch tree: the agents this one started
  asio::signal_set term_signals_;
  asio::posix::stream_descriptor stdin_;
  std::array<char, 256> stdin_buf_{};
  sigset_t reset_signals_{};  // what a rank resets before exec (non_default_signals, per launch)
  control::EnvVars launch_env_;  // the latest launch_env: what every host's launch shares
  std::optional<control::msg::Launch> launch_;  // the launch (less its ranks), for spawned children
  // The programs resolved for this launch (or spawn), by (argv0, PATH, wdir):
  // 64 ranks of one program look it up once, not 64 times.
  std::map<std::tuple<std::string, std::string, std::string>, Resolved> resolved_;
  // The working directories checked for this launch: why each cannot be used, or "".
  std::map<std::string, std::string> wdirs_;
  std::deque<wire::Frame> deferred_;  // from the launcher while spawning (on_frame)
  std::optional<int> restart_;  // --max-restarts: the attempt to answer `ready` for, once every rank is reported
  int answered_ = 0;            // the last attempt answered `ready` for
  bool bye_ = false, done_ = false;
  int exit_code_ = 0;
};

}  // namespace dl::agent
