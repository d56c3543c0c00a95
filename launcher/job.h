#pragma once
// One job, from start to verdict: hosts the control server and the job's
// store, starts one agent per host, sends each its ranks, prints their
// output, decides the job's fate, and makes sure nothing outlives it.
//
// Threading: one io_context thread runs everything; ssh start-up runs on
// helper threads that post their results to it; a stdin reader thread posts
// rank 0's input.
#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "hostfiles/placement.h"
#include "launcher/agent_starter.h"
#include "launcher/fate.h"
#include "launcher/options.h"
#include "launcher/output_sink.h"

namespace dl::rdzv { class TcpStoreServer; }

namespace dl::launcher {

namespace asio = boost::asio;

// Per-node mode (launcher/node_group.h): this Job runs one node of a job
// whose nodes met at a store. The placement is the whole world's; only
// `node` gets an agent here, the other nodes' ranks are theirs to run.
struct NodeView {
  int node = 0;
  std::string token, job_id, store_addr, master_addr;
  int master_port = 0;
  // Tells the other nodes that this job failed; must not block.
  std::function<void(int code, const std::string& verdict)> publish_failure;
  // Starts watching the other nodes; `failed` may be called on any thread.
  std::function<void(std::function<void(int, std::string)> failed)> watch;
};

class Job {
 public:
  Job(RunOptions opts, hostfiles::Placement placement, std::optional<NodeView> view = std::nullopt);
  ~Job();
  // Runs the job; returns dlaunch's exit code. Prints the verdict line.
  int run();

 private:
  struct Session;
  struct Node;
  void accept();
  void start_session(std::shared_ptr<Session> s);
  void read_session(std::shared_ptr<Session> s);
  void on_frame(const std::shared_ptr<Session>& s, const std::string& type_and_payload, uint8_t type);
  void on_hello(const std::shared_ptr<Session>& s, const nlohmann::json& m);
  void on_message(Node& n, const nlohmann::json& m);
  void on_fence(Node& n, uint64_t id, std::string_view blob);
  void fence_timed_out(uint64_t id);
  void on_peer_failed(int code, const std::string& verdict);
  int own_nodes() const;
  bool decide_mpi();
  bool plan_cpu_binding();
  void on_session_closed(const std::shared_ptr<Session>& s, const std::string& why);
  void start_agents();
  void start_remote_agent(int node, const std::string& bind_port);
  void watch_local_agent(Node& n);
  void node_failed_to_start(int node, const std::string& why);
  bool all_agents_settled() const;
  void launch_all();
  nlohmann::json launch_message(int node);
  void send(Node& n, std::string frame);
  void teardown(int grace_ms);
  void on_signal(int sig);
  void heartbeat();
  void start_stdin_reader();
  void check_finished();
  void finish();
  void log(const std::string& line) const;
  void show_progress();

  RunOptions opts_;
  hostfiles::Placement plan_;
  std::optional<NodeView> view_;
  bool peer_failed_ = false, published_ = false;
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::unique_ptr<rdzv::TcpStoreServer> store_;
  asio::signal_set signals_;
  asio::steady_timer agent_timer_, job_timer_, kill_timer_, hb_timer_, close_timer_, progress_timer_;
  std::string progress_shown_;             // the progress line on the terminal, "" when none
  std::vector<std::string> start_failures_;  // hosts whose agent could not be started
  std::string token_, job_id_, control_host_;
  std::vector<std::unique_ptr<Node>> nodes_;
  // MPI fences across hosts in progress, by id: each node's contribution.
  struct Fence {
    std::vector<std::optional<std::string>> blobs;  // by node
    size_t have = 0;
    std::unique_ptr<asio::steady_timer> timer;      // --fence-timeout
  };
  std::map<uint64_t, Fence> fences_;
  std::map<int, std::vector<int>> cpus_;  // --bind-to: rank -> its CPUs
  bool mpi_ = false;  // the agents serve PMIx (--mpi)
  std::vector<std::thread> ssh_threads_;
  std::unique_ptr<OutputSink> sink_;
  Fate fate_;
  int hellos_ = 0, signals_seen_ = 0;
  bool launched_ = false, tearing_down_ = false, finishing_ = false, stopped_ = false;
  std::chrono::steady_clock::time_point started_at_;
};

}  // namespace dl::launcher
