#pragma once
// Where a job token comes from when dlaunch did not make it: a file (mode
// 0600 on a shared filesystem) or the DLAUNCH_TOKEN variable. Never argv.
#include <optional>
#include <string>

namespace dl::rdzv {

// The token in `token_file` (trailing whitespace dropped) when the path is
// not empty, else DLAUNCH_TOKEN when set and not empty, else nothing.
// Throws UsageError naming the file when read_user_file will not read it,
// when another user owns it, when group or other may use it (as ssh refuses
// a loose private key), or
// when it holds fewer than wire::kTokenChars characters (what `dlaunch
// token` prints).
std::optional<std::string> load_token(const std::string& token_file);

}  // namespace dl::rdzv
