#include "remote/sim_starter.h"

#include <boost/asio.hpp>

#include <sstream>

#include "errors/error.h"
#include "remote/local_starter.h"

namespace dl::remote {

namespace asio = boost::asio;

namespace {

// The simulated hosts' agents: the local starter's fork/exec, pidfd watch
// and reaping, without its socketpair (so each agent connects and
// authenticates over TCP as a remote one does), each agent told which host
// it stands for.
class SimStarter : public AgentStarter {
 public:
  SimStarter(asio::io_context& io, Events ev) : io_(io), ev_(std::move(ev)) {
    Events tcp = ev_;
    tcp.local_control = nullptr;
    agents_ = make_local_starter(io, std::move(tcp));
  }
  ~SimStarter() override { stop(0); }

  void start(const AgentStartSpec& spec) override {
    asio::post(io_, [this, node = spec.node] {
      if (!stopped_) ev_.reached(node, sim_address(node), "127.0.0.1");
    });
    AgentStartSpec s = spec;
    s.args.sim_host = spec.host;
    agents_->start(s);
  }
  void connected(int node) override { agents_->connected(node); }
  void stop(int ms) override {
    stopped_ = true;
    agents_->stop(ms);
  }

 private:
  asio::io_context& io_;
  Events ev_;
  bool stopped_ = false;
  std::unique_ptr<AgentStarter> agents_;
};

}  // namespace

std::string sim_address(int node) {
  constexpr uint32_t kFirst = (127u << 24) + 2, kLast = (127u << 24) + 0xfffffe;
  if (node < 0 || node > static_cast<int>(kLast - kFirst))
    throw UsageError("--launcher sim simulates at most " + std::to_string(kLast - kFirst + 1) + " hosts, node " +
                     std::to_string(node) + " is beyond them");
  const uint32_t a = kFirst + static_cast<uint32_t>(node);
  return "127." + std::to_string(a >> 16 & 255) + "." + std::to_string(a >> 8 & 255) + "." + std::to_string(a & 255);
}

std::vector<std::string> sim_environment(const std::vector<std::string>& env, const std::string& spec,
                                         const std::string& name) {
  std::vector<std::string> out = env;
  std::istringstream in(spec);
  for (std::string item; std::getline(in, item, ';');) {
    const size_t colon = item.find(':'), eq = item.find('=', colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || eq == std::string::npos || item.substr(0, colon) != name) continue;
    const std::string var = item.substr(colon + 1, eq - colon - 1);
    std::erase_if(out, [&](const std::string& e) { return e.compare(0, var.size() + 1, var + "=") == 0; });
    out.push_back(item.substr(colon + 1));
  }
  return out;
}

std::unique_ptr<AgentStarter> make_sim_starter(asio::io_context& io, StarterOptions o, AgentStarter::Events ev) {
  auto local = make_local_starter(io, ev, std::move(o.early_agent));
  return make_split_starter(std::move(local), std::make_unique<SimStarter>(io, std::move(ev)));
}

}  // namespace dl::remote
