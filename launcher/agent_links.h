#pragma once
// The Job's side of its agents' connections, as an interface: the Job sends
// typed messages and frames to nodes and is handed what the agents say
// (Handler), and never sees a socket, a frame header or a JSON field.
// launcher/control_server.h is the real one (TCP and the local agent's
// socketpair, token handshake, heartbeats); the Job's transition tests
// (tests/launcher/job_transitions_test.cc) pass one that records what was
// sent and call the Handler directly.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "control/messages.h"
#include "control/protocol.h"
#include "remote/ssh/tcp_connect.h"

namespace dl::launcher {

class AgentLinks {
 public:
  // What the agents say. All calls come on the Job's io_context thread.
  struct Handler {
    virtual ~Handler() = default;
    // An authenticated agent says hello. Return "" to take it as node
    // m.node, else why it is refused (the connection is closed). A node
    // already greeted whose connection closed may say hello again.
    virtual std::string on_hello(const control::msg::Hello& m) = 0;
    // Anything after the hello, from node `node`. Throwing RemoteError
    // closes that connection (and on_closed reports it).
    virtual void on_message(int node, const control::FromAgent& m) = 0;
    virtual void on_output(int node, const control::DataChunk& c) = 0;
    virtual void on_fence(int node, uint64_t id, std::string_view blob) = 0;
    // Node `node`'s connection closed (after its hello), with why.
    virtual void on_closed(int node, const std::string& why) = 0;
    virtual void log(const std::string& line) = 0;
  };

  virtual ~AgentLinks() = default;
  // Listens on `bind_addr`, port 0; returns the port.
  virtual uint16_t listen(const std::string& bind_addr) = 0;
  virtual void stop_accepting() = 0;
  // Takes `fd`, the launcher's end of the local agent's socketpair.
  virtual void adopt(int fd) = 0;

  virtual void send(int node, std::string frame) = 0;
  virtual void broadcast_frame(const std::string& frame) = 0;
  template <class M> void send(int node, const M& m) { send(node, control::frame(m)); }
  template <class M> void broadcast(const M& m) { broadcast_frame(control::frame(m)); }

  // The launch tree (launcher/launch_tree.h): by node, the root whose
  // connection carries that node's traffic, relayed; -1: its own
  // connection; `hosts`: by node, its name in the job (the hostfile's),
  // which names the hosts lost with a root (not its agent's hello: the
  // agent's own host name, which the hostfile may not use). Before any
  // agent connects; not called for a flat launch.
  virtual void set_routes(std::vector<int> root_of, std::vector<std::string> hosts) = 0;
  // Whether node `node` has said hello and its connection is open.
  virtual bool connected(int node) const = 0;
  virtual bool any_open() const = 0;
  // The numeric addresses of node `node`'s TCP connection: remote_address the
  // agent's end, local_address ours; empty when not connected over TCP.
  virtual ssh::TcpConnection addresses(int node) const = 0;
  // Every connected node: a heartbeat each `interval`, lost after `timeout` of silence.
  virtual void start_heartbeats(std::chrono::milliseconds interval, std::chrono::milliseconds timeout) = 0;
  virtual void stop_heartbeats() = 0;
  // Output backpressure: the agents' connections are not read (their
  // silence not counted) from hold_reading() until resume_reading().
  virtual void hold_reading() = 0;
  virtual void resume_reading() = 0;
  // Bytes queued on the agents' connections, not yet handed to the kernel.
  virtual size_t queued_bytes() const = 0;
};

}  // namespace dl::launcher
