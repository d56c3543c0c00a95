#include "errors/user_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "errors/error.h"

namespace dl {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes the descriptor on every way out.
struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

// Reads all of `fd` (a regular file) into out, at most kMaxUserFileBytes;
// returns 0, or the errno of a failed read, or EFBIG past the cap.
int read_bounded(int fd, std::string& out) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    if (out.size() + static_cast<size_t>(n) > kMaxUserFileBytes) return EFBIG;
    out.append(buf, static_cast<size_t>(n));
  }
}

std::optional<UserFile> read_file(const std::string& path, const std::string& what, const std::string& fix,
                                  bool missing_ok, FinalLink link) {
  auto fail = [&](const std::string& problem) { return UsageError(what + " " + path + ": " + problem + "; " + fix); };
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer.
  const int no_follow = link == FinalLink::kRefuse ? O_NOFOLLOW : 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | no_follow);
  if (fd < 0) {
    if (errno == ENOENT && missing_ok) return std::nullopt;
    if (errno == ELOOP && no_follow) throw fail("is a symbolic link, not a regular file");
    throw fail(std::string("cannot read it (") + std::strerror(errno) + ")");
  }
  Fd closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw fail(std::string("cannot read it (") + std::strerror(errno) + ")");
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) return UserFile{"", st.st_mode, st.st_uid};  // /dev/null
  if (!S_ISREG(st.st_mode)) throw fail(std::string("is ") + kind_of(st.st_mode) + ", not a regular file");
  if (st.st_size > static_cast<off_t>(kMaxUserFileBytes))
    throw fail("is " + std::to_string(st.st_size) + " bytes, more than the 1 MiB dlaunch reads of a file it is given");
  UserFile f;
  f.mode = st.st_mode, f.owner = st.st_uid;
  f.text.reserve(static_cast<size_t>(st.st_size));
  if (const int err = read_bounded(fd, f.text); err == EFBIG)
    throw fail("grew past the 1 MiB dlaunch reads of a file it is given while it was read");
  else if (err != 0)
    throw fail(std::string("cannot read it (") + std::strerror(err) + ")");
  return f;
}

}  // namespace

UserFile read_user_file(const std::string& path, const std::string& what, const std::string& fix, FinalLink link) {
  return *read_file(path, what, fix, /*missing_ok=*/false, link);
}

std::optional<UserFile> read_user_file_if_present(const std::string& path, const std::string& what,
                                                  const std::string& fix, FinalLink link) {
  return read_file(path, what, fix, /*missing_ok=*/true, link);
}

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace dl
