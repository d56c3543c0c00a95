#include "control/connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "control/protocol.h"
#include "errors/error.h"

namespace dl::control {

using std::chrono::milliseconds;

Connection::Connection(asio::generic::stream_protocol::socket sock, size_t max_frame, Callbacks cb)
    : sock_(std::move(sock)), parser_(max_frame), cb_(std::move(cb)), hs_deadline_(sock_.get_executor()),
      hb_timer_(sock_.get_executor()) {}

void Connection::start_server(const std::string& token, std::string_view tag, milliseconds deadline,
                              wire::PreAuthSlot slot) {
  slot_ = std::move(slot);
  hs_.emplace(token, std::string(tag));
  hs_deadline_.expires_after(deadline);
  hs_deadline_.async_wait([w = weak_from_this(), deadline](boost::system::error_code ec) {
    auto self = w.lock();
    if (ec || !self || self->life_ != Life::kHandshaking) return;
    self->close("no handshake within " + std::to_string(deadline.count() / 1000) + " s");
  });
  read();
}

void Connection::start() {
  life_ = Life::kOpen;
  read();
}

void Connection::read() {
  read_pending_ = true;
  sock_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
    self->read_pending_ = false;
    if (self->life_ == Life::kClosed || self->reading_ == Reading::kStopped) return;
    if (ec) return self->close(ec == asio::error::eof ? "connection closed" : ec.message());
    self->last_rx_ = Clock::now();
    try {
      self->parser_.feed(self->buf_.data(), n);
      while (auto f = self->parser_.next()) {
        if (self->life_ == Life::kClosed) return;
        if (self->life_ == Life::kHandshaking) {
          self->on_handshake_frame(*f);
          continue;
        }
        ++self->frames_since_hb_, self->last_frame_ = Clock::now();
        self->cb_.frame(*f);
      }
    } catch (const std::exception& e) {
      return self->close(std::string("protocol error: ") + e.what());
    }
    if (self->life_ != Life::kClosed && self->reading_ == Reading::kOn) self->read();
  });
}

void Connection::hold_reading() {
  if (reading_ == Reading::kOn) reading_ = Reading::kHeld;
}

void Connection::resume_silence() {
  silence_paused_ = false;
  last_rx_ = Clock::now();
}

void Connection::resume_reading() {
  if (reading_ != Reading::kHeld) return;
  reading_ = Reading::kOn;
  last_rx_ = Clock::now();  // its silence counts from now
  if (!read_pending_ && life_ != Life::kClosed) read();
}

// The server's half of wire/handshake.h: hello -> answer, then proof.
void Connection::on_handshake_frame(const wire::Frame& f) {
  if (f.type == wire::kErrorText) return close("the peer says: " + f.payload);
  if (f.type != wire::kHandshake || !hs_) return close("no handshake");
  if (!hs_->answered()) {
    auto answer = hs_->answer(f.payload);
    if (!answer) return close(hs_->error());
    send(wire::encode_frame(wire::kHandshake, *answer));
    return;
  }
  if (!hs_->verify(f.payload)) return close(hs_->error());
  life_ = Life::kOpen;
  slot_.release();
  hs_deadline_.cancel();
}

namespace {
// Frames gathered into one write at most (Asio hands a socket at most 64
// buffers per system call).
constexpr size_t kMaxFramesPerWrite = 64;
}  // namespace

void Connection::send(std::string frame) {
  if (life_ == Life::kClosed) return;
  queued_ += frame.size();
  sent_since_beat_ = true;
  txq_.push_back(std::move(frame));
  if (queued_ > kPauseAbove) paused_ = true;
  if (!writing_) write_next();
}

void Connection::write_next() {
  if (txq_.empty() || life_ == Life::kClosed) {
    writing_ = false;
    if (flushed_) std::exchange(flushed_, nullptr)();
    return;
  }
  writing_ = true;
  // Every frame queued so far goes out in one gathered write (one sendmsg):
  // an agent reporting 64 ranks started, or their exits, queues 64 frames
  // while the first write is out, and they leave together.
  std::vector<asio::const_buffer> bufs;
  const size_t n = std::min(txq_.size(), kMaxFramesPerWrite);
  bufs.reserve(n);
  for (size_t i = 0; i < n; ++i) bufs.push_back(asio::buffer(txq_[i]));
  asio::async_write(sock_, bufs, [self = shared_from_this(), n](boost::system::error_code ec, size_t) {
    if (self->life_ == Life::kClosed) return;
    if (ec) {
      self->writing_ = false;
      return self->close("writing failed: " + ec.message());
    }
    for (size_t i = 0; i < n; ++i) {
      self->queued_ -= self->txq_.front().size();
      self->txq_.pop_front();
    }
    if (self->paused_ && self->queued_ < kResumeBelow) {
      self->paused_ = false;
      if (self->cb_.drained) self->cb_.drained();
    }
    self->write_next();
  });
}

void Connection::when_flushed(std::function<void()> fn) {
  if (!writing_ && txq_.empty()) return fn();
  flushed_ = std::move(fn);
}

void Connection::start_heartbeats(milliseconds interval, milliseconds timeout, std::string silence_why) {
  hb_interval_ = interval, hb_timeout_ = timeout, silence_why_ = std::move(silence_why);
  // The peer's silence counts from now: it cannot have been beating before
  // (an agent beats from its launch message on; the launcher starts these
  // when the last agent connected, maybe long after the first one said hello).
  last_rx_ = Clock::now();
  next_beat_ = last_rx_ + interval;
  sent_since_beat_ = false;
  frames_since_hb_ = 0;
  beat();
}

