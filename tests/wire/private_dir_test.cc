// wire/private_dir.h: what dlaunch writes for its user never goes through a
// planted link or into a place someone else controls. Owners other than this
// user are made with chown, so those cases need root (CI runs as root); the
// attack by a real other user is in tests/security/output_test.cc.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "errors/error.h"
#include "wire/private_dir.h"

using dl::wire::PrivateDir;
namespace fs = std::filesystem;

namespace {
constexpr uid_t kNobody = 65534;

struct Scratch {
  Scratch() {
    char tmpl[] = "/tmp/dl-private-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~Scratch() { fs::remove_all(path); }
  std::string path;
};

mode_t mode_of(const std::string& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_and_close(int fd, const std::string& text) {
  REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  ::close(fd);
}
}  // namespace

TEST_CASE("private dir: missing directories are made 0700, files 0600, and an old file of ours is emptied",
          "[wire]") {
  Scratch s;
  const PrivateDir d = PrivateDir::open(s.path + "/a//b/./c/", true);
  CHECK(d.path() == s.path + "/a/b/c");
  for (const char* sub : {"/a", "/a/b", "/a/b/c"}) CHECK(mode_of(s.path + sub) == 0700);
  write_and_close(d.open_file("out", true), "first\n");
  CHECK(mode_of(d.path() + "/out") == 0600);
  write_and_close(d.open_file("out", false), "appended\n");
  CHECK(slurp(d.path() + "/out") == "first\nappended\n");
  ::chmod((d.path() + "/out").c_str(), 0644);
  write_and_close(d.open_file("out", true), "again\n");
  CHECK(slurp(d.path() + "/out") == "again\n");
  CHECK(mode_of(d.path() + "/out") == 0600);
  CHECK(mode_of(d.sub("rank.0").path()) == 0700);
}

TEST_CASE("private dir: a directory others may write to is refused, unless it is sticky (as /tmp)", "[wire]") {
  Scratch s;
  const std::string shared = s.path + "/shared";
  ::mkdir(shared.c_str(), 0777);
  ::chmod(shared.c_str(), 0777);
  CHECK_THROWS_WITH(PrivateDir::open(shared + "/run", true),
                    Catch::Contains(shared + " is writable by every user (mode 0777)") && Catch::Contains("chmod o-w"));
  CHECK_THROWS_AS(PrivateDir::check(shared + "/run/deeper"), dl::UsageError);
  CHECK_FALSE(fs::exists(shared + "/run"));
  ::chmod(shared.c_str(), 01777);
  CHECK_NOTHROW(PrivateDir::open(shared + "/run", true));
  CHECK_NOTHROW(PrivateDir::open("/tmp", false));
  ::chmod(shared.c_str(), 0775);
  if (::geteuid() == 0) {
    // Writable by a group other than this user's own.
    REQUIRE(::chown(shared.c_str(), 0, kNobody) == 0);
    CHECK_THROWS_WITH(PrivateDir::open(shared, false), Catch::Contains("writable by its group"));
  }
}

TEST_CASE("private dir: check() makes nothing and stops at the first missing directory", "[wire]") {
  Scratch s;
  CHECK_NOTHROW(PrivateDir::check(s.path + "/x/y/z"));
  CHECK_FALSE(fs::exists(s.path + "/x"));
  CHECK_THROWS_AS(PrivateDir::open(s.path + "/x", false), dl::IoError);
  { std::ofstream(s.path + "/file") << "x"; }
  CHECK_THROWS_WITH(PrivateDir::check(s.path + "/file/sub"), Catch::Contains("is not a directory"));
}

TEST_CASE("private dir: no file is written through a link, a second name, or a FIFO", "[wire]") {
  Scratch s;
  const PrivateDir d = PrivateDir::open(s.path, false);
  { std::ofstream(s.path + "/precious") << "keep\n"; }
  fs::create_symlink(s.path + "/precious", s.path + "/link");
  CHECK_THROWS_WITH(d.open_file("link", true), Catch::Contains("/link is a symbolic link"));
  REQUIRE(::link((s.path + "/precious").c_str(), (s.path + "/second").c_str()) == 0);
  CHECK_THROWS_WITH(d.open_file("second", true), Catch::Contains("has 2 names"));
  CHECK(slurp(s.path + "/precious") == "keep\n");
  REQUIRE(::mkfifo((s.path + "/fifo").c_str(), 0600) == 0);  // no reader: a blocking open would hang
  CHECK_THROWS_WITH(d.open_file("fifo", true), Catch::Contains("is not a regular file"));
  CHECK_THROWS_WITH(dl::wire::check_private_file(s.path + "/link"), Catch::Contains("symbolic link"));
  CHECK_THROWS_AS(dl::wire::write_private_file(s.path + "/", "x"), dl::UsageError);
  CHECK_THROWS_AS(dl::wire::write_private_file(s.path + "/missing/file", "x"), dl::IoError);
  dl::wire::write_private_file(s.path + "/report.json", "{}\n");
  CHECK(slurp(s.path + "/report.json") == "{}\n");
  CHECK(mode_of(s.path + "/report.json") == 0600);
}

TEST_CASE("private dir: a directory link is followed when it is ours or root's, not another user's", "[wire]") {
  Scratch s;
  ::mkdir((s.path + "/real").c_str(), 0700);
  fs::create_directory_symlink(s.path + "/real", s.path + "/mine");
  const PrivateDir d = PrivateDir::open(s.path + "/mine/run", true);
  write_and_close(d.open_file("out", true), "x");
  CHECK(slurp(s.path + "/real/run/out") == "x");
  if (::geteuid() != 0) {
    WARN("needs root to give a link and a directory to another user; the rest skipped");
    return;
  }
  REQUIRE(::lchown((s.path + "/mine").c_str(), kNobody, kNobody) == 0);
  CHECK_THROWS_WITH(PrivateDir::open(s.path + "/mine/run", true),
                    Catch::Contains(s.path + "/mine is a symbolic link of") && Catch::Contains("uid 65534"));
  REQUIRE(::chown((s.path + "/real/run").c_str(), kNobody, kNobody) == 0);
  CHECK_THROWS_WITH(PrivateDir::open(s.path + "/real/run", true), Catch::Contains("uid 65534") &&
                                                                       Catch::Contains("not to you"));
  REQUIRE(::chown((s.path + "/real/run").c_str(), 0, 0) == 0);
  REQUIRE(::chown((s.path + "/real/run/out").c_str(), kNobody, kNobody) == 0);
  CHECK_THROWS_WITH(PrivateDir::open(s.path + "/real/run", false).open_file("out", true),
                    Catch::Contains("/real/run/out belongs to") && Catch::Contains("not to you"));
  CHECK(slurp(s.path + "/real/run/out") == "x");
}
