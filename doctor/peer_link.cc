#include "doctor/peer_link.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstring>

#include "errors/error.h"
#include "remote/agent_starter.h"

namespace dl::doctor {

namespace {
using Clock = std::chrono::steady_clock;

std::string first_line(std::string s) {
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s;
}

// Why a peer ended before answering, as one line naming the host.
std::string ended_why(const std::string& host, int status, const std::string& err, const std::string& command) {
  if (status == 127)
    return host + ": dlaunch was not found there (" + command + ": " + first_line(err) +
           "); install dlaunch at the same path on every host or pass --prefix DIR";
  if (status == 126) return host + ": dlaunch there is not executable (" + first_line(err) + ")";
  std::string said = first_line(err);
  return host + ": the doctor's peer exited with status " + std::to_string(status) + (said.empty() ? "" : " (" + said + ")");
}

class RemotePeer : public PeerLink {
 public:
  RemotePeer(ssh::Started s, const std::string& host, std::string command)
      : PeerLink(host), s_(std::move(s)), command_(std::move(command)) {}
  ~RemotePeer() override {
    try {
      s_.process->close_stdin();
      s_.process->wait(Millis(3000));
    } catch (...) {
    }
    s_.process.reset();  // the channel before its session
  }

 private:
  void send_line(const std::string& line) override {
    try {
      s_.process->write_stdin(line);
    } catch (const Error&) {
      // A command that could not start (no dlaunch there) may end, and close
      // the channel, before the first line is written: its exit says why.
      int status = -1;
      try {
        status = s_.process->wait(Millis(3000));
      } catch (const Error&) {
        throw RemoteError(host() + ": the channel to the doctor's peer closed before it could be written to");
      }
      throw RemoteError(ended_why(host(), status, s_.process->err(), command_));
    }
  }
  std::string read_line(Millis timeout, const std::string& waiting_for) override {
    const auto end = Clock::now() + timeout;
    for (;;) {
      const std::string& out = s_.process->out();
      if (auto nl = out.find('\n', pos_); nl != std::string::npos) {
        std::string line = out.substr(pos_, nl - pos_);
        pos_ = nl + 1;
        return line;
      }
      auto left = std::chrono::duration_cast<Millis>(end - Clock::now());
      if (left.count() <= 0) throw TimeoutError(no_answer(timeout, waiting_for));
      if (!s_.process->poll_output(std::min(left, Millis(100))))
        throw RemoteError(ended_why(host(), s_.process->exit_status().value_or(-1), s_.process->err(), command_));
    }
  }
  ssh::Started s_;
  std::string command_;
  size_t pos_ = 0;
};

// The last non-empty line of `s`.
std::string last_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  auto nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

class ProcessPeer : public PeerLink {
 public:
  ProcessPeer(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& token,
              const std::string& host, bool ssh)
      : PeerLink(host), what_(argv.empty() ? "" : argv[0]), ssh_(ssh) {
    int sv[2], err[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      throw_errno("creating the channel to the doctor's peer on " + host);
    // Built before the fork: the child of a threaded process may only exec.
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    args.push_back(nullptr), envp.push_back(nullptr);
    const pid_t parent = ::getpid();
    // vfork: the child only makes system calls until it execs, and the
    // parent's page tables (a thousand hosts' peers are forked from it and
    // from each other) are not copied for it.
    pid_ = ::vfork();
    if (pid_ < 0) throw_errno("vfork");
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::dup2(sv[1], 0);
      ::dup2(sv[1], 1);
      ::dup2(err[1], 2);
      ::execve(args[0], args.data(), envp.data());
      ::_exit(127);
    }
    ::close(sv[1]);
    ::close(err[1]);
    fd_ = sv[0];
    err_ = err[0];
    ::fcntl(err_, F_SETFL, O_NONBLOCK);
    try {
      send_line(token + "\n");
    } catch (const Error&) {
      // Gone already: the first read says why.
    }
  }
  ~ProcessPeer() override {
    ::shutdown(fd_, SHUT_WR);  // EOF: the peer stops
    // Woken when it exits (a pidfd), not by a timer: a thousand hosts'
    // peers closing at once each cost a tick per 10 ms of their parent's CPU.
    remote::LocalAgent child{pid_, -1};
    remote::reap_local_agent(child, 3000);  // then SIGKILL to its process group
    ::close(fd_);
    ::close(err_);
  }