void Connection::stop_heartbeats() {
  hb_interval_ = milliseconds(0);
  hb_timer_.cancel();
}

// Wakes at the next beat, or sooner when the peer's silence would reach the
// timeout before it; a wake with a frame sent since the last beat sends none.
void Connection::beat() {
  if (hb_interval_.count() <= 0 || life_ == Life::kClosed) return;
  auto wake = next_beat_;
  if (hb_timeout_.count() > 0) wake = std::min(wake, last_rx_ + hb_timeout_);
  hb_timer_.expires_at(wake);
  hb_timer_.async_wait([w = weak_from_this()](boost::system::error_code ec) {
    auto self = w.lock();
    if (ec || !self || self->life_ == Life::kClosed || self->hb_interval_.count() <= 0) return;
    const auto now = Clock::now();
    if (self->reading_ == Reading::kHeld || self->silence_paused_) self->last_rx_ = now;  // not its silence: our choice
    if (self->hb_timeout_.count() > 0 && now - self->last_rx_ >= self->hb_timeout_) {
      // Silence is judged only when this end was listening. Bytes waiting
      // unread mean the peer spoke and our loop has not read them yet; a
      // wake this late (half the timeout or more) means our own loop was
      // held up, by a stopped process, swap or a starved CPU, for much of
      // the silence: either way the peer gets a full timeout from now
      // rather than being declared lost for our stall.
      int unread = 0;
      const bool spoke = ::ioctl(self->sock_.native_handle(), FIONREAD, &unread) == 0 && unread > 0;
      if (!spoke && now - self->hb_timer_.expiry() < self->hb_timeout_ / 2)
        return self->close(self->silence_why_ + self->silence_details(now));
      self->last_rx_ = now;
    }
    if (now >= self->next_beat_) {
      if (!self->sent_since_beat_) self->send_message(msg::Heartbeat{});
      self->sent_since_beat_ = false;
      // The next point of the cadence still ahead (a stalled loop skips the missed ones).
      while (self->next_beat_ <= now) self->next_beat_ += self->hb_interval_;
    }
    self->beat();
  });
}

// "; 3 frames came from it since the heartbeats started, the last 10.4 s
// ago; 212 bytes to it are not sent yet": which side went quiet, and whether
// our own sends were stuck too.
std::string Connection::silence_details(Clock::time_point now) {
  std::string d;
  if (frames_since_hb_ == 0) {
    d = "; nothing came from it since the heartbeats started";
  } else {
    const auto ago = std::chrono::duration_cast<milliseconds>(now - last_frame_).count();
    d = "; " + std::to_string(frames_since_hb_) + " frame" + (frames_since_hb_ == 1 ? "" : "s") +
        " came from it since the heartbeats started, the last " + std::to_string(ago / 1000) + "." +
        std::to_string(ago % 1000 / 100) + " s ago";
  }
  if (queued_ > 0) d += "; " + std::to_string(queued_) + " bytes to it are not sent yet";
  return d + tcp_details();
}

// Over TCP, what the kernel knows of the other side: whether what we sent
// was acknowledged (its host and the network are up, so its program went
// quiet) or is being retransmitted (packets to it are lost, or its host is
// down). "" for a socketpair, or when the kernel cannot say.
std::string Connection::tcp_details() {
  tcp_info ti{};
  socklen_t len = sizeof ti;
  if (::getsockopt(sock_.native_handle(), IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
      len < offsetof(tcp_info, tcpi_total_retrans) + sizeof ti.tcpi_total_retrans)
    return "";
  if (ti.tcpi_unacked == 0)
    return "; its host acknowledged everything sent to it (the network and its kernel are up: the program "
           "itself went quiet)";
  return "; " + std::to_string(ti.tcpi_unacked) + " TCP segment" + (ti.tcpi_unacked == 1 ? "" : "s") +
         " sent to it unacknowledged, retransmitted " + std::to_string(ti.tcpi_total_retrans) +
         " times (packets to it are lost, or its host is down)";
}

void Connection::shutdown_receive() {
  reading_ = Reading::kStopped;
  boost::system::error_code ec;
  sock_.shutdown(asio::socket_base::shutdown_receive, ec);
}

void Connection::close(const std::string& why) {
  if (life_ == Life::kClosed) return;
  const bool authenticated = life_ == Life::kOpen;
  life_ = Life::kClosed;
  slot_.release();
  hs_deadline_.cancel();
  hb_timer_.cancel();
  boost::system::error_code ec;
  sock_.close(ec);
  txq_.clear();
  queued_ = 0;
  flushed_ = nullptr;
  if (cb_.closed) cb_.closed(why, authenticated);
}

std::shared_ptr<Connection> node_connection(asio::generic::stream_protocol::socket sock, NodeFrame frame,
                                            NodeClosed closed, std::function<void()> drained) {
  auto node = std::make_shared<int>(-1);
  auto conn = std::make_shared<Connection>(std::move(sock), kMaxControlFrame);
  std::weak_ptr<Connection> w = conn;
  Connection::Callbacks cb;
  cb.frame = [w, node, frame = std::move(frame)](wire::Frame& f) {
    if (auto c = w.lock()) frame(c, *node, f);
  };
  cb.closed = [w, node, closed = std::move(closed)](const std::string& why, bool authenticated) {
    closed(w.lock(), *node, why, authenticated);
  };
  cb.drained = std::move(drained);
  conn->set_callbacks(std::move(cb));
  return conn;
}

}  // namespace dl::control
