#pragma once
// One remote command over ssh, driven by an io_context instead of a thread:
// connect (asio's resolver, a non-blocking connect), the ssh handshake, the
// channel, the stdin payload, then its output and its end, each step run
// when the session's socket is ready. Many AsyncExecs share one thread, and a
// command that sleeps costs nothing: the loop waits on its socket.
//
// Threading: everything, the callbacks included, runs on the io_context's
// thread; create, start and close an AsyncExec there (or before it runs).
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "errors/error.h"

#include "remote/ssh/session.h"

namespace dl::ssh {

class AsyncExec : public std::enable_shared_from_this<AsyncExec> {
 public:
  struct Hooks {
    // The handshake is done: returns the command to run (the caller may use
    // the session's addresses in it) and sets `payload` for its stdin.
    std::function<std::string(const Session& s, std::string* payload)> command;
    // It could not connect, authenticate or start the command: one line
    // naming the host (a dl::Error's text) and its kind. Called at most once,
    // and then no other hook is.
    std::function<void(const std::string& why, ErrorKind kind)> failed;
    // Bytes of the command's stderr as they arrive.
    std::function<void(std::string_view bytes)> err;
    // The command ended: 128+N for a signal N, 255 when the connection was
    // lost. Its stderr is all in err() by then.
    std::function<void(int status)> ended;
  };

  // REQUIRES: every hook is set.
  static std::shared_ptr<AsyncExec> create(boost::asio::io_context& io, Target target, Options options, Hooks hooks);
  ~AsyncExec();

  // Starts connecting; options.connect_timeout bounds everything up to the
  // command's start (resolve, connect, handshake, channel).
  void start();
  // No more hooks from now on; the channel and the connection are closed
  // without blocking (the remote sshd then hangs the command up: its stdin
  // reaches EOF). Idempotent.
  void close();
  // All of the command's stderr so far.
  const std::string& err() const { return err_; }

 private:
  // Only moves forward.
  enum class State { kIdle, kResolving, kConnecting, kHandshake, kOpening, kRunning, kDone };
  AsyncExec(boost::asio::io_context& io, Target target, Options options, Hooks hooks);
  void begin();
  void on_resolved(const boost::system::error_code& ec, boost::asio::ip::tcp::resolver::results_type r);
  void connect_next();
  void on_deadline();
  void step();
  void run_step();
  void wait();
  void fail(const std::string& why, ErrorKind kind);
  void release();

  boost::asio::io_context& io_;
  Target target_;
  Options options_;
  Hooks hooks_;
  State state_ = State::kIdle;
  std::unique_ptr<Session> session_;
  std::unique_ptr<RemoteProcess> proc_;
  boost::asio::ip::tcp::resolver resolver_;
  std::vector<boost::asio::ip::tcp::endpoint> endpoints_;
  size_t next_endpoint_ = 0;
  int connect_errno_ = 0;
  boost::asio::ip::tcp::socket socket_;                            // while connecting
  std::unique_ptr<boost::asio::posix::stream_descriptor> watch_;  // the session's socket, not owned
  bool reading_ = false, writing_ = false;
  boost::asio::steady_timer deadline_;
  std::string payload_, err_;
  size_t err_seen_ = 0;
};

}  // namespace dl::ssh
