// dlaunch's temp dirs (errors/temp_dirs.h): named for their owner, and
// removed by the reaper only when that owner is gone, the directory is this
// user's own 0700 one, and without following a link.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "errors/temp_dirs.h"

namespace fs = std::filesystem;

namespace {
struct Scratch {
  Scratch() {
    char t[] = "/tmp/dl-tempdirs-XXXXXX";
    REQUIRE(::mkdtemp(t));
    dir = t;
  }
  ~Scratch() { fs::remove_all(dir); }
  // `name` made 0700 here, with a file in it; its path.
  std::string make(const std::string& name, mode_t mode = 0700) {
    const std::string p = dir + "/" + name;
    REQUIRE(::mkdir(p.c_str(), 0700) == 0);
    std::ofstream(p + "/f") << "x";
    REQUIRE(::chmod(p.c_str(), mode) == 0);
    return p;
  }
  std::string dir;
};

bool exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

// A pid that was a process's and is no more.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

// A live child's temp_dir_prefix(kind): it waits until killed.
struct LiveChild {
  explicit LiveChild(const std::string& kind) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid = ::fork();
    if (pid == 0) {
      const std::string p = dl::temp_dir_prefix(kind);
      (void)!::write(fds[1], p.data(), p.size());
      ::close(fds[1]);
      ::pause();
      ::_exit(0);
    }
    ::close(fds[1]);
    char buf[256];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    ::close(fds[0]);
    REQUIRE(n > 0);
    prefix.assign(buf, static_cast<size_t>(n));
  }
  ~LiveChild() { end(); }
  void end() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  pid_t pid = -1;
  std::string prefix;
};

// This process's "<start>.<pidns>." part of its prefix.
std::string own_identity() {
  const std::string p = dl::temp_dir_prefix("py");
  return p.substr(p.find("-py-") + 4);
}
}  // namespace

TEST_CASE("temp dirs: a name says its owner's pid, kind, start time and pid namespace", "[errors]") {
  const std::string p = dl::temp_dir_prefix("store");
  CHECK(p.rfind("dlaunch-" + std::to_string(::getpid()) + "-store-", 0) == 0);
  const auto o = dl::parse_temp_dir_name(p + "Ab12Cd");
  REQUIRE(o);
  CHECK(o->pid == ::getpid());
  CHECK(o->kind == "store");
  REQUIRE(o->start);
  CHECK(*o->start > 0);
  REQUIRE(o->pid_ns);
  CHECK(*o->pid_ns > 0);
  CHECK_FALSE(dl::temp_dir_owner_gone(*o));

  // An older dlaunch's names: the pid alone.
  const auto old = dl::parse_temp_dir_name("dlaunch-4711-py-0a1b2c3d4e5f");
  REQUIRE(old);
  CHECK(old->pid == 4711);
  CHECK(old->kind.empty());
  CHECK_FALSE(old->start);
  CHECK(dl::parse_temp_dir_name("dlaunch-4711-AbCdEf"));
  // Not a process's: left alone whatever else they are.
  for (const char* n : {"dlaunch-stacks-Qx81Zk", "dlaunch-doctor-Qx81Zk", "dlaunch--x", "dlaunch-4711", "dlaunch-0-x",
                        "dlaunch-12345678901-x", "dl-4711-x", "xdlaunch-4711-x"})
    CHECK_FALSE(dl::parse_temp_dir_name(n));
}

TEST_CASE("temp dirs: the reaper removes a gone owner's dirs, with what is in them, and no live one's",
          "[errors]") {
  Scratch s;
  const std::string id = own_identity();
  // Gone: its pid has no process; its pid now has another process (the start
  // time differs); an older name of a gone pid.
  const std::string gone = s.make("dlaunch-" + std::to_string(dead_pid()) + "-py-" + id + "a1");
  LiveChild other("py");
  const std::string reused = s.make("dlaunch-" + std::to_string(other.pid) + "-py-1." + id.substr(id.find('.') + 1) + "b2");
  const std::string older = s.make("dlaunch-" + std::to_string(dead_pid()) + "-0a1b2c3d4e5f");
  // Kept: a live owner's, this process's own, another pid namespace's (the
  // pid is gone here, which says nothing of it there), a mode other than
  // 0700, and names that are no process's.
  const std::string live = s.make(other.prefix + "c3");
  const std::string own = s.make(dl::temp_dir_prefix("store") + "d4");
  const std::string foreign_ns = s.make("dlaunch-" + std::to_string(dead_pid()) + "-py-" + id.substr(0, id.find('.')) +
                                        ".1.e5");
  const std::string open_mode = s.make("dlaunch-" + std::to_string(dead_pid()) + "-py-" + id + "f6", 0755);
  const std::string stacks = s.make("dlaunch-stacks-Qx81Zk");
  // What is in a gone one goes too: a subdirectory, a FIFO, a link.
  REQUIRE(::mkdir((gone + "/sub").c_str(), 0700) == 0);
  std::ofstream(gone + "/sub/g") << "y";
  REQUIRE(::mkfifo((gone + "/fifo").c_str(), 0600) == 0);

  CHECK(dl::reap_stale_temp_dirs(s.dir) == 3);
  CHECK_FALSE(exists(gone));
  CHECK_FALSE(exists(reused));
  CHECK_FALSE(exists(older));
  for (const auto& kept : {live, own, foreign_ns, open_mode, stacks}) {
    INFO(kept);
    CHECK(exists(kept + "/f"));
  }
  // Once its owner is gone, the live one's goes too.
  other.end();
  CHECK(dl::reap_stale_temp_dirs(s.dir) == 1);
  CHECK_FALSE(exists(live));
  CHECK(exists(own));
}

