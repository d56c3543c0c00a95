#pragma once
// A command running on a remote host over one ssh channel: its stdin is ours
// to write (the job token travels here, never on a command line) and stays
// open until close_stdin() (dlaunch-agent reads EOF on stdin as "launcher
// gone"); its stdout and stderr come back separately; its exit status when it
// ends. Used by one thread at a time, like the Session that made it, which must
// outlive it.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

struct ssh_channel_struct;

namespace dl::ssh {

class RemoteProcess {
 public:
  RemoteProcess(ssh_channel_struct* channel, std::string host);
  ~RemoteProcess();  // closes the channel; the remote sshd hangs up the command
  RemoteProcess(const RemoteProcess&) = delete;
  RemoteProcess& operator=(const RemoteProcess&) = delete;

  // Writes all of `bytes` to the command's stdin. Throws RemoteError naming
  // the host if the channel is closed.
  void write_stdin(std::string_view bytes);
  // Sends EOF on the command's stdin.
  void close_stdin();

  // Moves whatever stdout/stderr arrives within `timeout` into out()/err().
  // Returns false once both streams reached EOF (the command ended); then
  // exit_status() is set.
  bool poll_output(std::chrono::milliseconds timeout);

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
  struct Hooks;  // libssh channel callbacks (they catch exit-signal)
  ssh_channel_struct* ch_;
  std::unique_ptr<Hooks> hooks_;
  std::string host_, out_, err_;
  std::optional<int> status_;
};

}  // namespace dl::ssh
