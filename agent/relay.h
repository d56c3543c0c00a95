#pragma once
// An agent's part in the launch tree (docs/design.md "The launch tree"):
// told by a StartAgents message, it starts agents on other hosts with the
// launcher's start method and options, accepts their control connections
// on a port of its own (the job token's handshake, as the launcher's
// control port does), and relays between them and its own link upward:
//   up:   each child's frames wrapped as kRouted frames of its node; frames
//         already wrapped (from beneath the child) passed on unchanged, once
//         checked to come from that child's subtree; heartbeats dropped
//         (this agent watches its children's silence itself); the ranks'
//         `started` counted, and the count sent up as one started_below
//         at most kStartedHold after the first (and before any other frame
//         sent up), so the launcher can count an attempt's ranks started
//         without a frame per rank; the hellos
//         and clean exits of the hosts beneath gathered and sent in one
//         write once every host beneath has said its hello (or its last
//         clean exit), or kGatherHold after the first, and always before
//         any other frame, so that the order of frames is kept; so are
//         their answers to a stack dump, until every host beneath answered;
//   down: a routed frame for a child unwrapped and sent to it, one for a
//         node beneath a child passed to that child, a broadcast
//         (kEveryNode) to every child.
// A child that cannot be started is reported (AgentFailed); a child lost
// after its hello is reported with every node beneath it (AgentLost).
// Upward backpressure holds the children's reading, as output does; a
// child that does not take what is sent to it holds the reading from the
// parent, so no queue here grows on a child's or a rank's say-so.
#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "control/acceptor.h"
#include "control/connection.h"
#include "control/messages.h"
#include "control/protocol.h"

namespace dl::remote { class AgentStarter; }

namespace dl::agent {

class Relay {
 public:
  struct Hooks {
    std::function<void(std::string frame)> up;  // onto this agent's link to its parent
    std::function<bool()> up_congested;
    std::function<void()> idle;                 // the last child's connection closed
    // Downward backpressure: a child's connection has more queued than
    // control::Connection::kPauseAbove, so reading from the parent stops
    // (hold) until every child's queue drained (resume).
    std::function<void(bool hold)> hold_parent;
    std::function<void(const std::string& line)> say;  // to this agent's stderr
  };
  Relay(boost::asio::io_context& io, std::string token, std::string own_host, Hooks hooks);
  ~Relay();

  // Starts m.agents' direct children, each told to connect to this agent's
  // port, which is opened on `bind_addr` at the first call. When that port
  // or the start method cannot be had, each child is reported failed
  // (agent_failed). Throws ProtocolError for a malformed list.
  void start_agents(const control::msg::StartAgents& m, const std::string& bind_addr);
  // A kRouted frame from the parent (`raw`: the whole frame): towards its
  // node. A broadcast goes to every child; the caller takes its inner frame
  // itself too.
  void down(const control::RoutedChunk& c, std::string raw);
  // Heartbeats with every child, now and for children that connect later.
  void heartbeats(std::chrono::milliseconds interval, std::chrono::milliseconds timeout);
  // The job is over (bye): children closing from now on are leaving, not lost.
  void closing() { closing_ = true; }
  // The parent's link drained: read the children again.
  void resume();
  // No child's connection is open (nor being started).
  bool idle() const;
  // Closes every child's connection and stops starting any: they kill
  // their ranks and exit.
  void stop();

 private:
  struct Child {
    control::msg::TreeAgent me;
    std::vector<control::msg::TreeAgent> below;  // its subtree, in StartAgents order
    std::shared_ptr<control::Connection> conn;   // once it said hello
    std::string reach;                           // its address, as its start method reached it
    bool starting = false;
  };
  void accepted(control::ControlAcceptor::Socket sock, wire::PreAuthSlot slot);
  void on_frame(const std::shared_ptr<control::Connection>& c, int& node, wire::Frame& f);
  void on_hello(const std::shared_ptr<control::Connection>& c, int& node, wire::Frame& f);
  void on_closed(int node, const std::string& why);
  void make_starter(const control::msg::StartAgents& m);
  void start_child(Child& child);
  void lost(const Child& child, const std::string& why);
  void check_idle();
  // Upward: `frame` of `node` (beneath), held while `wait` says it may be.
  enum class Wait { kNo, kHello, kExit, kLastExit, kStacks };
  static Wait may_wait(uint8_t type, std::string_view payload);
  void up(std::string frame, Wait wait, int node);
  void release();
  // The children's started ranks: counted, and sent up as one started_below.
  void count_started(int count);
  void flush_started();

  boost::asio::io_context& io_;
  std::string token_, own_host_;
  Hooks hooks_;
  control::ControlAcceptor acceptor_;
  std::string bind_addr_;
  uint16_t port_ = 0;
  control::msg::StartAgents how_;  // the launcher's method and options (its agents list unused)
  std::unique_ptr<remote::AgentStarter> starter_;
  std::map<int, Child> children_;  // by node
  std::map<int, int> via_;         // every node beneath this agent -> the child it is under (or is)
  void check_children_drained();
  bool held_ = false, parent_held_ = false, closing_ = false, stopped_ = false;
  std::chrono::milliseconds hb_interval_{0}, hb_timeout_{0};
  std::string gathered_;                  // held frames, whole, in order
  // The nodes beneath whose hello / last clean exit / stacks came.
  std::set<int> hello_from_, last_from_, stacks_from_;
  boost::asio::steady_timer gather_timer_;
  int started_ = 0;  // ranks beneath whose start is not yet sent up
  boost::asio::steady_timer started_timer_;

 public:
  // The longest a started rank's count waits here for others: short beside
  // a start (a restart's line says how long its ranks took to run again),
  // long beside a burst of a subtree's `started` frames.
  static constexpr std::chrono::milliseconds kStartedHold{10};
};

}  // namespace dl::agent
