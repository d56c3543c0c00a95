#include "agent/relay.h"

#include "control/tree_words.h"
#include "errors/error.h"
#include "remote/agent_starter.h"
#include "remote/ssh/tcp_connect.h"
#include "remote/start_method.h"
#include "wire/admission.h"

namespace dl::agent {

namespace msg = control::msg;
using control::Connection;

namespace {
// What a child's heartbeat looks like on the wire, to drop it unparsed.
const std::string& heartbeat_text() {
  static const std::string t = control::encode(msg::Heartbeat{});
  return t;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// A rank's `started` of a child: counted here, not passed up (at 1,024 hosts
// x 8 a frame per rank was half of what reached the launcher).
bool is_started(std::string_view json) { return starts_with(json, "{\"t\":\"started\""); }
bool is_started_below(std::string_view json) { return starts_with(json, "{\"t\":\"started_below\""); }

// The most ranks one started_below may count: more than a subtree can hold
// is a peer's error, not a number to add up.
constexpr int kMostStarted = 1 << 24;

// The longest a hello, clean exit or stack dump of a host beneath waits here
// for the others: the launcher needs every hello before it launches, every
// host's stacks before it reports them, and a clean exit changes nothing it
// does until the last rank ends, so waiting costs a job nothing, while each
// write up wakes the launcher (at 1,024 hosts its wake-ups were most of its
// CPU). Bounded, so that what the launcher says of hosts that never
// connected, or of ranks still running, is at most this stale.
constexpr std::chrono::milliseconds kGatherHold{500};
// Held frames are sent once they are this many bytes, whatever is missing.
constexpr size_t kGatherBytes = 256 * 1024;
}  // namespace

Relay::Relay(boost::asio::io_context& io, std::string token, std::string own_host, Hooks hooks)
    : io_(io), token_(std::move(token)), own_host_(std::move(own_host)), hooks_(std::move(hooks)),
      acceptor_(io, control::ControlAcceptor::Hooks{
                        [this](control::ControlAcceptor::Socket s, wire::PreAuthSlot slot) {
                          accepted(std::move(s), std::move(slot));
                        },
                        [this](const std::string& line) { hooks_.say("relay port: " + line); }}),
      gather_timer_(io), started_timer_(io) {}

Relay::~Relay() { stop(); }

void Relay::start_agents(const msg::StartAgents& m, const std::string& bind_addr) {
  if (stopped_) return;
  // The list first, whole: a malformed one starts nothing.
  std::vector<Child> fresh;
  for (size_t i = 0; i < m.agents.size();) {
    const auto& a = m.agents[i];
    const size_t end = i + 1 + static_cast<size_t>(a.below);
    if (a.below < 0 || end > m.agents.size())
      throw control::ProtocolError("'start_agents' message: field 'agents[" + std::to_string(i) +
                                   "].below' runs past the end of the list");
    Child c;
    c.me = a;
    c.below.assign(m.agents.begin() + static_cast<long>(i) + 1, m.agents.begin() + static_cast<long>(end));
    fresh.push_back(std::move(c));
    i = end;
  }
  how_ = m;
  how_.agents.clear();
  try {
    if (!port_) {
      bind_addr_ = bind_addr;
      port_ = acceptor_.listen(bind_addr);
    }
    if (!starter_) make_starter(m);
  } catch (const std::exception& e) {
    // Nothing can be started from here: each child is reported (the hosts
    // beneath them go with them, the launcher knows which).
    for (const auto& c : fresh)
      hooks_.up(control::frame(
          msg::AgentFailed{c.me.node, "the agent on " + own_host_ + " could not start agents: " + e.what()}));
    return;
  }
  for (auto& c : fresh) {
    const int node = c.me.node;
    if (auto it = children_.find(node);
        it != children_.end() && (it->second.starting || (it->second.conn && it->second.conn->is_open())))
      continue;  // already on its way, or up
    via_[node] = node;
    for (const auto& b : c.below) via_[b.node] = node;
    Child& child = children_[node] = std::move(c);
    start_child(child);
  }
}

void Relay::make_starter(const msg::StartAgents& m) {
  const auto method = remote::start_method_named(m.method);
  if (!method) throw control::ProtocolError("'start_agents' message: start method '" + m.method + "' is not one this agent has");
  remote::StarterOptions so;
  so.ssh_parallel = m.ssh_parallel;
  so.ssh_timeout = std::chrono::milliseconds(m.ssh_timeout_ms);
  so.ssh_config = m.ssh_config;
  so.ssh_accept_new = m.ssh_accept_new;
  so.prefix = m.prefix;
  so.launcher_exec = m.launcher_exec;
  remote::AgentStarter::Events ev;
  ev.failed = [this, method](int node, std::string why) {
    auto it = children_.find(node);
    if (stopped_ || it == children_.end() || !it->second.starting) return;
    it->second.starting = false;
    // The flat launch worked where only dlaunch's host may reach the others:
    // say how to get it back.
    const std::string hint = remote::simulates_hosts(*method) ? ""
                             : "; if the hosts cannot reach one another over ssh, --fanout 0 starts every agent "
                               "from dlaunch's host";
    up(control::frame(msg::AgentFailed{node, why + " (started by the agent on " + own_host_ + ")" + hint}), Wait::kNo, node);
    check_idle();
  };
  ev.reached = [this](int node, std::string reach, std::string) {
    if (auto it = children_.find(node); it != children_.end()) it->second.reach = std::move(reach);
  };
  ev.agent_stderr = [this](int node, std::string text) {
    auto it = children_.find(node);
    hooks_.say("[agent@" + (it == children_.end() ? std::to_string(node) : it->second.me.host) + "] " + text);
  };
  ev.notice = [](std::string) {};
  starter_ = remote::make_agent_starter(*method, io_, std::move(so), std::move(ev));
}

void Relay::start_child(Child& child) {
  remote::AgentStartSpec spec;
  spec.node = child.me.node;
  spec.host = child.me.host, spec.user = child.me.user;
  spec.port = static_cast<uint16_t>(child.me.port);
  spec.control_port = std::to_string(port_);
  spec.control_addr = bind_addr_;
  spec.token = token_;
  spec.args.node = child.me.node;
  spec.args.gpus_per_node = how_.gpus_per_node;
  spec.args.detect_gpus = how_.detect_gpus;
  spec.args.prepare_pmix = how_.prepare_pmix;
  spec.args.cpu_topology = how_.cpu_topology;
  spec.args.parent = own_host_;
  child.starting = true;
  child.conn.reset();
  child.reach.clear();
  starter_->start(spec);
}

void Relay::accepted(control::ControlAcceptor::Socket sock, wire::PreAuthSlot slot) {
  if (stopped_) return;
  auto conn = control::node_connection(
      std::move(sock), [this](const std::shared_ptr<Connection>& c, int& node, wire::Frame& f) { on_frame(c, node, f); },
      [this](const std::shared_ptr<Connection>&, int node, const std::string& why, bool) {
        if (node >= 0) on_closed(node, why);
      },
      [this] { check_children_drained(); });
  conn->start_server(token_, control::kControlTag, wire::kPreAuthDeadline, std::move(slot));
}

void Relay::on_frame(const std::shared_ptr<Connection>& c, int& node, wire::Frame& f) {
  if (stopped_) return;
  if (node < 0) return on_hello(c, node, f);
  if (f.type == control::kRouted) {
    const auto r = control::parse_routed(f.payload);
    auto v = via_.find(static_cast<int>(r.node));
    if (r.node == control::kEveryNode || static_cast<int>(r.node) == node || v == via_.end() || v->second != node)
      throw RemoteError("relayed a frame of node " + std::to_string(r.node) + ", which is not beneath it");
    up(wire::encode_frame(control::kRouted, f.payload), may_wait(r.inner.type, r.inner.payload), static_cast<int>(r.node));
  } else if (f.type == wire::kJson && f.payload == heartbeat_text()) {
    return;  // this agent watches the child's silence itself
  } else if (f.type == wire::kJson && is_started(f.payload)) {
    return count_started(1);
  } else if (f.type == wire::kJson && is_started_below(f.payload)) {
    auto m = control::decode_from_agent(f.payload);
    const int count = std::get<msg::StartedBelow>(m).count;
    if (count <= 0 || count > kMostStarted)
      throw RemoteError("started_below of " + std::to_string(count) + " ranks, not 1 to " + std::to_string(kMostStarted));
    return count_started(count);
  } else {
    up(control::routed_frame(static_cast<uint32_t>(node), f.type, f.payload), may_wait(f.type, f.payload), node);
  }
  if (!held_ && hooks_.up_congested()) {
    held_ = true;
    for (auto& [n, child] : children_)
      if (child.conn) child.conn->hold_reading();
  }
}

void Relay::on_hello(const std::shared_ptr<Connection>& c, int& node, wire::Frame& f) {
  if (f.type != wire::kJson) throw RemoteError("expected hello");
  auto m = control::decode_from_agent(f.payload);
  auto* hello = std::get_if<msg::Hello>(&m);
  if (!hello) throw RemoteError("expected hello");
  auto it = children_.find(hello->node);
  if (it == children_.end() || !it->second.starting)
    throw RemoteError("agent claims node " + std::to_string(hello->node) + ", which this agent did not start");
  Child& child = it->second;
  child.starting = false;
  child.conn = c;
  node = hello->node;
  hello->reach = child.reach.empty() ? ssh::describe_socket(c->native_handle()).remote_address : child.reach;
  up(control::routed_frame(static_cast<uint32_t>(node), control::frame(*hello)), Wait::kHello, node);
  if (!child.below.empty()) {
    msg::StartAgents sub = how_;
    sub.self = child.me.host;
    sub.agents = child.below;
    c->send_message(sub);
  }
  starter_->connected(node);
  if (hb_interval_.count() > 0)
    c->start_heartbeats(hb_interval_, hb_timeout_,
                        "no heartbeat from the agent on " + child.me.host + " for " +
                            std::to_string(hb_timeout_.count() / 1000) + " s");
  if (held_) c->hold_reading();
}

void Relay::on_closed(int node, const std::string& why) {
  if (stopped_) return;
  auto it = children_.find(node);
  if (it == children_.end()) return;
  // A child leaving after the bye is done, not lost; the launcher learns
  // it from this agent's own connection closing.
  if (!(closing_ && why == "connection closed")) lost(it->second, why);
  check_children_drained();  // a congested child that is gone holds nothing up
  check_idle();
}

void Relay::lost(const Child& child, const std::string& why) {
  std::vector<std::string> beneath;
  for (const auto& b : child.below) beneath.push_back(b.host);
  up(control::frame(msg::AgentLost{
      child.me.node, control::lost_with_beneath("the agent on " + own_host_ + " that started it lost it: " + why, beneath)}),
     Wait::kNo, child.me.node);
  for (const auto& b : child.below)
    up(control::frame(msg::AgentLost{b.node, control::lost_with_relay(child.me.host, why)}), Wait::kNo, b.node);
}

void Relay::down(const control::RoutedChunk& c, std::string raw) {
  if (stopped_) return;
  if (c.node == control::kEveryNode) {
    for (auto& [n, child] : children_)
      if (child.conn && child.conn->is_open()) {
        child.conn->send(raw);
        if (!parent_held_ && child.conn->congested()) parent_held_ = true, hooks_.hold_parent(true);
      }
    return;
  }
  auto v = via_.find(static_cast<int>(c.node));
  if (v == via_.end()) return;
  Child& child = children_.at(v->second);
  if (!child.conn || !child.conn->is_open()) return;  // lost: said so already
  if (static_cast<int>(c.node) == child.me.node) child.conn->send(wire::encode_frame(c.inner.type, c.inner.payload));
  else child.conn->send(std::move(raw));
  if (!parent_held_ && child.conn->congested()) parent_held_ = true, hooks_.hold_parent(true);
}

Relay::Wait Relay::may_wait(uint8_t type, std::string_view payload) {
  if (type != wire::kJson) return Wait::kNo;
  if (starts_with(payload, "{\"t\":\"hello\"")) return Wait::kHello;
  if (starts_with(payload, "{\"t\":\"stacks\"")) return Wait::kStacks;
  if (!starts_with(payload, "{\"t\":\"exited_clean\"")) return Wait::kNo;
  // Decoded, not matched: the launcher decodes it anyway, and a malformed
  // one is its to refuse.
  try {
    auto m = control::decode_from_agent(payload);
    if (auto* x = std::get_if<msg::ExitedClean>(&m)) return x->last ? Wait::kLastExit : Wait::kExit;
  } catch (const control::ProtocolError&) {
  }
  return Wait::kNo;
}

void Relay::count_started(int count) {
  if (started_ > kMostStarted - count) flush_started();
  started_ += count;
  if (started_ != count) return;  // the hold is running
  started_timer_.expires_after(kStartedHold);
  started_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) flush_started();
  });
}

