#pragma once
// dlaunch's directories in a host's temp dir ($TMPDIR, or /tmp, and
// /dev/shm): the agent's (its Python ranks' files, its store door, its PMIx
// server's socket and shared memory) and the doctor's scratch. Each is named
// for the process that made it:
//   dlaunch-<pid>-<kind>-<start>.<pidns>.<random>
// <pid> and <start> (its start time: field 22 of /proc/<pid>/stat) say which
// process, also once the pid is reused; <pidns> (the inode of its
// /proc/self/ns/pid) in which pid namespace the pid counts, so that a process
// of a container sharing this temp dir is never taken for a dead one. The
// owner removes its directories when it ends. One killed outright (SIGKILL)
// cannot, and the next dlaunch agent (or doctor) of the same user on the
// host removes them: reap_stale_temp_dirs. docs/security.md, "Nothing left
// behind".
//
// A stack report's directory (dlaunch-stacks-<random>, docs/hangs.md) is not
// one of these: it is the user's to read, named on stderr, and outlives its
// job. It is kept for a week: reap_old_stack_reports.
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dl {

// $TMPDIR, or /tmp when it is unset or empty.
std::string temp_base();

// "dlaunch-<pid>-<kind>-<start>.<pidns>." of this process: a directory named
// with it and random characters after it (mkdtemp's XXXXXX) is this
// process's, as reap_stale_temp_dirs reads names. `kind` is letters only
// ("py", "store", "mpi", "shm", "doctor").
std::string temp_dir_prefix(const std::string& kind);

// What a directory's name says of the process that made it.
struct TempDirOwner {
  pid_t pid = 0;
  std::string kind;                           // "" in a name of an older dlaunch: dlaunch-<pid>-<random>
  std::optional<unsigned long long> start;    // none in an older name
  std::optional<unsigned long long> pid_ns;   // none in an older name
};
// The owner named by `name` (one path component), or nullopt when it is not
// a name of temp_dir_prefix's form nor an older dlaunch's dlaunch-<pid>-...
std::optional<TempDirOwner> parse_temp_dir_name(std::string_view name);

// Whether that owner is gone: no process has its pid, or the one that has it
// started at another time. Never for an owner of another pid namespace
// (whether it lives cannot be told from here), nor when /proc cannot be read.
// An older name, without a start time, is gone when its pid is.
bool temp_dir_owner_gone(const TempDirOwner& owner);

// Removes from `base` each directory whose name parse_temp_dir_name reads
// and whose owner is gone (not this process), when it is a directory itself
// (not a link to one), owned by this process's effective user, of mode 0700.
// Each goes with everything in it, following no link: every directory is
// opened relative to the one holding it with O_NOFOLLOW, a link is removed as
// a link, and no other file system (a mount inside) is entered. Another
// user's directories, and ones of live owners, are never touched. Returns
// how many were removed; never throws: what cannot be removed is left for
// the next one.
size_t reap_stale_temp_dirs(const std::string& base);

// How long a stack report dlaunch made in the temp dir is kept.
inline constexpr long kStackReportKeepSeconds = 7L * 24 * 3600;

// Removes from `base` each dlaunch-stacks-* directory of this effective
// user (mode 0700, not a link) last changed more than `keep_seconds` ago,
// with what it holds, by the same rules as reap_stale_temp_dirs. Returns
// how many were removed; never throws.
size_t reap_old_stack_reports(const std::string& base, long keep_seconds = kStackReportKeepSeconds);

}  // namespace dl
