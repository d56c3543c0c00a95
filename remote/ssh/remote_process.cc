#include "remote/ssh/remote_process.h"

#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <signal.h>
#include <string.h>

#include <array>

#include "errors/error.h"

namespace dl::ssh {

namespace {
using Clock = std::chrono::steady_clock;

int signal_number(const char* name) {
  static const std::pair<const char*, int> kSignals[] = {
      {"ABRT", SIGABRT}, {"ALRM", SIGALRM}, {"FPE", SIGFPE},   {"HUP", SIGHUP},
      {"ILL", SIGILL},   {"INT", SIGINT},   {"KILL", SIGKILL}, {"PIPE", SIGPIPE},
      {"QUIT", SIGQUIT}, {"SEGV", SIGSEGV}, {"TERM", SIGTERM}, {"USR1", SIGUSR1},
      {"USR2", SIGUSR2}, {"BUS", SIGBUS}};
  for (auto [n, s] : kSignals)
    if (name && strcmp(n, name) == 0) return s;
  return 0;
}
}  // namespace

struct RemoteProcess::Hooks {
  ssh_channel_callbacks_struct cb{};
  int signal = 0;
};

RemoteProcess::RemoteProcess(ssh_channel_struct* channel, std::string host, std::string command)
    : ch_(channel), hooks_(std::make_unique<Hooks>()), host_(std::move(host)), command_(std::move(command)) {
  ssh_callbacks_init(&hooks_->cb);
  hooks_->cb.userdata = hooks_.get();
  hooks_->cb.channel_exit_signal_function = [](ssh_session, ssh_channel, const char* sig, int,
                                               const char*, const char*, void* user) {
    static_cast<Hooks*>(user)->signal = signal_number(sig);
  };
  ssh_set_channel_callbacks(ch_, &hooks_->cb);
}

RemoteProcess::~RemoteProcess() {
  if (ssh_channel_is_open(ch_)) ssh_channel_close(ch_);
  ssh_channel_free(ch_);
}

bool RemoteProcess::advance_open() {
  int rc = SSH_OK;
  if (open_ == Open::kChannel) {
    rc = ssh_channel_open_session(ch_);
    if (rc == SSH_OK) open_ = Open::kExec;
  }
  if (open_ == Open::kExec) {
    rc = ssh_channel_request_exec(ch_, command_.c_str());
    if (rc == SSH_OK) open_ = Open::kRunning;
  }
  if (rc == SSH_AGAIN) return false;
  if (rc != SSH_OK)
    throw RemoteError(host_ + ": the server refused to run a command: " + ssh_get_error(ssh_channel_get_session(ch_)) +
                      " (MaxSessions or ForceCommand in its sshd_config?)");
  return true;
}

// Reads what libssh holds or the socket has, without waiting; false when the
// connection broke.
bool RemoteProcess::read_available() {
  std::array<char, 16384> buf;
  for (int is_err = 0; is_err < 2; ++is_err) {
    int n;
    while ((n = ssh_channel_read_nonblocking(ch_, buf.data(), buf.size(), is_err)) > 0)
      (is_err ? err_ : out_).append(buf.data(), static_cast<size_t>(n));
    if (n == SSH_ERROR) return false;
  }
  return true;
}

bool RemoteProcess::drain() {
  if (status_) return false;
  if (!read_available() || ssh_channel_is_closed(ch_)) {
    collect_status();
    return false;
  }
  if (!ssh_channel_is_eof(ch_)) return true;
  // After EOF the exit status (or exit-signal, then the channel's close) is
  // still on its way: this call takes in what arrived, without waiting.
  if (ssh_channel_get_exit_status(ch_) < 0 && hooks_->signal == 0 && !ssh_channel_is_closed(ch_)) return true;
  collect_status();
  return false;
}

void RemoteProcess::write_stdin(std::string_view bytes) {
  while (!bytes.empty()) {
    int n = ssh_channel_write(ch_, bytes.data(), static_cast<uint32_t>(bytes.size()));
    if (n == SSH_ERROR)
      throw RemoteError(host_ + ": cannot write to the remote command's stdin: the channel closed (" +
                        ssh_get_error(ssh_channel_get_session(ch_)) + ")");
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void RemoteProcess::offer_stdin(std::string_view bytes) {
  try {
    write_stdin(bytes);
  } catch (const Error&) {
  }
}

void RemoteProcess::close_stdin() { ssh_channel_send_eof(ch_); }

bool RemoteProcess::poll_output(std::chrono::milliseconds timeout) {
  std::array<char, 16384> buf;
  auto deadline = Clock::now() + timeout;
  for (;;) {
    bool any = false;
    for (int is_err = 0; is_err < 2; ++is_err) {
      int n = ssh_channel_read_nonblocking(ch_, buf.data(), buf.size(), is_err);
      if (n > 0) (is_err ? err_ : out_).append(buf.data(), static_cast<size_t>(n)), any = true;
    }
    if (ssh_channel_is_eof(ch_) || !ssh_channel_is_open(ch_)) {
      // Drain what arrived together with EOF.
      for (int is_err = 0; is_err < 2; ++is_err) {
        int n;
        while ((n = ssh_channel_read_nonblocking(ch_, buf.data(), buf.size(), is_err)) > 0)
          (is_err ? err_ : out_).append(buf.data(), static_cast<size_t>(n));
      }
      collect_status();
      return false;
    }
    if (any) return true;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return true;
    // Block on stdout until data, EOF or the deadline; stderr is picked up above.
    int n = ssh_channel_read_timeout(ch_, buf.data(), buf.size(), 0,
                                     static_cast<int>(std::min<long>(left.count(), 50)));
    // Bytes that arrive during the wait end it: callers time their arrival
    // (the doctor's ssh round trip), so the rest of the timeout is not waited out.
    if (n > 0) {
      out_.append(buf.data(), static_cast<size_t>(n));
      return true;
    }
    if (n == SSH_ERROR) {
      collect_status();
      return false;
    }
  }
}

void RemoteProcess::collect_status() {
  if (status_) return;
  // The exit-status (or exit-signal) message comes right before or after EOF;
  // libssh waits for it (or the channel's close) within the session timeout.
  int status = ssh_channel_get_exit_status(ch_);
  if (status < 0) {
    // Killed by a signal: report it as a shell does; 255 (as OpenSSH) if unnamed.
    status = hooks_->signal ? 128 + hooks_->signal : 255;
  }
  status_ = status;
}

int RemoteProcess::wait(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (poll_output(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()))) {
    if (Clock::now() >= deadline)
      throw TimeoutError(host_ + ": the remote command did not end within " +
                         std::to_string(timeout.count()) + " ms");
  }
  collect_status();
  int status = *status_;
  return status;
}

}  // namespace dl::ssh
