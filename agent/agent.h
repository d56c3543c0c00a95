#pragma once
// dlaunch-agent: one per host. Connects back to the launcher, spawns this
// host's ranks, streams their output, reports their exits, and makes sure
// none of them outlives the job: when the launcher's connection drops, its
// heartbeats stop, or stdin (the ssh channel / local pipe) reaches EOF, every
// rank's process group is killed and the agent exits.
//
// Threading: everything runs on one io_context thread.
#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/mpi_job.h"
#include "wire/frame.h"

namespace dl::agent {

namespace asio = boost::asio;

struct AgentOptions {
  std::string launcher_host;   // control server address
  uint16_t launcher_port = 0;
  int node = 0;                // this host's node rank
  std::string token;           // job token, read from stdin
  int gpus_per_node = -1;      // -1: detect
  bool detect_gpus = true;     // false with --no-gpu-bind
  bool prepare_pmix = true;    // false with --no-pmix: no PMIx server unless a launch asks for MPI
  bool cpu_topology = false;   // --cpu-topology: report cores and NUMA nodes (for --bind-to)
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
  struct Rank;
  void send(std::string frame);
  void write_next();
  void read_control();
  void on_frame(const wire::Frame& f);
  void on_json(const nlohmann::json& m);
  void launch(const nlohmann::json& m);
  bool start_mpi(const nlohmann::json& m);
  void stop_mpi();
  void start_rank(const nlohmann::json& spec, const nlohmann::json& common_env, const std::string& wdir);
  void read_output(Rank& r, int stream);
  void resume_paused_reads();
  void reap();
  void maybe_report(Rank& r);
  void signal_all(int sig);
  void teardown(std::chrono::milliseconds grace);
  void heartbeat();
  void watch_stdin();
  void lost_launcher(const std::string& why);
  void finish_if_done();

  asio::io_context& io_;
  AgentOptions opts_;
  asio::ip::tcp::socket sock_;
  wire::FrameParser parser_;
  std::array<char, 65536> rxbuf_{};
  std::deque<std::string> txq_;
  size_t tx_bytes_ = 0;
  bool writing_ = false;
  std::map<int, std::unique_ptr<Rank>> ranks_;  // by global rank
  std::unique_ptr<MpiJob> mpi_;                 // PMIx server of an MPI job, else null
  std::vector<std::pair<Rank*, int>> paused_;   // output reads waiting for the queue to drain
  asio::signal_set sigchld_;
  asio::signal_set term_signals_;
  asio::steady_timer hb_timer_, kill_timer_;
  asio::posix::stream_descriptor stdin_;
  std::array<char, 256> stdin_buf_{};
  std::chrono::steady_clock::time_point last_rx_;
  std::chrono::milliseconds hb_interval_{1000}, hb_timeout_{0};
  bool bye_ = false, done_ = false;
  int exit_code_ = 0;
};

}  // namespace dl::agent