 private:
  void send_line(const std::string& line) override {
    for (size_t done = 0; done < line.size();) {
      ssize_t n = ::send(fd_, line.data() + done, line.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw RemoteError(host() + ": the doctor's peer (" + what_ + ") is gone: " + std::strerror(errno));
      done += static_cast<size_t>(n);
    }
  }
  // Reads what stderr holds; false once it is closed (or failed).
  bool drain_stderr() {
    char b[4096];
    ssize_t n;
    while ((n = ::read(err_, b, sizeof b)) > 0)
      if (said_.size() < 65536) said_.append(b, static_cast<size_t>(n));
    return n < 0 && (errno == EAGAIN || errno == EINTR);
  }
  // Why the child ended: its exit status and what it said last.
  std::string ended() {
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    drain_stderr();
    const int status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (ssh_ && status == 255)
      return host() + ": ssh failed (exit 255): " + (said_.empty() ? "no message" : last_line(said_));
    return ended_why(host(), status, last_line(said_), what_ + " doctor --peer");
  }
  std::string read_line(Millis timeout, const std::string& waiting_for) override {
    const auto end = Clock::now() + timeout;
    for (;;) {
      if (auto line = buffered_line()) return *line;
      if (pid_ < 0) throw RemoteError(host() + ": the doctor's peer has ended");
      auto left = std::chrono::duration_cast<Millis>(end - Clock::now());
      if (left.count() <= 0) throw TimeoutError(no_answer(timeout, waiting_for));
      // Woken by a reply, by stderr, or at the deadline, and by nothing
      // else: the doctor waits on each of its children for as long as the
      // tree beneath takes to start (a minute at a thousand hosts here), and
      // a timer tick each 100 ms was most of its CPU. Stderr closed (the
      // peer and whatever it started are gone) is watched no more.
      pollfd p[kPollFds];
      poll_fds(p);
      if (::poll(p, kPollFds, static_cast<int>(std::min<long>(left.count(), INT_MAX))) <= 0) continue;
      read_ready(p);
    }
  }
  bool pollable() const override { return pid_ >= 0; }
  void poll_fds(pollfd* into) const override {
    into[0] = {fd_, POLLIN, 0};
    into[1] = {err_open_ ? err_ : -1, POLLIN, 0};
  }
  std::optional<std::string> take_line(const pollfd* ready) override {
    if (auto line = buffered_line()) return line;
    if (pid_ < 0) throw RemoteError(host() + ": the doctor's peer has ended");
    read_ready(ready);
    return buffered_line();
  }
  // The next whole line read, taken from the buffer.
  std::optional<std::string> buffered_line() {
    const auto nl = buf_.find('\n');
    if (nl == std::string::npos) return std::nullopt;
    std::string line = buf_.substr(0, nl);
    buf_.erase(0, nl + 1);
    return line;
  }
  // What a poll of poll_fds found: stderr drained, the socket read (the
  // peer's end: RemoteError saying why).
  void read_ready(const pollfd* p) {
    if (p[1].revents) err_open_ = drain_stderr();
    if (!p[0].revents) return;
    char b[65536];
    ssize_t n = ::read(fd_, b, sizeof b);
    if (n < 0 && errno == EINTR) return;
    if (n <= 0) throw RemoteError(ended());
    buf_.append(b, static_cast<size_t>(n));
  }
  std::string what_, buf_, said_;
  bool ssh_ = false;
  bool err_open_ = true;
  pid_t pid_ = -1;
  int fd_ = -1, err_ = -1;
};

}  // namespace

namespace {
[[noreturn]] void raise_remote(const std::string& what) { throw RemoteError(what + " (is dlaunch there the same version?)"); }
}  // namespace

wire::RecordName PeerLink::reply_name(const std::string& op) const {
  return {host_ + ": the doctor's peer's reply to '" + op + "'", &raise_remote};
}

std::string PeerLink::call_line(const std::string& op, const std::string& line, Millis timeout) {
  send_line(line + "\n");
  std::string reply = read_line(timeout, "'" + std::string(op) + "'");
  checked(op, reply);
  return reply;
}

const std::string& PeerLink::checked(const std::string& op, const std::string& reply) const {
  // A failed request is answered with an ErrorReply: its top-level "error".
  if (auto error = wire::check_object(reply, reply_name(op), "error")) throw RemoteError(host_ + ": " + *error);
  return reply;
}

std::string PeerLink::no_answer(Millis timeout, const std::string& waiting_for) const {
  return host_ + ": no answer within " + std::to_string(timeout.count()) + " ms to " + waiting_for;
}

void PeerLink::poll_fds(pollfd* into) const {
  for (size_t i = 0; i < kPollFds; ++i) into[i] = {-1, 0, 0};
}

std::optional<std::string> PeerLink::take_line(const pollfd*) { return std::nullopt; }

std::unique_ptr<PeerLink> start_process_peer(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                             const std::string& token, const std::string& host, bool ssh) {
  return std::make_unique<ProcessPeer>(argv, env, token, host, ssh);
}

std::unique_ptr<PeerLink> adopt_remote_peer(ssh::Started started, const std::string& host,
                                            const std::string& command) {
  return std::make_unique<RemotePeer>(std::move(started), host, command);
}

}  // namespace dl::doctor