void Relay::flush_started() {
  if (started_ == 0) return;
  started_timer_.cancel();
  hooks_.up(control::frame(msg::StartedBelow{std::exchange(started_, 0)}));
}

void Relay::up(std::string frame, Wait wait, int node) {
  flush_started();  // a rank's start goes up before anything said after it
  if (wait == Wait::kNo) {
    release();
    return hooks_.up(std::move(frame));
  }
  gathered_ += frame;
  bool complete = false;
  if (wait == Wait::kHello) hello_from_.insert(node), complete = hello_from_.size() >= via_.size();
  if (wait == Wait::kLastExit) last_from_.insert(node), complete = last_from_.size() >= via_.size();
  if (wait == Wait::kStacks) stacks_from_.insert(node), complete = stacks_from_.size() >= via_.size();
  if (complete || gathered_.size() >= kGatherBytes) return release();
  if (gathered_.size() == frame.size()) {
    gather_timer_.expires_after(kGatherHold);
    gather_timer_.async_wait([this](boost::system::error_code ec) {
      if (!ec) release();
    });
  }
}

void Relay::release() {
  if (gathered_.empty()) return;
  gather_timer_.cancel();
  // A restart's exits are counted afresh once every host beneath said its last.
  if (last_from_.size() >= via_.size()) last_from_.clear();
  if (stacks_from_.size() >= via_.size()) stacks_from_.clear();  // the next dump's answers, likewise
  hooks_.up(std::exchange(gathered_, {}));
}

