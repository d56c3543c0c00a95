// The agent starter that starts real processes: the local host's agent by
// fork/exec (agent_starter.h's helpers), remote hosts' over ssh.
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include <boost/asio.hpp>

#include "errors/error.h"
#include "remote/agent_starter.h"
#include "remote/ssh/quote.h"
#include "remote/ssh/remote_process.h"
#include "remote/ssh/session.h"

namespace dl::remote {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

class ProcessStarter : public AgentStarter {
 public:
  ProcessStarter(asio::io_context& io, StarterOptions o, Events ev) : io_(io), o_(std::move(o)), ev_(std::move(ev)) {}
  ~ProcessStarter() override { stop(0); }

  void start(const AgentStartSpec& spec) override {
    auto& w = watch_[spec.node];
    w = std::make_unique<Watch>();
    if (spec.local) start_local(spec, *w);
    else start_remote(spec, *w);
  }

  void connected(int node) override {
    if (auto it = watch_.find(node); it != watch_.end()) it->second->connected = true;
  }

  void stop(int ms) override {
    for (auto& [node, w] : watch_) w->stop = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
    for (auto& [node, w] : watch_) {
      if (w->exit_watch) {
        boost::system::error_code ec;
        w->exit_watch->cancel(ec);
      }
      reap_local_agent(w->local, ms);
    }
  }

 private:
  struct Watch {
    std::atomic<bool> stop{false}, connected{false};
    LocalAgent local;
    std::string path;
    std::unique_ptr<asio::posix::stream_descriptor> exit_watch;  // the local agent's pidfd
  };

  void fail(int node, std::string why) {
    asio::post(io_, [this, node, why = std::move(why)] { ev_.failed(node, why); });
  }

  void start_local(const AgentStartSpec& spec, Watch& w) {
    w.path = agent_path("", false);
    control::AgentArgs a = spec.args;
    a.connect_host = "127.0.0.1";
    a.connect_port = static_cast<uint16_t>(std::stoi(spec.control_port));
    try {
      w.local = start_local_agent(w.path, control::to_argv(a), spec.token);
    } catch (const Error& e) {
      return fail(spec.node, spec.host + ": " + e.what());
    }
    // One that exits before it connects fails its node at once, not when
    // --agent-timeout runs out. Without pidfds (Linux < 5.3) the agent timer
    // still bounds the wait.
    const int fd = open_agent_pidfd(w.local);
    if (fd < 0) return;
    w.exit_watch = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
    w.exit_watch->async_wait(asio::posix::stream_descriptor::wait_read,
                             [this, &w, node = spec.node, host = spec.host](boost::system::error_code ec) {
                               if (ec || w.connected || w.stop) return;
                               if (auto status = peek_agent_exit(w.local))
                                 ev_.failed(node, host + ": " + local_agent_exit_error(w.path, *status));
                             });
  }

  void start_remote(const AgentStartSpec& spec, Watch& w) {
    ssh::Target target{spec.host, spec.user, spec.port};
    ssh::Options so;
    so.connect_timeout = o_.ssh_timeout;
    so.config_file = o_.ssh_config;
    so.accept_new = o_.ssh_accept_new;
    const std::string path = agent_path(o_.prefix, true);
    threads_.emplace_back([this, &w, spec, target, so, path, token = spec.token] {
      const int node = spec.node;
      try {
        ssh::Session session(target, so);
        const std::string back = spec.control_addr.empty() ? session.local_address() : spec.control_addr;
        control::AgentArgs a = spec.args;
        a.connect_host = back;
        a.connect_port = static_cast<uint16_t>(std::stoi(spec.control_port));
        std::vector<std::string> argv{path};
        for (auto& x : control::to_argv(a)) argv.push_back(std::move(x));
        asio::post(io_, [this, node, back, reach = session.remote_address()] { ev_.reached(node, reach, back); });
        auto proc = session.exec(ssh::join_quoted(argv));
        // A command that cannot start (no agent there) may end, and close the
        // channel, before the token is written: its exit status and stderr
        // then say why, not the failed write.
        std::string write_error;
        try {
          proc->write_stdin(token + "\n");
        } catch (const Error& e) {
          write_error = e.what();
        }
        size_t err_seen = 0;
        while (!w.stop && proc->poll_output(milliseconds(20))) {
          if (proc->err().size() > err_seen && w.connected) {
            // The agent's own complaints after start-up, tagged with its host by the Job.
            std::string tail = proc->err().substr(err_seen);
            err_seen = proc->err().size();
            asio::post(io_, [this, node, tail] { ev_.agent_stderr(node, tail); });
          }
        }
        if (w.stop) return;
        if (!proc->exit_status() && !write_error.empty()) return fail(node, write_error);
        const int status = proc->exit_status().value_or(-1);
        std::string err = proc->err().substr(std::min(err_seen, proc->err().size()));
        while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
        std::string why = target.str() + ": dlaunch-agent exited with status " + std::to_string(status);
        if (status == 127)
          why = target.str() + ": dlaunch-agent was not found (" + path +
                "); install dlaunch at the same path there or pass --prefix DIR";
        if (!err.empty()) why += " (" + err + ")";
        fail(node, why);
      } catch (const std::exception& e) {
        fail(node, e.what());
      }
    });
  }

  asio::io_context& io_;
  StarterOptions o_;
  Events ev_;
  std::map<int, std::unique_ptr<Watch>> watch_;
  std::vector<std::thread> threads_;
};

}  // namespace

std::unique_ptr<AgentStarter> make_process_starter(asio::io_context& io, StarterOptions o, AgentStarter::Events ev) {
  return std::make_unique<ProcessStarter>(io, std::move(o), std::move(ev));
}

}  // namespace dl::remote
