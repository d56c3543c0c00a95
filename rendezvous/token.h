#pragma once
// Where a job token comes from when dlaunch did not make it: a file (mode
// 0600 on a shared filesystem) or the DLAUNCH_TOKEN variable. Never argv.
#include <optional>
#include <string>

namespace dl::rdzv {

// The token in `token_file` (trailing whitespace dropped) when the path is
// not empty, else DLAUNCH_TOKEN when set and not empty, else nothing.
// Throws UsageError naming the file when it cannot be read or is empty.
std::optional<std::string> load_token(const std::string& token_file);

}  // namespace dl::rdzv
