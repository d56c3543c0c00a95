#include "rendezvous/private_file.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "errors/error.h"

namespace dl::rdzv {
namespace {

std::string owner_of(const struct stat& st) {
  std::string s = "uid " + std::to_string(st.st_uid);
  struct passwd pw{}, *found = nullptr;
  char buf[1024];
  if (::getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &found) == 0 && found) s += " (" + std::string(pw.pw_name) + ")";
  return s;
}

std::string mode_of(const struct stat& st) {
  char m[8];
  std::snprintf(m, sizeof m, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return m;
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  return "not a regular file";
}

constexpr const char* kWhatToDo =
    "; someone else may have put it there to read the job's token: remove it, or use a fresh path in a directory "
    "only you can write";

int open_dir(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open the directory of store file " + path + " (" + dir + ")");
  struct stat st{};
  ::fstat(fd, &st);
  std::string why;
  if (st.st_uid != ::geteuid() && st.st_uid != 0) why = "belongs to " + owner_of(st) + ", not to you or root";
  else if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) why = "is writable by everyone and not sticky";
  if (why.empty()) return fd;
  ::close(fd);
  throw UsageError("directory " + dir + " of store file " + path + " " + why + " (mode " + mode_of(st) +
                   "): another user could replace the file there; use a directory of your own (or a sticky one such "
                   "as /tmp)");
}

}  // namespace

PrivateFile::PrivateFile(std::string path) : path_(std::move(path)) {
  const auto slash = path_.rfind('/');
  name_ = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  if (name_.empty()) throw UsageError("store file " + path_ + " names a directory, not a file");
  dir_fd_ = open_dir(path_);
  try {
    fd_ = open_checked();
  } catch (...) {
    ::close(dir_fd_);
    throw;
  }
}

PrivateFile::~PrivateFile() {
  if (fd_ >= 0) ::close(fd_);
  ::close(dir_fd_);
}

void PrivateFile::reopen() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  fd_ = open_checked();
}

bool PrivateFile::current() const {
  struct stat mine{}, now{};
  return ::fstat(fd_, &mine) == 0 && ::fstatat(dir_fd_, name_.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
         mine.st_ino == now.st_ino && mine.st_dev == now.st_dev;
}

bool PrivateFile::unlink() const { return ::unlinkat(dir_fd_, name_.c_str(), 0) == 0; }

int PrivateFile::open_checked() const {
  const char* name = name_.c_str();
  for (int tries = 0;; ++tries) {
    int fd = ::openat(dir_fd_, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
    if (errno != EEXIST) throw_errno("cannot create store file " + path_ + " (is its directory writable?)");
    fd = ::openat(dir_fd_, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && tries < 100) continue;  // its last user just removed it
    struct stat st{};
    if (fd < 0 && errno == ELOOP && ::fstatat(dir_fd_, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
      throw UsageError("store file " + path_ + " is a symbolic link of " + owner_of(st) + ", not followed" + kWhatToDo);
    if (fd < 0) throw_errno("cannot open store file " + path_);
    ::fstat(fd, &st);
    std::string why;
    if (!S_ISREG(st.st_mode)) why = std::string("is ") + kind_of(st.st_mode);
    else if (st.st_uid != ::geteuid()) why = "is not yours";
    else if (st.st_mode & 077) why = "can be read or written by group or others (not mode 0600)";
    if (why.empty()) return fd;
    ::close(fd);
    throw UsageError("store file " + path_ + " " + why + " (owner " + owner_of(st) + ", mode " + mode_of(st) + ")" +
                     kWhatToDo);
  }
}

}  // namespace dl::rdzv
