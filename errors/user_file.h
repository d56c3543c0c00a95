#pragma once
// The one way dlaunch reads a file a user names: a hostfile, an env file, a
// config file, an app file, a token file, an ssh config; and a file that a
// job's rank wrote for it (torch's error file). Only a regular file
// is read, and at most kMaxUserFileBytes of it: a FIFO is refused without
// waiting for a writer (it is opened non-blocking, then fstat'ed), a device
// such as /dev/zero or a directory is refused before any read, and every read
// is checked. /dev/null reads as an empty file (DLAUNCH_CONFIG=/dev/null:
// no user config). Errors are UsageErrors (exit 2, nothing started) that name the
// file, what is wrong and what to do.
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

namespace dl {

// 1 MiB: far above any real hostfile, env file or config file, and small
// enough that a wrong path cannot make dlaunch read without bound.
inline constexpr size_t kMaxUserFileBytes = size_t{1} << 20;

// Whether a symbolic link at the path itself is followed: yes for a file a
// user names; no (O_NOFOLLOW, refused as "a symbolic link") for a file that
// a job's processes write into a directory of dlaunch's, such as a rank's
// torch error file, which dlaunch only reads.
enum class FinalLink { kFollow, kRefuse };

struct UserFile {
  std::string text;  // the whole file
  mode_t mode = 0;   // its st_mode (type and permission bits)
  uid_t owner = 0;   // its st_uid
};

// Reads the regular file at `path`. `what` names its role in messages
// ("hostfile", "--env-file", "user config"); `fix` says what to do, after the
// problem ("fix or unset DLAUNCH_CONFIG"). Throws UsageError
// "WHAT PATH: PROBLEM; FIX" when the file cannot be opened or read, is not a
// regular file, or is larger than kMaxUserFileBytes.
UserFile read_user_file(const std::string& path, const std::string& what,
                        const std::string& fix = "give a regular file of at most 1 MiB",
                        FinalLink link = FinalLink::kFollow);
// The same, except that nothing at `path` (ENOENT) is nullopt, not an error.
std::optional<UserFile> read_user_file_if_present(const std::string& path, const std::string& what,
                                                  const std::string& fix = "give a regular file of at most 1 MiB",
                                                  FinalLink link = FinalLink::kFollow);

// The permission bits of `mode` as chmod takes them: "0644".
std::string octal_mode(mode_t mode);

}  // namespace dl
