#pragma once
// POSIX shell quoting for remote commands. ssh hands the remote command to the
// user's login shell as one string, so every word of a remote command is built
// through these functions: no hostfile entry, path or program argument can
// inject shell syntax, whatever bytes it holds.
#include <string>
#include <string_view>
#include <vector>

namespace dl::ssh {

// Returns `s` as one POSIX shell word that expands to exactly `s`: wrapped in
// single quotes, each ' written as '\''. The empty string becomes ''. Words made
// only of [A-Za-z0-9_./:@%+,-] (and not empty) are returned unquoted, so
// remote commands stay readable in logs. Never fails.
std::string shell_quote(std::string_view s);

// shell_quote of every word, joined by single spaces: a command line the
// remote shell splits back into exactly `words`.
std::string join_quoted(const std::vector<std::string>& words);

}  // namespace dl::ssh
