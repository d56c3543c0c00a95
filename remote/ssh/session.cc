#include "remote/ssh/session.h"

#include <libssh/libssh.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors/error.h"
#include "remote/ssh/tcp_connect.h"

namespace dl::ssh {

namespace {

std::string get_string_option(ssh_session s, ssh_options_e what) {
  char* v = nullptr;
  if (ssh_options_get(s, what, &v) != SSH_OK || v == nullptr) return "";
  std::string out(v);
  ssh_string_free_char(v);
  return out;
}

bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string fingerprint(ssh_session s) {
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(s, &key) != SSH_OK) return "(no key)";
  unsigned char* hash = nullptr;
  size_t len = 0;
  std::string out = "(no hash)";
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) == SSH_OK) {
    char* fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len);
    out = std::string(ssh_key_type_to_char(ssh_key_type(key))) + " " + fp;
    ssh_string_free_char(fp);
    ssh_clean_pubkey_hash(&hash);
  }
  ssh_key_free(key);
  return out;
}

}  // namespace

Session::Session(Configured, const Target& target, const Options& options)
    : options_(options), name_(target.str()) {
  s_ = ssh_new();
  if (s_ == nullptr) throw IoError(name_ + ": libssh could not allocate a session (out of memory?)");
  try {
    apply_options(target, options);
  } catch (...) {
    ssh_free(s_);
    throw;
  }
}

std::unique_ptr<Session> Session::configure(const Target& target, const Options& options) {
  auto s = std::unique_ptr<Session>(new Session(Configured{}, target, options));
  ssh_set_blocking(s->s_, 0);
  return s;
}

// Delegating: if the body throws, the destructor frees the session.
Session::Session(const Target& target, const Options& options) : Session(Configured{}, target, options) {
  // Our own connect tells refused from unreachable from timed out exactly.
  if (!proxied()) attach(tcp_connect(host_, port_, options.connect_timeout, name_));
  while (!advance()) {
  }  // blocking: every step completes at once
}

Session::~Session() {
  ssh_disconnect(s_);
  ssh_free(s_);
}

bool Session::proxied() const { return !get_string_option(s_, SSH_OPTIONS_PROXYCOMMAND).empty(); }

void Session::attach(const TcpConnection& c) {
  remote_address_ = c.remote_address;
  local_address_ = c.local_address;
  socket_t fd = c.fd;
  if (ssh_options_set(s_, SSH_OPTIONS_FD, &fd) != SSH_OK) {
    ::close(fd);
    throw IoError(name_ + ": libssh refused the socket: " + ssh_get_error(s_));
  }
  // From here libssh owns fd and closes it in ssh_disconnect/ssh_free.
}

int Session::fd() const {
  socket_t fd = ssh_get_fd(s_);
  return fd == SSH_INVALID_SOCKET ? -1 : static_cast<int>(fd);
}

bool Session::wants_write() const { return (ssh_get_poll_flags(s_) & SSH_WRITE_PENDING) != 0; }

bool Session::advance() {
  switch (step_) {
    case Step::kConnect:
      if (!connect_step()) return false;
      step_ = Step::kHostKey;
      [[fallthrough]];
    case Step::kHostKey:
      check_host_key();
      step_ = Step::kAuthNone;
      [[fallthrough]];
    case Step::kAuthNone:
    case Step::kAuthKeys:
      if (!authenticate_step()) return false;
      step_ = Step::kDone;
      [[fallthrough]];
    case Step::kDone:
      return true;
  }
  return true;
}

std::string Session::handshake_timeout_message(Millis timeout) const {
  if (step_ == Step::kConnect && remote_address_.empty() && !proxied())
    return name_ + ": unreachable: no answer within " + std::to_string(timeout.count()) +
           " ms (host down, wrong address, or a firewall dropping port " + std::to_string(port_) + "?)";
  return name_ + ": the ssh handshake did not finish within " + std::to_string(timeout.count()) +
         " ms: is it an ssh server, and is the host overloaded?";
}

