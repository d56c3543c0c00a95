#pragma once
// Where dlaunch writes files for its user (the ranks' output files, stack
// reports, the doctor's hostfile of healthy hosts): never through a symbolic
// link that another user planted, never into a directory or a file that
// another user made or controls. docs/security.md, "Files dlaunch writes".
//
// A path is walked one directory at a time from "/" (or the working
// directory), each held open and the next opened relative to it, so that a
// directory renamed afterwards redirects nothing. Along the way:
//   - a symbolic link is followed only when it belongs to this user or root
//     (a final file name is never followed);
//   - directories above the one written or made into are passed through,
//     whoever owns them;
//   - the directory written into, or made into (the deepest one that
//     exists), must belong to this user or root and be writable by nobody
//     else, unless it has the sticky bit (as /tmp has). A group-writable
//     directory counts as writable by others unless its group is this
//     user's private group (named as the user, as Debian's useradd makes);
//   - directories made are 0700, files made 0600; an existing file is
//     written only when it is a regular file of this user's with one link.
// A refusal is a UsageError naming the path, its owner and what to do; a
// failing system call an IoError naming the path.
//
// Not thread-safe for one object; distinct objects may be used from any thread.
#include <string>
#include <string_view>

#include "wire/socket.h"

namespace dl::wire {

class PrivateDir {
 public:
  // Opens the directory `path`, making the missing ones (0700) when
  // `create`; without `create` a missing one is an IoError.
  static PrivateDir open(const std::string& path, bool create);
  // Refuses what open(path, true) would refuse, making nothing: the walk
  // stops at the first directory that does not exist yet.
  static void check(const std::string& path);

  // The directory `name` (one component) inside this one, made 0700 if
  // missing, under the same rules.
  PrivateDir sub(const std::string& name) const;
  // Opens the file `name` (one component) here for writing, made 0600 if
  // missing. `truncate` empties it and makes it 0600; otherwise writes go to
  // its end. Returns a descriptor (O_CLOEXEC) that the caller closes.
  int open_file(const std::string& name, bool truncate) const;
  // open_file(name, true), `text` written, closed; IoError when a write fails.
  void write_file(const std::string& name, std::string_view text) const;
  // Refuses what open_file(name, true) would refuse, writing nothing.
  void check_file(const std::string& name) const;

  const std::string& path() const { return path_; }

 private:
  PrivateDir(Socket fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  Socket fd_;  // O_PATH
  std::string path_;
};

// The file `path` written afresh with `text` (PrivateDir::write_file), in
// its directory, which must exist: --report-json, --write-healthy.
void write_private_file(const std::string& path, std::string_view text);
// Refuses what write_private_file would refuse, writing nothing.
void check_private_file(const std::string& path);

}  // namespace dl::wire
