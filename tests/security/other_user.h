#pragma once
// Another user on the same machine, made for one test and removed after it:
// the attacker of tests/security (docs/security.md, "Threat model"). Needs
// root (CI runs as root); available() says whether this process can make one.
//
// The user is a system account (no home, no login shell) with a group of its
// own, named dlsec<test pid>x<n>: users of a test process that died before
// its destructor ran are removed by the next test that makes one. The
// destructor kills every process of the user, then removes the user, its
// group and its directory.
#include <sys/types.h>

#include <string>
#include <vector>

#include "tests/integration/run_command.h"

// Opens a test case that needs another user: where none can be made here,
// the case says it was skipped and ends (it tests nothing, and says so).
#define DLSEC_NEEDS_OTHER_USER()                                    \
  if (!dl::sec::OtherUser::available()) {                           \
    WARN("needs root and useradd to make another user; skipped");   \
    return;                                                         \
  }

namespace dl::sec {

class OtherUser {
 public:
  // True when useradd can run here (root, and the tool exists).
  static bool available();
  // Makes the user and dir() (0755, owned by it). Throws std::runtime_error
  // when useradd fails.
  OtherUser();
  ~OtherUser();
  OtherUser(const OtherUser&) = delete;
  OtherUser& operator=(const OtherUser&) = delete;

  const std::string& name() const { return name_; }
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }
  // A directory the user owns (mode 0755) under /tmp: for its programs and files.
  const std::string& dir() const { return dir_; }
  // `spec` made to run as this user, in dir(), with HOME=dir().
  it::RunSpec as(it::RunSpec spec) const;

 private:
  std::string name_, dir_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

// Compiles the C program `source` (text) with `cc_args` (e.g. "-lpmix")
// into `dir`/`name`, world-executable. Returns the binary's path; throws
// std::runtime_error with the compiler's output on failure.
std::string compile_c(const std::string& dir, const std::string& name, const std::string& source,
                      const std::string& cc_args = "");

// The TCP ports process `pid` listens on (its sockets' inodes looked up in
// /proc/net/tcp and tcp6). Needs the right to read /proc/<pid>/fd.
std::vector<unsigned> listening_ports(pid_t pid);

}  // namespace dl::sec
