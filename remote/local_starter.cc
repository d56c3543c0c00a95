#include "remote/local_starter.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <map>
#include <vector>

#include <boost/asio.hpp>

#include "errors/error.h"

namespace dl::remote {

namespace asio = boost::asio;

namespace {

class LocalStarter : public AgentStarter {
 public:
  LocalStarter(asio::io_context& io, Events ev, std::shared_ptr<EarlyAgent> early)
      : io_(io), ev_(std::move(ev)), early_(std::move(early)) {}
  ~LocalStarter() override { stop(0); }

  void start(const AgentStartSpec& spec) override {
    auto& w = watch_[spec.node];
    // Started again (--max-restarts after its agent was lost): the old watch
    // is kept (its handler may still name it) and stays quiet.
    if (w) {
      w->connected = true;
      retired_.push_back(std::move(w));
    }
    w = std::make_unique<Watch>();
    control::AgentArgs a = spec.args;
    a.connect_host = "127.0.0.1";
    a.connect_port = static_cast<uint16_t>(std::stoi(spec.control_port));
    // The agent forked before the event loop, waiting for this command line:
    // no exec (remote/early_agent.h). Once; a node started again execs.
    if (early_ && ev_.local_control) {
      a.control_fd = kAgentControlFd;
      int control = -1;
      w->forked = true;
      w->agent = early_->start(control::to_argv(a), spec.token, &control);
      early_.reset();
      ev_.local_control(spec.node, control);
      watch_exit(*w, spec);
      return;
    }
    w->path = agent_path("", false);
    // The control connection as a socketpair the agent inherits: no connect,
    // no handshake round trip (its hello is the first thing it sends).
    int pair[2] = {-1, -1};
    if (ev_.local_control) {
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0) {
        a.control_fd = kAgentControlFd;
      } else if (a.connect_port == 0) {  // started before the control port was open
        const std::string why = spec.host + ": cannot make the local agent's control socket: " + std::strerror(errno);
        asio::post(io_, [this, node = spec.node, why] { ev_.failed(node, why); });
        return;
      }
    }
    // Not start_local_agent: the launcher goes on (its servers, the other
    // hosts) while the agent execs; an exec that failed is read from the
    // status pipe when the agent's pidfd says it ended.
    int exec_fd = -1;
    try {
      w->agent = spawn_local_agent(w->path, control::to_argv(a), spec.token, -1, -1, &exec_fd, pair[1]);
    } catch (const Error& e) {
      for (int fd : pair)
        if (fd >= 0) ::close(fd);
      const std::string why = spec.host + ": " + e.what();
      asio::post(io_, [this, node = spec.node, why] { ev_.failed(node, why); });
      return;
    }
    w->exec_fd = exec_fd;
    if (pair[1] >= 0) ::close(pair[1]);
    if (pair[0] >= 0) ev_.local_control(spec.node, pair[0]);
    watch_exit(*w, spec);
  }

  bool needs_control_port(const AgentStartSpec& spec) const override { return !spec.local || !ev_.local_control; }

  void connected(int node) override {
    if (auto it = watch_.find(node); it != watch_.end()) it->second->connected = true;
  }

  void stop(int ms) override {
    stopped_ = true;
    for (auto& w : retired_) reap_local_agent(w->agent, 0);
    for (auto& [node, w] : watch_) {
      if (w->exit_watch) {
        boost::system::error_code ec;
        w->exit_watch->cancel(ec);
      }
      reap_local_agent(w->agent, ms);
    }
  }

 private:
  struct Watch;
  // One that exits before it connects (or whose exec failed) fails its
  // node at once, not when --agent-timeout runs out.
  void watch_exit(Watch& w, const AgentStartSpec& spec);

  struct Watch {
    ~Watch() {
      if (exec_fd >= 0) ::close(exec_fd);
    }
    bool connected = false;
    bool forked = false;  // the agent forked from dlaunch (no exec, no path)
    int exec_fd = -1;  // spawn_local_agent's exec status: closed by the exec, or its errno
    LocalAgent agent;
    std::string path;
    std::unique_ptr<asio::posix::stream_descriptor> exit_watch;  // the agent's pidfd
  };
  asio::io_context& io_;
  Events ev_;
  bool stopped_ = false;
  std::map<int, std::unique_ptr<Watch>> watch_;
  std::vector<std::unique_ptr<Watch>> retired_;  // watches of nodes started again
  std::shared_ptr<EarlyAgent> early_;             // for the first local start; null once used
};

void LocalStarter::watch_exit(Watch& w, const AgentStartSpec& spec) {
  // Without pidfds (Linux < 5.3) the agent timer still bounds the wait.
  const int fd = open_agent_pidfd(w.agent);
  if (fd < 0) return;
  w.exit_watch = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
  w.exit_watch->async_wait(asio::posix::stream_descriptor::wait_read,
                           [this, w = &w, node = spec.node, host = spec.host](boost::system::error_code ec) {
                             if (ec || w->connected || stopped_) return;
                             auto status = peek_agent_exit(w->agent);
                             if (!status) return;
                             if (w->forked)
                               return ev_.failed(node, host + ": " + forked_agent_exit_error(*status));
                             const int exec_errno = read_exec_status(w->exec_fd);
                             ev_.failed(node, host + ": " + (exec_errno > 0 ? local_agent_exec_error(w->path, exec_errno)
                                                                            : local_agent_exit_error(w->path, *status)));
                           });
}

class SplitStarter : public AgentStarter {
 public:
  SplitStarter(std::unique_ptr<AgentStarter> local, std::unique_ptr<AgentStarter> remote)
      : local_(std::move(local)), remote_(std::move(remote)) {}
  void start(const AgentStartSpec& spec) override { (spec.local ? local_ : remote_)->start(spec); }
  bool needs_control_port(const AgentStartSpec& spec) const override {
    return (spec.local ? local_ : remote_)->needs_control_port(spec);
  }
  void connected(int node) override {
    local_->connected(node);
    remote_->connected(node);
  }
  void stop(int ms) override {
    remote_->stop(ms);
    local_->stop(ms);
  }

 private:
  std::unique_ptr<AgentStarter> local_, remote_;
};

}  // namespace

std::unique_ptr<AgentStarter> make_local_starter(asio::io_context& io, AgentStarter::Events ev,
                                                 std::shared_ptr<EarlyAgent> early) {
  return std::make_unique<LocalStarter>(io, std::move(ev), std::move(early));
}

std::unique_ptr<AgentStarter> make_split_starter(std::unique_ptr<AgentStarter> local,
                                                 std::unique_ptr<AgentStarter> remote) {
  return std::make_unique<SplitStarter>(std::move(local), std::move(remote));
}

}  // namespace dl::remote
