#pragma once
// One framed control connection, the same code at both ends: the launcher's
// control server holds one per agent, each agent holds one to its launcher.
// It owns what every such connection needs and nobody should write twice:
//   - reading frames (wire/frame.h) with the protocol's size limit;
//   - the server side of the token handshake, with its deadline, so a peer
//     that never authenticates holds nothing open;
//   - a send queue with byte accounting for backpressure: a producer (the
//     agent's output reads) asks congested() and waits for `drained`;
//   - heartbeats: one every interval, and the connection closes itself with
//     the owner's words when nothing has arrived for the timeout.
// Every callback runs on the io_context's thread; `closed` runs exactly once.
#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "control/messages.h"
#include "wire/admission.h"
#include "wire/frame.h"
#include "wire/handshake.h"

namespace dl::control {

namespace asio = boost::asio;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Clock = std::chrono::steady_clock;
  // Output producers pause above this many queued bytes and resume below the second.
  static constexpr size_t kPauseAbove = 8u << 20;
  static constexpr size_t kResumeBelow = 2u << 20;

  struct Callbacks {
    std::function<void(wire::Frame& f)> frame;                          // an authenticated frame
    std::function<void(const std::string& why, bool authenticated)> closed;  // once
    std::function<void()> drained;  // the queue fell below kResumeBelow
  };

  // `sock` is a TCP connection, or a local agent's socketpair (AF_UNIX).
  Connection(asio::generic::stream_protocol::socket sock, size_t max_frame, Callbacks cb = {});
  // Before start: the callbacks (they may capture a weak pointer to this).
  void set_callbacks(Callbacks cb) { cb_ = std::move(cb); }

  // Server side: the peer must pass the token handshake (it speaks first)
  // within `deadline`, else the connection closes with "no handshake within N s".
  // `slot` (wire/admission.h) is held until then, or until the connection closes.
  void start_server(const std::string& token, std::string_view tag, std::chrono::milliseconds deadline,
                    wire::PreAuthSlot slot = {});
  // The socket is already authenticated (the agent's blocking client
  // handshake, or a socketpair between the launcher and its local agent).
  void start();

  void send(std::string frame);
  template <class M> void send_message(const M& m) { send(control::frame(m)); }
  size_t queued_bytes() const { return queued_; }
  bool congested() const { return queued_ > kPauseAbove; }

  // Sends a heartbeat every `interval` unless another frame went out since
  // the last beat (any frame tells the peer we live); closes with
  // `silence_why` once nothing has arrived for `timeout` (0: never; counted
  // from this call at the earliest), checked at that moment, not at the
  // next beat. Not when bytes from the peer wait unread, nor when that
  // check itself ran half a timeout late (this end's own loop was held up):
  // then the peer's silence counts afresh. The beats keep a fixed cadence from
  // this call (no drift), so connections started together (the launcher's,
  // one per agent) wake together: one wake-up per interval, not one per agent.
  void start_heartbeats(std::chrono::milliseconds interval, std::chrono::milliseconds timeout, std::string silence_why);
  void stop_heartbeats();
  // Runs `fn` once the queue is empty (now, if it is); one waiter at a time.
  void when_flushed(std::function<void()> fn);
  // Stops reading; what is queued still goes out.
  void shutdown_receive();
  // Backpressure from this end: no more bytes are read from the peer until
  // resume_reading() (frames already read are still handed out), so that its
  // sends back up. The peer's silence is not counted meanwhile: holding its
  // bytes unread is our doing.
  void hold_reading();
  void resume_reading();
  // The peer is stopped on purpose (Ctrl-Z on dlaunch): its silence is not
  // counted until resume_silence(), which counts it afresh from then.
  void pause_silence() { silence_paused_ = true; }
  void resume_silence();
  // Closes the socket and calls `closed(why)` (once; later calls do nothing).
  void close(const std::string& why);

  // The socket, for what the owner asks the kernel of it (its addresses).
  int native_handle() { return sock_.native_handle(); }

  bool is_open() const { return life_ != Life::kClosed; }
  // The peer proved the token (or needed not) and the connection is open.
  bool authenticated() const { return life_ == Life::kOpen; }
  Clock::time_point last_rx() const { return last_rx_; }

 private:
  void read();
  void on_handshake_frame(const wire::Frame& f);
  void write_next();
  void beat();

  asio::generic::stream_protocol::socket sock_;
  wire::FrameParser parser_;
  Callbacks cb_;
  std::optional<wire::ServerHandshake> hs_;
  wire::PreAuthSlot slot_;  // held until the handshake passes or the connection closes
  asio::steady_timer hs_deadline_, hb_timer_;
  std::array<char, 65536> buf_{};
  std::deque<std::string> txq_;
  size_t queued_ = 0;
  // Its life: the peer proves the token (server side), frames flow, it is closed.
  enum class Life { kHandshaking, kOpen, kClosed };
  // Reading from the peer: on, held by this end (backpressure), or stopped for good.
  enum class Reading { kOn, kHeld, kStopped };
  Life life_ = Life::kHandshaking;
  Reading reading_ = Reading::kOn;
  bool read_pending_ = false;  // an async read is in flight
  bool writing_ = false;       // an async write is in flight
  bool paused_ = false;        // above kPauseAbove since the last `drained`
  bool silence_paused_ = false;
  std::function<void()> flushed_;
  std::chrono::milliseconds hb_interval_{0}, hb_timeout_{0};
  std::string silence_why_;
  Clock::time_point last_rx_ = Clock::now();
  Clock::time_point next_beat_{};
  bool sent_since_beat_ = false;  // a frame went out since the last beat
  // For the words of a silence: frames from the peer since start_heartbeats, and when the last came.
  uint64_t frames_since_hb_ = 0;
  Clock::time_point last_frame_{};
  std::string silence_details(Clock::time_point now);
  std::string tcp_details();
};

// A connection that speaks for a node once its first frame says which (an
// agent's hello), at the launcher's control port and a tree agent's relay
// port alike: `frame` gets each frame with the node (-1 until it sets it),
// `closed` the node when the connection closes (once), `drained` the
// queue's fall below kResumeBelow. Not started: the caller runs the
// handshake (start_server) or not (start).
using NodeFrame = std::function<void(const std::shared_ptr<Connection>& c, int& node, wire::Frame& f)>;
using NodeClosed = std::function<void(const std::shared_ptr<Connection>& c, int node, const std::string& why,
                                      bool authenticated)>;
std::shared_ptr<Connection> node_connection(asio::generic::stream_protocol::socket sock, NodeFrame frame,
                                            NodeClosed closed, std::function<void()> drained = {});

}  // namespace dl::control
