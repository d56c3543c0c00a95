#include "rendezvous/token.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>

#include "control/env_names.h"
#include "errors/error.h"
#include "errors/user_file.h"
#include "wire/handshake.h"

namespace dl::rdzv {
namespace {

std::string read_token_file(const std::string& path) {
  const UserFile f = read_user_file(path, "--token-file", "write one with `dlaunch token > FILE; chmod 600 FILE`");
  if (f.owner != ::geteuid())
    throw UsageError("--token-file " + path + ": owned by uid " + std::to_string(f.owner) + ", not by this user (uid " +
                     std::to_string(::geteuid()) + "), who could read or change the job token; write your own with "
                     "`dlaunch token > FILE; chmod 600 FILE`");
  if (f.mode & (S_IRWXG | S_IRWXO))
    throw UsageError("--token-file " + path + ": mode " + octal_mode(f.mode) +
                     " lets other users read or change the job token; run `chmod 600 " + path + "`");
  std::string t = f.text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (t.size() < wire::kTokenChars)
    throw UsageError("--token-file " + path + ": holds " + std::to_string(t.size()) + " characters, fewer than the " +
                     std::to_string(wire::kTokenChars) + " of a job token; write one with `dlaunch token > " + path +
                     "`");
  return t;
}

}  // namespace

std::optional<std::string> load_token(const std::string& token_file) {
  if (!token_file.empty()) return read_token_file(token_file);
  if (const char* t = std::getenv(env::kDlToken); t && *t) return std::string(t);
  return std::nullopt;
}

}  // namespace dl::rdzv