void Session::apply_options(const Target& target, const Options& o) {
  auto set = [&](ssh_options_e what, const void* value, const char* label) {
    if (ssh_options_set(s_, what, value) != SSH_OK)
      throw UsageError(name_ + ": bad ssh option " + label + ": " + ssh_get_error(s_));
  };
  if (!o.ssh_dir.empty()) set(SSH_OPTIONS_SSH_DIR, o.ssh_dir.c_str(), "ssh_dir");
  set(SSH_OPTIONS_HOST, target.host.c_str(), "host");
  // Parse the config ourselves, exactly once, so ssh_connect does not read
  // ~/.ssh/config behind an explicit config_file.
  int no = 0;
  set(SSH_OPTIONS_PROCESS_CONFIG, &no, "process_config");
  if (!o.config_file.empty() && !file_exists(o.config_file))
    throw UsageError(name_ + ": ssh config file " + o.config_file + " does not exist");
  if (ssh_options_parse_config(s_, o.config_file.empty() ? nullptr : o.config_file.c_str()) != SSH_OK)
    throw UsageError(name_ + ": cannot parse ssh config " +
                     (o.config_file.empty() ? std::string("~/.ssh/config") : o.config_file) + ": " +
                     ssh_get_error(s_));
  // After the config: its LogLevel must not turn libssh's stderr log on.
  int verbosity = o.log_verbosity;
  set(SSH_OPTIONS_LOG_VERBOSITY, &verbosity, "log_verbosity");
  // What the hostfile says beats the config, as `ssh -p PORT user@host` does.
  if (!target.user.empty()) set(SSH_OPTIONS_USER, target.user.c_str(), "user");
  if (target.port) {
    unsigned int port = target.port;
    set(SSH_OPTIONS_PORT, &port, "port");
  }
  for (auto it = o.identity_files.rbegin(); it != o.identity_files.rend(); ++it)
    set(SSH_OPTIONS_IDENTITY, it->c_str(), "identity file");  // prepends
  if (!o.known_hosts_file.empty()) {
    set(SSH_OPTIONS_KNOWNHOSTS, o.known_hosts_file.c_str(), "known_hosts_file");
    set(SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null", "global known_hosts");
  }
  if (!o.use_agent) set(SSH_OPTIONS_IDENTITY_AGENT, "/dev/null", "identity agent");
  long sec = o.connect_timeout.count() / 1000, usec = (o.connect_timeout.count() % 1000) * 1000;
  set(SSH_OPTIONS_TIMEOUT, &sec, "timeout");
  set(SSH_OPTIONS_TIMEOUT_USEC, &usec, "timeout");

  host_ = get_string_option(s_, SSH_OPTIONS_HOST);
  user_ = get_string_option(s_, SSH_OPTIONS_USER);
  unsigned int port = 22;
  ssh_options_get_port(s_, &port);
  port_ = static_cast<uint16_t>(port);
  std::string real = user_ + "@" + host_ + ":" + std::to_string(port_);
  if (real != name_) name_ += " (" + real + ")";
}

bool Session::connect_step() {
  const int rc = ssh_connect(s_);
  if (rc == SSH_AGAIN) return false;
  if (rc != SSH_OK) {
    std::string err = ssh_get_error(s_);
    if (err.find("imeout") != std::string::npos || err.find("timed out") != std::string::npos)
      throw TimeoutError(name_ + ": the ssh handshake did not finish within " +
                         std::to_string(options_.connect_timeout.count()) + " ms (" + err +
                         "): is it an ssh server, and is the host overloaded?");
    throw IoError(name_ + ": ssh handshake failed: " + err +
                  (proxied() ? " (through the ProxyCommand of your ssh config)" : ""));
  }
  if (remote_address_.empty()) {  // a ProxyCommand's socket
    TcpConnection c = describe_socket(ssh_get_fd(s_));
    remote_address_ = c.remote_address;
    local_address_ = c.local_address;
  }
  return true;
}

void Session::check_host_key() {
  const Options& o = options_;
  std::string kh = o.known_hosts_file.empty() ? get_string_option(s_, SSH_OPTIONS_KNOWNHOSTS)
                                              : o.known_hosts_file;
  std::string hostspec = port_ == 22 ? host_ : "[" + host_ + "]:" + std::to_string(port_);
  switch (ssh_session_is_known_server(s_)) {
    case SSH_KNOWN_HOSTS_OK:
      return;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      throw AuthError(name_ + ": HOST KEY CHANGED (now " + fingerprint(s_) + ", " + kh +
                      " has another): someone may be intercepting the connection, or the host was "
                      "reinstalled; if you are sure, remove the old key with `ssh-keygen -R " +
                      hostspec + " -f " + kh + "` (dlaunch never replaces a changed key)");
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      if (o.accept_new) {
        if (ssh_session_update_known_hosts(s_) != SSH_OK)
          throw IoError(name_ + ": cannot add the host key to " + kh + ": " + ssh_get_error(s_));
        return;
      }
      throw AuthError(name_ + ": host key unknown (" + fingerprint(s_) + " is not in " + kh +
                      "): accept it with `ssh-keyscan -H " +
                      (port_ == 22 ? host_ : "-p " + std::to_string(port_) + " " + host_) + " >> " +
                      kh + "` after checking the fingerprint, or run with --ssh-accept-new");
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      throw IoError(name_ + ": cannot check the host key against " + kh + ": " + ssh_get_error(s_));
  }
}

std::unique_ptr<RemoteProcess> Session::open(const std::string& command) {
  ssh_channel ch = ssh_channel_new(s_);
  if (ch == nullptr) throw RemoteError(name_ + ": cannot create an ssh channel: " + ssh_get_error(s_));
  return std::make_unique<RemoteProcess>(ch, name_, command);
}

std::unique_ptr<RemoteProcess> Session::exec(const std::string& command) {
  auto p = open(command);
  while (!p->advance_open()) {
  }  // blocking: completes at once
  return p;
}

}  // namespace dl::ssh