void Relay::check_children_drained() {
  if (!parent_held_) return;
  for (const auto& [n, child] : children_)
    if (child.conn && child.conn->is_open() && child.conn->congested()) return;
  parent_held_ = false;
  hooks_.hold_parent(false);
}

void Relay::heartbeats(std::chrono::milliseconds interval, std::chrono::milliseconds timeout) {
  hb_interval_ = interval, hb_timeout_ = timeout;
  for (auto& [n, child] : children_)
    if (child.conn && child.conn->is_open())
      child.conn->start_heartbeats(interval, timeout,
                                   "no heartbeat from the agent on " + child.me.host + " for " +
                                       std::to_string(timeout.count() / 1000) + " s");
}

void Relay::resume() {
  if (!held_) return;
  held_ = false;
  for (auto& [n, child] : children_)
    if (child.conn) child.conn->resume_reading();
}

bool Relay::idle() const {
  for (const auto& [n, child] : children_)
    if (child.starting || (child.conn && child.conn->is_open())) return false;
  return true;
}

void Relay::check_idle() {
  if (idle() && hooks_.idle) hooks_.idle();
}

void Relay::stop() {
  if (stopped_) return;
  stopped_ = true;
  acceptor_.stop();
  for (auto& [n, child] : children_)
    if (child.conn) child.conn->close("the agent on " + own_host_ + " that relayed for it ended");
  if (starter_) starter_->stop(0);
}

}  // namespace dl::agent
