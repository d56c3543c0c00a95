#pragma once
// A command running on a remote host over one ssh channel: its stdin is ours
// to write (the job token travels here, never on a command line) and stays
// open until close_stdin() (dlaunch-agent reads EOF on stdin as "launcher
// gone"); its stdout and stderr come back separately; its exit status when it
// ends. Used by one thread at a time, like the Session that made it, which must
// outlive it. Blocking sessions use poll_output/wait; an event loop driving a
// non-blocking session calls advance_open() and then drain() whenever the
// session's socket is ready.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

struct ssh_channel_struct;

namespace dl::ssh {

class RemoteProcess {
 public:
  // `channel` is new (not opened); advance_open() opens it and runs `command`.
  RemoteProcess(ssh_channel_struct* channel, std::string host, std::string command);
  ~RemoteProcess();  // closes the channel; the remote sshd hangs up the command
  RemoteProcess(const RemoteProcess&) = delete;
  RemoteProcess& operator=(const RemoteProcess&) = delete;

  // One step of opening the channel and starting the command: true once it
  // runs, false to be called again when the socket is ready. Throws
  // RemoteError naming the host when the server refuses.
  bool advance_open();

  // Writes all of `bytes` to the command's stdin. Throws RemoteError naming
  // the host if the channel is closed.
  void write_stdin(std::string_view bytes);
  // The payload a command reads first (the agent's token): as write_stdin,
  // but a channel already closed is no error. A command that cannot start
  // (not installed there) may exit, and close the channel, before the
  // payload is written; its exit status and stderr then say why.
  void offer_stdin(std::string_view bytes);
  // Sends EOF on the command's stdin.
  void close_stdin();

  // Waits up to `timeout` for stdout/stderr and returns as soon as some has
  // arrived, moved into out()/err() (true: the wait ended early). Returns false once both streams reached EOF (the command ended); then
  // exit_status() is set.
  bool poll_output(std::chrono::milliseconds timeout);

  // Non-blocking: moves what has arrived into out()/err(). Returns false once
  // the command ended (both streams at EOF and its status in, or the
  // connection lost: status 255); then exit_status() is set.
  bool drain();

  // Reads all output until the command ends, then returns its exit status
  // (128+N for a signal N, as a shell reports it). Throws TimeoutError naming
  // the host if it has not ended within `timeout`.
  int wait(std::chrono::milliseconds timeout);

  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }
  // Set once the command ended and its status arrived.
  std::optional<int> exit_status() const { return status_; }

 private:
  void collect_status();
  bool read_available();
  struct Hooks;  // libssh channel callbacks (they catch exit-signal)
  enum class Open { kChannel, kExec, kRunning };  // only moves forward
  ssh_channel_struct* ch_;
  std::unique_ptr<Hooks> hooks_;
  Open open_ = Open::kChannel;
  std::string host_, command_, out_, err_;
  std::optional<int> status_;
};

}  // namespace dl::ssh
