#include "errors/temp_dirs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <vector>

namespace dl {
namespace {

// Deeper than any directory dlaunch or a rank makes; what lies deeper is left.
constexpr int kMaxDepth = 32;

bool all_digits(std::string_view s) {
  if (s.empty() || s.size() > 20) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

bool all_letters(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isalpha(static_cast<unsigned char>(c))) return false;
  return true;
}

unsigned long long number(std::string_view s) { return std::strtoull(std::string(s).c_str(), nullptr, 10); }

// Field 22 of /proc/<pid>/stat (`pid` 0: this process) into `start`: 0, or
// the errno of the failed read (ENOENT: no such process).
int read_start_time(pid_t pid, unsigned long long& start) {
  const std::string path = pid == 0 ? "/proc/self/stat" : "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  const int err = errno;
  ::close(fd);
  if (n <= 0) return n < 0 ? err : ESRCH;  // empty: it ended while read
  const std::string_view text(buf, static_cast<size_t>(n));
  // The name (field 2) is in parentheses and may hold spaces and ')'.
  size_t at = text.rfind(')');
  if (at == std::string_view::npos) return EINVAL;
  for (int field = 2; field < 22; ++field) {
    at = text.find(' ', at + 1);
    if (at == std::string_view::npos) return EINVAL;
  }
  const size_t end = text.find(' ', at + 1);
  const std::string_view value = text.substr(at + 1, end == std::string_view::npos ? end : end - at - 1);
  if (!all_digits(value)) return EINVAL;
  start = number(value);
  return 0;
}

// The inode of this process's pid namespace, 0 when unknown.
unsigned long long own_pid_ns() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}

// `name` in `dir` is a directory of this effective user, mode 0700, not a link.
bool own_private_dir(int dir, const char* name, struct stat& st) {
  return ::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
         (st.st_mode & 07777) == 0700;
}

// Removes the directory `name` in `parent` and what it holds, following no
// link: `expect` is what fstatat saw there (the same directory must be
// opened), `dev` the file system it may not leave. True when it is gone.
bool remove_tree_at(int parent, const char* name, const struct stat* expect, dev_t dev, int depth) {
  if (depth > kMaxDepth) return false;
  const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_dev != dev || (expect && st.st_ino != expect->st_ino)) {
    ::close(fd);
    return false;
  }
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return false;
  }
  std::vector<std::string> subdirs;
  while (dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    // A link, a socket, a file: the entry itself goes. A directory says so.
    if (::unlinkat(fd, e->d_name, 0) == 0 || errno == ENOENT) continue;
    if (errno == EISDIR || errno == EPERM) subdirs.emplace_back(n);
  }
  for (const auto& s : subdirs) remove_tree_at(fd, s.c_str(), nullptr, dev, depth + 1);
  ::closedir(d);
  return ::unlinkat(parent, name, AT_REMOVEDIR) == 0;
}

}  // namespace

std::string temp_base() {
  const char* base = std::getenv("TMPDIR");
  return base && *base ? base : "/tmp";
}

std::string temp_dir_prefix(const std::string& kind) {
  unsigned long long start = 0;
  read_start_time(0, start);  // unknown: 0, which the reaper does not compare
  return "dlaunch-" + std::to_string(::getpid()) + "-" + kind + "-" + std::to_string(start) + "." +
         std::to_string(own_pid_ns()) + ".";
}

std::optional<TempDirOwner> parse_temp_dir_name(std::string_view name) {
  constexpr std::string_view kHead = "dlaunch-";
  if (name.substr(0, kHead.size()) != kHead) return std::nullopt;
  name.remove_prefix(kHead.size());
  const size_t dash = name.find('-');
  if (dash == std::string_view::npos || dash > 9 || !all_digits(name.substr(0, dash))) return std::nullopt;
  TempDirOwner o;
  o.pid = static_cast<pid_t>(number(name.substr(0, dash)));
  if (o.pid <= 0) return std::nullopt;
  const std::string_view rest = name.substr(dash + 1);
  // <kind>-<start>.<pidns>.<random>; anything else is an older name.
  const size_t k = rest.find('-'), d1 = rest.find('.', k + 1), d2 = rest.find('.', d1 + 1);
  if (k != std::string_view::npos && d1 != std::string_view::npos && d2 != std::string_view::npos &&
      all_letters(rest.substr(0, k)) && all_digits(rest.substr(k + 1, d1 - k - 1)) &&
      all_digits(rest.substr(d1 + 1, d2 - d1 - 1)) && d2 + 1 < rest.size()) {
    o.kind = std::string(rest.substr(0, k));
    o.start = number(rest.substr(k + 1, d1 - k - 1));
    o.pid_ns = number(rest.substr(d1 + 1, d2 - d1 - 1));
  }
  return o;
}

bool temp_dir_owner_gone(const TempDirOwner& owner) {
  unsigned long long own_start = 0;
  if (read_start_time(0, own_start) != 0) return false;  // no /proc: nothing can be told
  if (owner.pid_ns && (*owner.pid_ns == 0 || *owner.pid_ns != own_pid_ns())) return false;
  unsigned long long start = 0;
  const int err = read_start_time(owner.pid, start);
  if (err == ENOENT || err == ESRCH) return true;
  if (err != 0) return false;
  return owner.start && *owner.start != 0 && *owner.start != start;
}

// Removes from `base` the directories whose name `stale` takes, when each is
// this user's own 0700 directory; how many went.
template <class Stale> size_t reap_in(const std::string& base, Stale stale_name) {
  const int fd = ::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return 0;
  }
  std::vector<std::pair<std::string, struct stat>> stale;
  while (dirent* e = ::readdir(d)) {
    struct stat st {};
    if (own_private_dir(fd, e->d_name, st) && stale_name(e->d_name, st)) stale.emplace_back(e->d_name, st);
  }
  size_t removed = 0;
  for (const auto& [name, st] : stale) removed += remove_tree_at(fd, name.c_str(), &st, st.st_dev, 0);
  ::closedir(d);
  return removed;
}

size_t reap_stale_temp_dirs(const std::string& base) {
  return reap_in(base, [](const char* name, const struct stat&) {
    const auto owner = parse_temp_dir_name(name);
    return owner && owner->pid != ::getpid() && temp_dir_owner_gone(*owner);
  });
}

size_t reap_old_stack_reports(const std::string& base, long keep_seconds) {
  const time_t now = ::time(nullptr);
  return reap_in(base, [&](const char* name, const struct stat& st) {
    return std::string_view(name).rfind("dlaunch-stacks-", 0) == 0 && now - st.st_mtime > keep_seconds;
  });
}

}  // namespace dl
