#pragma once
// A file that holds a job's secrets (the FileStore's log carries the
// collectives token and every rank's address) in a directory other users
// may share, such as /tmp. Opened so that no file of another user, no file
// others can read, and no link anyone planted is ever adopted:
//
// - the directory is opened once and used by descriptor from then on (a
//   path swapped afterwards does not redirect us); it must belong to this
//   user or root, and be writable by others only when sticky (as /tmp);
// - the file is created O_EXCL|O_NOFOLLOW with mode 0600 where it does not
//   exist; an existing one (the other ranks of a job open the same file) is
//   opened O_NOFOLLOW and must be a regular file of this user that group
//   and others cannot read or write.
//
// Refusals are UsageErrors naming the path, its owner and mode, and what to
// do; other failures are IoErrors naming the path.
#include <string>

namespace dl::rdzv {

class PrivateFile {
 public:
  // Opens (creating it when absent) the file at `path`, whose directory
  // must exist. Throws as described above.
  explicit PrivateFile(std::string path);
  ~PrivateFile();
  PrivateFile(const PrivateFile&) = delete;
  PrivateFile& operator=(const PrivateFile&) = delete;

  // Closes the current descriptor and opens whatever the name holds now
  // (created afresh when absent), with the same checks.
  void reopen();
  // True while the name in the directory still refers to fd()'s file.
  bool current() const;
  // Removes the name from the directory (the one held, however the path
  // resolves now); false when it was gone already.
  bool unlink() const;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  int open_checked() const;

  std::string path_, name_;
  int dir_fd_ = -1, fd_ = -1;
};

}  // namespace dl::rdzv
