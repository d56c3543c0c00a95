#pragma once
// One ssh connection to one host: connect with a timeout, check the host key
// against known_hosts, authenticate as OpenSSH users expect, exec commands.
// This folder is the only place that includes libssh (scripts/check_architecture.py fences its headers).
//
// Two ways to use it. Blocking: the constructor connects and authenticates,
// exec() runs a command (fan_out.h, the doctor). Non-blocking, driven by an
// event loop (async_exec.h, the launcher): configure(), attach() a socket,
// advance() whenever fd() is ready until it returns true, then open() a
// command and advance its RemoteProcess the same way. Both run the same steps
// and throw the same one-line errors.
//
// Threading: a Session and the RemoteProcesses it made are used by one thread
// at a time (libssh sessions are not thread-safe). Different Sessions may be
// used from different threads at once.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "remote/ssh/remote_process.h"
#include "remote/ssh/tcp_connect.h"

struct ssh_session_struct;

namespace dl::ssh {

using Millis = std::chrono::milliseconds;

// Where to connect, as a hostfile says it: [user@]host[:port]. Empty user and
// port 0 mean "whatever ~/.ssh/config says, else the local user and 22".
struct Target {
  std::string host;
  std::string user;
  uint16_t port = 0;

  // "user@host:port" with the parts that are set; host in [] when it holds ':'.
  std::string str() const;
};

// Parses "[user@]host[:port]" and "[user@][v6addr]:port". Throws UsageError
// naming `what` on an empty host or a bad port.
Target parse_target(std::string_view s, std::string_view what);

struct Options {
  // TCP connect plus ssh handshake must finish within this.
  Millis connect_timeout{10000};
  // Like `ssh -F FILE`: read only this config file. Empty: the user's
  // <ssh_dir>/config, then /etc/ssh/ssh_config.
  std::string config_file;
  // Replaces both the user's (<ssh_dir>/known_hosts) and the global known_hosts
  // file. Empty: what the config says, else the defaults.
  std::string known_hosts_file;
  // Key files tried after ssh-agent, before the IdentityFile entries of the
  // config and the default <ssh_dir>/id_{ed25519,ecdsa,rsa}.
  std::vector<std::string> identity_files;
  // The user's ssh directory (libssh's %d). Empty: ~/.ssh of the effective uid
  // from getpwuid(3); libssh ignores $HOME. Tests point it at a scratch dir so
  // nothing under /root/.ssh is read.
  std::string ssh_dir;
  // Try the keys of the ssh-agent at $SSH_AUTH_SOCK first.
  bool use_agent = true;
  // Unknown host keys are added to the known_hosts file (--ssh-accept-new).
  // A changed key is refused regardless.
  bool accept_new = false;
  // libssh's own log on stderr: 0 none (default) .. 4 everything.
  int log_verbosity = 0;
};

class Session {
 public:
  // Connects to `target`, checks its host key and authenticates. On failure
  // throws dl::Error whose what() is ONE line naming the target and the fix:
  //   IoError      unreachable (no route / timed out), connection refused
  //   TimeoutError the handshake did not finish within connect_timeout
  //   AuthError    authentication failed (user and keys tried named),
  //                host key unknown or changed
  Session(const Target& target, const Options& options);
  ~Session();

  // Non-blocking use: the options and config applied, nothing connected.
  // Throws UsageError on a bad option or config file.
  static std::unique_ptr<Session> configure(const Target& target, const Options& options);
  // Where to connect after the config (HostName, Port); proxied() when the
  // config names a ProxyCommand, which libssh runs itself (no attach()).
  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  bool proxied() const;
  // Hands our own connected socket to libssh, which owns c.fd from now on.
  void attach(const TcpConnection& c);
  // One non-blocking step of the handshake (key exchange, host key check,
  // authentication): true when it is done, false to be called again when
  // fd() is ready (readable, or writable when wants_write()). Throws as the
  // constructor does.
  bool advance();
  // The session's socket once connecting started, else -1.
  int fd() const;
  // libssh has bytes queued for the socket: wait for it to be writable too.
  bool wants_write() const;
  // Starts `command` on a new channel without blocking: advance the returned
  // process (RemoteProcess::advance_open) until it runs.
  std::unique_ptr<RemoteProcess> open(const std::string& command);
  // Why the handshake has not finished by the deadline (a TimeoutError's text).
  std::string handshake_timeout_message(Millis timeout) const;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // "user@host:port" as given, and the address actually connected to.
  const std::string& name() const { return name_; }
  const std::string& user() const { return user_; }
  const std::string& remote_address() const { return remote_address_; }
  // The local address of the TCP connection (getsockname): the address this
  // host reaches us at, the launcher's default control address for it.
  const std::string& local_address() const { return local_address_; }

  // Runs `command` (a shell command line; build it with join_quoted) on a new
  // channel. Throws RemoteError naming the host if the channel cannot be opened.
  std::unique_ptr<RemoteProcess> exec(const std::string& command);

 private:
  struct Configured {};
  Session(Configured, const Target& target, const Options& options);
  void apply_options(const Target& target, const Options& options);
  bool connect_step();
  void check_host_key();
  bool authenticate_step();
  [[noreturn]] void auth_failed(int methods);

  // The handshake's steps, in order; it only moves forward.
  enum class Step { kConnect, kHostKey, kAuthNone, kAuthKeys, kDone };
  ssh_session_struct* s_ = nullptr;
  Options options_;
  Step step_ = Step::kConnect;
  int methods_ = 0;  // what the server accepts, once it said
  std::string name_, host_, user_, remote_address_, local_address_;
  uint16_t port_ = 22;
};

}  // namespace dl::ssh