TEST_CASE("temp dirs: the reaper follows no link, neither at the name nor inside", "[errors]") {
  Scratch s;
  const std::string id = own_identity();
  // What links point at: must outlive the reaping.
  const std::string precious = s.make("precious");
  // A link named as a gone owner's dir: not a directory, left alone.
  const std::string link = s.dir + "/dlaunch-" + std::to_string(dead_pid()) + "-py-" + id + "a1";
  REQUIRE(::symlink(precious.c_str(), link.c_str()) == 0);
  // A gone owner's dir holding links to the directory and to its file.
  const std::string gone = s.make("dlaunch-" + std::to_string(dead_pid()) + "-store-" + id + "b2");
  REQUIRE(::symlink(precious.c_str(), (gone + "/to_dir").c_str()) == 0);
  REQUIRE(::symlink((precious + "/f").c_str(), (gone + "/to_file").c_str()) == 0);
  REQUIRE(::mkdir((gone + "/sub").c_str(), 0700) == 0);
  REQUIRE(::symlink(precious.c_str(), (gone + "/sub/deeper").c_str()) == 0);

  CHECK(dl::reap_stale_temp_dirs(s.dir) == 1);
  CHECK_FALSE(exists(gone));
  CHECK(exists(link));
  CHECK(exists(precious + "/f"));
}

TEST_CASE("temp dirs: the reaper leaves another user's dirs alone", "[errors]") {
  if (::geteuid() != 0) {
    WARN("skipped: needs root to make a directory another user owns");
    return;
  }
  Scratch s;
  const std::string theirs = s.make("dlaunch-" + std::to_string(dead_pid()) + "-py-" + own_identity() + "a1");
  REQUIRE(::chown(theirs.c_str(), 65534, 65534) == 0);
  CHECK(dl::reap_stale_temp_dirs(s.dir) == 0);
  CHECK(exists(theirs + "/f"));
}

TEST_CASE("temp dirs: temp_base is TMPDIR, else /tmp", "[errors]") {
  const char* was = std::getenv("TMPDIR");
  const std::string saved = was ? was : "";
  ::setenv("TMPDIR", "/somewhere", 1);
  CHECK(dl::temp_base() == "/somewhere");
  ::setenv("TMPDIR", "", 1);
  CHECK(dl::temp_base() == "/tmp");
  if (was) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
}

// A stack report outlives its job (the user was told to read it), for a
// week; the next report of the same user removes older ones of its own.
TEST_CASE("temp dirs: stack reports of over a week ago are removed, newer ones and odd ones kept", "[errors]") {
  Scratch s;
  const std::string old_report = s.make("dlaunch-stacks-OLD123"), new_report = s.make("dlaunch-stacks-NEW123"),
                    old_open = s.make("dlaunch-stacks-OPEN12", 0755), old_other = s.make("dlaunch-other-OLD123");
  const timespec weeks_ago[2] = {{::time(nullptr) - 8 * 24 * 3600, 0}, {::time(nullptr) - 8 * 24 * 3600, 0}};
  for (const auto& p : {old_report, old_open, old_other}) REQUIRE(::utimensat(AT_FDCWD, p.c_str(), weeks_ago, 0) == 0);
  // A link named as a report, to an old dir of ours: the link is no dir of ours.
  const std::string target = s.make("target");
  REQUIRE(::utimensat(AT_FDCWD, target.c_str(), weeks_ago, 0) == 0);
  REQUIRE(::symlink(target.c_str(), (s.dir + "/dlaunch-stacks-LINK12").c_str()) == 0);
  CHECK(dl::reap_old_stack_reports(s.dir) == 1);
  CHECK_FALSE(exists(old_report));
  CHECK(exists(new_report));
  CHECK(exists(old_open));   // not 0700: not one dlaunch made
  CHECK(exists(old_other));  // not a report
  CHECK(exists(target + "/f"));
  CHECK(exists(s.dir + "/dlaunch-stacks-LINK12"));
}
