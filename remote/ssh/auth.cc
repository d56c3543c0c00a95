// Session::authenticate_step: public-key authentication in the order OpenSSH users
// expect (ssh-agent, then key files), and the one-line error when it fails.
#include <libssh/libssh.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "errors/error.h"
#include "remote/ssh/session.h"

namespace dl::ssh {

namespace {

std::string user_ssh_dir(const Options& o) {
  if (!o.ssh_dir.empty()) return o.ssh_dir;
  struct passwd* pw = getpwuid(geteuid());  // what libssh uses; $HOME is ignored
  return std::string(pw ? pw->pw_dir : "~") + "/.ssh";
}

std::string expand(std::string path, const std::string& ssh_dir) {
  if (path.rfind("%d", 0) == 0) path = ssh_dir + path.substr(2);
  return path;
}

// The key files libssh offers, as far as we can name them: libssh keeps the
// list private, so this is the explicit ones, the first from the config, and
// the default ones that exist.
std::vector<std::string> key_files(ssh_session s, const Options& o) {
  std::string dir = user_ssh_dir(o);
  std::vector<std::string> files = o.identity_files;
  char* first = nullptr;
  if (ssh_options_get(s, SSH_OPTIONS_IDENTITY, &first) == SSH_OK && first) {
    files.push_back(expand(first, dir));
    ssh_string_free_char(first);
  }
  for (const char* name : {"id_ed25519", "id_ecdsa", "id_rsa"}) files.push_back(dir + "/" + name);
  std::vector<std::string> out;
  struct stat st;
  for (auto& f : files)
    if (stat(f.c_str(), &st) == 0 && std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  return out;
}

std::string methods_text(int methods) {
  std::string out;
  auto add = [&](int bit, const char* name) {
    if (methods & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  add(SSH_AUTH_METHOD_PUBLICKEY, "publickey");
  add(SSH_AUTH_METHOD_PASSWORD, "password");
  add(SSH_AUTH_METHOD_INTERACTIVE, "keyboard-interactive");
  add(SSH_AUTH_METHOD_GSSAPI_MIC, "gssapi-with-mic");
  add(SSH_AUTH_METHOD_HOSTBASED, "hostbased");
  return out.empty() ? "nothing it told us" : out;
}

}  // namespace

bool Session::authenticate_step() {
  if (step_ == Step::kAuthNone) {
    const int rc = ssh_userauth_none(s_, nullptr);
    if (rc == SSH_AUTH_AGAIN) return false;
    if (rc == SSH_AUTH_SUCCESS) return true;
    if (rc == SSH_AUTH_ERROR)
      throw IoError(name_ + ": the connection broke during authentication: " + ssh_get_error(s_));
    methods_ = ssh_userauth_list(s_, nullptr);
    if (!(methods_ & SSH_AUTH_METHOD_PUBLICKEY)) auth_failed(methods_);
    step_ = Step::kAuthKeys;
  }
  // Agent first (unless disabled), then every identity file; keys with a
  // passphrase are skipped here (no prompt: load them into ssh-agent).
  const int rc = ssh_userauth_publickey_auto(s_, nullptr, nullptr);
  if (rc == SSH_AUTH_AGAIN) return false;
  if (rc == SSH_AUTH_SUCCESS) return true;
  if (rc == SSH_AUTH_ERROR)
    throw IoError(name_ + ": the connection broke during authentication: " + ssh_get_error(s_));
  auth_failed(methods_);
}

void Session::auth_failed(int methods) {
  const Options& o = options_;
  const char* sock = std::getenv("SSH_AUTH_SOCK");
  std::string agent = !o.use_agent       ? "no ssh-agent (disabled)"
                      : sock && *sock    ? std::string("the keys of ssh-agent at ") + sock
                                         : "no ssh-agent (SSH_AUTH_SOCK unset)";
  std::string keys;
  for (auto& f : key_files(s_, o)) keys += (keys.empty() ? "" : ", ") + f;
  if (keys.empty()) keys = "none found (no IdentityFile, no " + user_ssh_dir(o) + "/id_*)";
  throw AuthError(name_ + ": authentication failed for user " + user_ + ": tried " + agent +
                  " and key files: " + keys + "; the server accepts " + methods_text(methods) +
                  "; fix: add your public key to ~" + user_ + "/.ssh/authorized_keys on " + host_ +
                  " (ssh-copy-id " + user_ + "@" + host_ +
                  "), or name the right key with IdentityFile in ~/.ssh/config");
}

}  // namespace dl::ssh
