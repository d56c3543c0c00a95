#include "wire/private_dir.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "errors/error.h"

namespace dl::wire {

namespace {
constexpr int kDirFlags = O_PATH | O_DIRECTORY | O_CLOEXEC;

std::string user_name(uid_t uid) {
  passwd pw{}, *found = nullptr;
  char buf[4096];
  return ::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found ? pw.pw_name : "";
}

// "user ana (uid 1002)", or "uid 1002" for a uid without a name.
std::string who(uid_t uid) {
  const std::string name = user_name(uid);
  return (name.empty() ? "" : "user " + name + " (") + "uid " + std::to_string(uid) + (name.empty() ? "" : ")");
}

// True for this user's private group: named as the user, no other member.
bool private_group(gid_t gid) {
  group gr{}, *found = nullptr;
  char buf[16384];
  if (::getgrgid_r(gid, &gr, buf, sizeof buf, &found) != 0 || !found) return false;
  const std::string me = user_name(::geteuid());
  if (me.empty() || me != gr.gr_name) return false;
  for (char** m = gr.gr_mem; *m; ++m)
    if (me != *m) return false;
  return true;
}

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

[[noreturn]] void refuse(const std::string& path, const std::string& problem, const std::string& todo) {
  throw UsageError((path == "." ? std::string("the working directory") : path) + " " + problem + ": " + todo);
}

std::string join(const std::string& dir, const std::string& name) {
  return dir == "." ? name : dir == "/" ? "/" + name : dir + "/" + name;
}

struct stat stat_of(const Socket& fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd.fd(), &st) != 0) throw_errno("cannot look at " + path);
  return st;
}

// Refuses `st`, the directory `path` that dlaunch writes or makes into,
// where someone else controls it.
void judge_dir(const struct stat& st, const std::string& path) {
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    refuse(path, "belongs to " + who(st.st_uid) + ", not to you",
           "dlaunch writes only into directories of your own; give a path of your own (a new name in /tmp or "
           "under your home)");
  if (st.st_mode & S_ISVTX) return;  // others may add names there, not replace ours
  if (st.st_mode & S_IWOTH)
    refuse(path, "is writable by every user (mode " + mode_text(st.st_mode) + ")",
           "another user could swap what dlaunch writes there; chmod o-w it, or give a directory of your own");
  if ((st.st_mode & S_IWGRP) && !private_group(st.st_gid))
    refuse(path, "is writable by its group (gid " + std::to_string(st.st_gid) + ", mode " + mode_text(st.st_mode) + ")",
           "another member could swap what dlaunch writes there; chmod g-w it, or give a directory of your own");
}

// Refuses `st`, the file `path`, unless it is a regular file of this user's with one link.
void judge_file(const struct stat& st, const std::string& path) {
  if (S_ISLNK(st.st_mode))
    refuse(path, "is a symbolic link", "dlaunch writes no file through a link; remove it or give another path");
  if (!S_ISREG(st.st_mode)) refuse(path, "is not a regular file", "remove it or give another path");
  if (st.st_uid != ::geteuid())
    refuse(path, "belongs to " + who(st.st_uid) + ", not to you",
           "dlaunch writes only files of your own; remove it or give another path");
  if (st.st_nlink != 1)
    refuse(path, "has " + std::to_string(st.st_nlink) + " names (hard links)",
           "dlaunch would write through all of them; remove it or give another path");
}

// The directory `name` in `dir`; a link only when it is this user's or
// root's. Invalid when nothing has that name.
Socket open_entry(const Socket& dir, const std::string& name, const std::string& path) {
  const int fd = ::openat(dir.fd(), name.c_str(), kDirFlags | O_NOFOLLOW);
  if (fd >= 0) return Socket(fd);
  if (errno == ENOENT) return Socket();
  // O_PATH|O_NOFOLLOW opens a link itself, which O_DIRECTORY then refuses.
  if (errno != ENOTDIR && errno != ELOOP) throw_errno("cannot open the directory " + path);
  struct stat st {};
  if (::fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw_errno("cannot open the directory " + path);
  if (!S_ISLNK(st.st_mode)) refuse(path, "is not a directory", "give the path of a directory");
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    refuse(path, "is a symbolic link of " + who(st.st_uid),
           "dlaunch follows only links of your own or root's; give the path it points to, if that is yours");
  const int target = ::openat(dir.fd(), name.c_str(), kDirFlags);
  if (target < 0) throw_errno("cannot open the directory " + path);
  return Socket(target);
}

// Makes `name` in `dir` (0700) and opens it; one that another process made
// first is opened as found (and judged by the caller).
Socket make_dir(const Socket& dir, const std::string& name, const std::string& path) {
  if (::mkdirat(dir.fd(), name.c_str(), 0700) != 0 && errno != EEXIST) throw_errno("cannot make the directory " + path);
  Socket made = open_entry(dir, name, path);
  if (!made.valid()) throw_errno("cannot open the directory " + path, ENOENT);
  return made;
}

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> names;
  size_t at = 0;
  while (at <= path.size()) {
    size_t slash = path.find('/', at);
    if (slash == std::string::npos) slash = path.size();
    std::string name = path.substr(at, slash - at);
    if (!name.empty() && name != ".") names.push_back(std::move(name));
    at = slash + 1;
  }
  return names;
}

