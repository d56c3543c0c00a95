// The agent starter of --launcher libssh: the local host's agent by
// fork/exec (local_starter.h), remote hosts' over libssh, every session
// driven from the io_context's thread by an ssh::AsyncExec, at most
// --ssh-parallel of them in their handshake at once.
#include <map>

#include <boost/asio.hpp>

#include "remote/agent_starter.h"
#include "remote/local_starter.h"
#include "remote/ssh/async_exec.h"
#include "remote/ssh/quote.h"
#include "remote/start_gate.h"

namespace dl::remote {

namespace asio = boost::asio;

namespace {

class LibsshStarter : public AgentStarter {
 public:
  LibsshStarter(asio::io_context& io, StarterOptions o, Events ev)
      : io_(io), o_(std::move(o)), ev_(std::move(ev)), gate_(o_.ssh_parallel) {}
  ~LibsshStarter() override { stop(0); }

  void start(const AgentStartSpec& spec) override {
    Host& h = hosts_[spec.node];
    // Started again (--max-restarts after its agent was lost): the last
    // session's hooks see a newer generation and stay quiet.
    ++h.gen, h.connected = false, h.forwarded = 0;
    h.target = ssh::Target{spec.host, spec.user, spec.port};
    gate_.enter(spec.node, [this, spec] { begin(spec); });
  }

  void connected(int node) override {
    if (auto it = hosts_.find(node); it != hosts_.end()) it->second.connected = true;
  }

  void stop(int) override {
    stopped_ = true;
    gate_.clear();
    for (auto& [node, h] : hosts_)
      if (h.exec) h.exec->close();
  }

 private:
  struct Host {
    ssh::Target target;
    std::shared_ptr<ssh::AsyncExec> exec;
    bool connected = false;
    size_t forwarded = 0;  // bytes of its stderr passed on as the agent's
    int gen = 0;           // starts of this node, the current one's number
  };

  // Called on the loop's thread for the node's current session. The event
  // is delivered later: by then the node may have been started again (a
  // restart after its agent was lost, whose old session ended just before),
  // and the old session's failure must not count against the new one.
  void post_failed(int node, std::string why) {
    const int gen = hosts_[node].gen;
    asio::post(io_, [this, node, gen, why = std::move(why)] {
      if (!stopped_ && hosts_[node].gen == gen) ev_.failed(node, why);
    });
  }

  void begin(const AgentStartSpec& spec) {
    ssh::Options so;
    so.connect_timeout = o_.ssh_timeout;
    so.config_file = o_.ssh_config;
    so.accept_new = o_.ssh_accept_new;
    const int node = spec.node;
    const int gen = hosts_[node].gen;
    auto current = [this, node, gen] { return !stopped_ && hosts_[node].gen == gen; };
    ssh::AsyncExec::Hooks hooks;
    hooks.command = [this, spec](const ssh::Session& s, std::string* payload) {
      gate_.leave(spec.node);
      const std::string back = spec.control_addr.empty() ? s.local_address() : spec.control_addr;
      asio::post(io_, [this, node = spec.node, back, reach = s.remote_address()] {
        if (!stopped_) ev_.reached(node, reach, back);
      });
      control::AgentArgs a = spec.args;
      a.connect_host = back;
      a.connect_port = static_cast<uint16_t>(std::stoi(spec.control_port));
      std::vector<std::string> argv{agent_path(o_.prefix, true)};
      for (auto& x : control::to_argv(a)) argv.push_back(std::move(x));
      *payload = spec.token + "\n";
      return ssh::join_quoted(argv);
    };
    hooks.failed = [this, node, current](const std::string& why, ErrorKind) {
      gate_.leave(node);
      if (current()) post_failed(node, why);
    };
    hooks.err = [this, node, current](std::string_view) {
      if (current()) forward_stderr(node);
    };
    hooks.ended = [this, node, current](int status) {
      if (current()) ended(node, status);
    };
    Host& h = hosts_[node];
    h.exec = ssh::AsyncExec::create(io_, h.target, so, std::move(hooks));
    h.exec->start();
  }

  // The agent's own complaints after start-up, tagged with its host by the Job.
  void forward_stderr(int node) {
    Host& h = hosts_[node];
    if (!h.connected || h.exec->err().size() <= h.forwarded) return;
    std::string tail = h.exec->err().substr(h.forwarded);
    h.forwarded = h.exec->err().size();
    asio::post(io_, [this, node, tail = std::move(tail)] {
      if (!stopped_) ev_.agent_stderr(node, tail);
    });
  }

  // Before it connected this is why it could not start; after, the Job
  // hears of it from the control connection and ignores this.
  void ended(int node, int status) {
    Host& h = hosts_[node];
    std::string err = h.exec->err().substr(std::min(h.forwarded, h.exec->err().size()));
    while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
    const std::string path = agent_path(o_.prefix, true);
    std::string why = h.target.str() + ": dlaunch-agent exited with status " + std::to_string(status);
    if (status == 127)
      why = h.target.str() + ": dlaunch-agent was not found (" + path +
            "); install dlaunch at the same path there or pass --prefix DIR";
    if (!err.empty()) why += " (" + err + ")";
    post_failed(node, why);
  }

  asio::io_context& io_;
  StarterOptions o_;
  Events ev_;
  StartGate gate_;
  bool stopped_ = false;
  std::map<int, Host> hosts_;
};

}  // namespace

std::unique_ptr<AgentStarter> make_process_starter(asio::io_context& io, StarterOptions o, AgentStarter::Events ev) {
  auto local = make_local_starter(io, ev, std::move(o.early_agent));
  return make_split_starter(std::move(local), std::make_unique<LibsshStarter>(io, std::move(o), std::move(ev)));
}

}  // namespace dl::remote
