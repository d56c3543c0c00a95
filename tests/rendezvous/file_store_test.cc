// The FileStore's file is the job's: created 0600, and nobody else's file,
// loose file or planted link is adopted (rendezvous/private_file.h). The
// attacks by a real second user are in tests/security/collectives_test.cc.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "errors/error.h"
#include "tests/rendezvous/store_envs.h"

using dl::rdzv::FileStore;
using dl::rdzv::testing::TempDir;

namespace {

mode_t mode_of(const std::string& path) {
  struct stat st{};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// The UsageError FileStore(path) throws; fails the test when it opens.
std::string refusal(const std::string& path) {
  try {
    FileStore s(path);
  } catch (const dl::UsageError& e) {
    return e.what();
  }
  FAIL("FileStore accepted " << path);
  return "";
}

}  // namespace

TEST_CASE("file store: the file is created mode 0600 whatever the umask, and removed by its last user",
          "[rendezvous]") {
  TempDir dir;
  const std::string path = dir.path + "/store";
  const mode_t old = ::umask(0);
  {
    FileStore a(path), b(path);
    ::umask(old);
    CHECK(mode_of(path) == 0600);
    a.set("k", "v");
    CHECK(b.get("k") == "v");
  }
  ::umask(old);
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("file store: a file others can read is refused, named with its mode, and left as it was",
          "[rendezvous]") {
  TempDir dir;
  const std::string path = dir.path + "/store";
  { std::ofstream(path) << "planted"; }
  ::chmod(path.c_str(), 0644);
  const std::string why = refusal(path);
  CHECK_THAT(why, Catch::Contains(path) && Catch::Contains("0644") && Catch::Contains("group or others") &&
                      Catch::Contains("remove it"));
  CHECK(mode_of(path) == 0644);
  CHECK(std::filesystem::file_size(path) == 7);
}

TEST_CASE("file store: a symbolic link at the path is not followed", "[rendezvous]") {
  TempDir dir;
  const std::string path = dir.path + "/store", target = dir.path + "/target";
  REQUIRE(::symlink(target.c_str(), path.c_str()) == 0);
  CHECK_THAT(refusal(path), Catch::Contains("symbolic link") && Catch::Contains("not followed"));
  CHECK_FALSE(std::filesystem::exists(target));  // not created through the link
  { std::ofstream(target) << "mine"; }
  ::chmod(target.c_str(), 0600);
  CHECK_THAT(refusal(path), Catch::Contains("symbolic link"));
  CHECK(std::filesystem::file_size(target) == 4);  // nothing appended through it
}

TEST_CASE("file store: a FIFO or a directory at the path is refused at once", "[rendezvous]") {
  TempDir dir;
  REQUIRE(::mkfifo((dir.path + "/fifo").c_str(), 0600) == 0);
  CHECK_THAT(refusal(dir.path + "/fifo"), Catch::Contains("a FIFO"));
  REQUIRE(::mkdir((dir.path + "/sub").c_str(), 0700) == 0);
  CHECK_THROWS_AS(FileStore(dir.path + "/sub"), dl::Error);
}

TEST_CASE("file store: a world-writable directory must be sticky", "[rendezvous]") {
  TempDir dir;
  ::chmod(dir.path.c_str(), 0777);
  CHECK_THAT(refusal(dir.path + "/store"), Catch::Contains("writable by everyone and not sticky"));
  CHECK_FALSE(std::filesystem::exists(dir.path + "/store"));
  ::chmod(dir.path.c_str(), 01777);
  FileStore s(dir.path + "/store");
  s.set("k", "v");
  CHECK(mode_of(dir.path + "/store") == 0600);
}

TEST_CASE("file store: another user's file or directory is refused, naming its owner", "[rendezvous]") {
  if (::geteuid() != 0) {
    WARN("needs root to give a file to another uid; skipped");
    return;
  }
  TempDir dir;
  const std::string path = dir.path + "/store";
  { std::ofstream(path) << ""; }
  ::chmod(path.c_str(), 0600);
  REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
  CHECK_THAT(refusal(path), Catch::Contains("is not yours") && Catch::Contains("uid 65534"));
  REQUIRE(::mkdir((dir.path + "/theirs").c_str(), 0755) == 0);
  REQUIRE(::chown((dir.path + "/theirs").c_str(), 65534, 65534) == 0);
  CHECK_THAT(refusal(dir.path + "/theirs/store"), Catch::Contains("belongs to uid 65534"));
}

TEST_CASE("file store: a file replaced by someone else's while in use is refused, not adopted", "[rendezvous]") {
  TempDir dir;
  const std::string path = dir.path + "/store";
  FileStore s(path);
  s.set("k", "v");
  REQUIRE(::unlink(path.c_str()) == 0);
  { std::ofstream(path) << ""; }
  ::chmod(path.c_str(), 0666);
  CHECK_THROWS_AS(s.set("k2", "v2"), dl::UsageError);
  CHECK(std::filesystem::file_size(path) == 0);
  std::filesystem::remove(path);
}