enum class Walk { kOpen, kCreate, kCheck };

// Walks `path` (see the header). kCheck returns an invalid descriptor when
// it stops at a missing directory; `shown` becomes the path as walked.
Socket walk(const std::string& path, Walk mode, std::string& shown) {
  if (path.empty()) throw UsageError("an empty path names no directory");
  shown = path[0] == '/' ? "/" : ".";
  Socket dir(::open(shown.c_str(), kDirFlags));
  if (!dir.valid()) throw_errno("cannot open " + std::string(shown == "/" ? "/" : "the working directory"));
  for (const std::string& name : components(path)) {
    const std::string next = join(shown, name);
    Socket sub = open_entry(dir, name, next);
    if (!sub.valid()) {
      if (mode == Walk::kOpen) throw_errno("cannot open the directory " + next, ENOENT);
      judge_dir(stat_of(dir, shown), shown);
      if (mode == Walk::kCheck) return Socket();
      sub = make_dir(dir, name, next);
    }
    dir = std::move(sub);
    shown = next;
  }
  judge_dir(stat_of(dir, shown), shown);
  return dir;
}

// "dir/name" as (dir, name); a path ending in '/' names no file.
std::pair<std::string, std::string> split_file(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") throw UsageError(path + " names a directory, not a file");
  if (slash == std::string::npos) return {".", name};
  return {slash == 0 ? "/" : path.substr(0, slash), name};
}
}  // namespace

PrivateDir PrivateDir::open(const std::string& path, bool create) {
  std::string shown;
  Socket fd = walk(path, create ? Walk::kCreate : Walk::kOpen, shown);
  return PrivateDir(std::move(fd), shown);
}

void PrivateDir::check(const std::string& path) {
  std::string shown;
  walk(path, Walk::kCheck, shown);
}

PrivateDir PrivateDir::sub(const std::string& name) const {
  const std::string path = join(path_, name);
  Socket fd = open_entry(fd_, name, path);
  if (!fd.valid()) fd = make_dir(fd_, name, path);
  judge_dir(stat_of(fd, path), path);
  return PrivateDir(std::move(fd), path);
}

int PrivateDir::open_file(const std::string& name, bool truncate) const {
  const std::string path = join(path_, name);
  // O_NONBLOCK: a FIFO planted under that name must not hold the open up.
  const int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (truncate ? 0 : O_APPEND);
  Socket f(::openat(fd_.fd(), name.c_str(), flags, 0600));
  if (!f.valid()) {
    const int err = errno;
    check_file(name);  // a link, a FIFO, another user's file: said as such
    throw_errno("cannot write " + path, err);
  }
  const struct stat st = stat_of(f, path);
  judge_file(st, path);
  if (truncate && (((st.st_mode & 07777) != 0600 && ::fchmod(f.fd(), 0600) != 0) || ::ftruncate(f.fd(), 0) != 0))
    throw_errno("cannot write " + path);
  ::fcntl(f.fd(), F_SETFL, ::fcntl(f.fd(), F_GETFL) & ~O_NONBLOCK);
  return f.release();
}

void PrivateDir::write_file(const std::string& name, std::string_view text) const {
  Socket f(open_file(name, true));
  while (!text.empty()) {
    const ssize_t n = ::write(f.fd(), text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_errno("cannot write " + join(path_, name), n < 0 ? errno : ENOSPC);
    text.remove_prefix(static_cast<size_t>(n));
  }
  if (::close(f.release()) != 0) throw_errno("cannot write " + join(path_, name));
}

void PrivateDir::check_file(const std::string& name) const {
  struct stat st {};
  if (::fstatat(fd_.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return judge_file(st, join(path_, name));
  if (errno != ENOENT) throw_errno("cannot look at " + join(path_, name));
}

void write_private_file(const std::string& path, std::string_view text) {
  const auto [dir, name] = split_file(path);
  PrivateDir::open(dir, false).write_file(name, text);
}

void check_private_file(const std::string& path) {
  const auto [dir, name] = split_file(path);
  PrivateDir::open(dir, false).check_file(name);
}

}  // namespace dl::wire
