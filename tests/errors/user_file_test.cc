// The one reader of files a user names (errors/user_file.h): regular files
// only, at most 1 MiB, a FIFO refused without waiting for a writer.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "errors/error.h"
#include "errors/user_file.h"

namespace {
struct Scratch {
  Scratch() {
    char t[] = "/tmp/dl-userfile-XXXXXX";
    REQUIRE(::mkdtemp(t));
    dir = t;
  }
  ~Scratch() { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string p = dir + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  std::string dir;
};

std::string error_of(const std::string& path) {
  try {
    dl::read_user_file(path, "--thing", "do this");
  } catch (const dl::UsageError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("user file: a regular file is read whole, with its mode and owner", "[errors]") {
  Scratch s;
  const std::string p = s.write("f", std::string("a\0b\n", 4));
  ::chmod(p.c_str(), 0640);
  const auto f = dl::read_user_file(p, "--thing");
  CHECK(f.text == std::string("a\0b\n", 4));
  CHECK((f.mode & 07777) == 0640);
  CHECK(S_ISREG(f.mode));
  CHECK(f.owner == ::geteuid());
  CHECK(dl::read_user_file(s.write("empty", ""), "--thing").text.empty());
  CHECK(dl::read_user_file("/dev/null", "--thing").text.empty());  // "no file", as DLAUNCH_CONFIG=/dev/null
}

TEST_CASE("user file: exactly 1 MiB is read, one byte more is refused naming the cap", "[errors]") {
  Scratch s;
  CHECK(dl::read_user_file(s.write("max", std::string(dl::kMaxUserFileBytes, 'x')), "--thing").text.size() ==
        dl::kMaxUserFileBytes);
  const std::string big = s.write("big", std::string(dl::kMaxUserFileBytes + 1, 'x'));
  CHECK(error_of(big) == "--thing " + big + ": is 1048577 bytes, more than the 1 MiB dlaunch reads of a file it is "
                         "given; do this");
}

TEST_CASE("user file: a directory, a device and a missing file are refused by name", "[errors]") {
  Scratch s;
  CHECK(error_of(s.dir) == "--thing " + s.dir + ": is a directory, not a regular file; do this");
  CHECK(error_of("/dev/zero") == "--thing /dev/zero: is a character device, not a regular file; do this");
  CHECK(error_of(s.dir + "/none") == "--thing " + s.dir + "/none: cannot read it (No such file or directory); do this");
  CHECK_FALSE(dl::read_user_file_if_present(s.dir + "/none", "--thing"));
  // Present but not readable as a file is still an error for the _if_present form.
  CHECK_THROWS_AS(dl::read_user_file_if_present(s.dir, "--thing"), dl::UsageError);
  CHECK(dl::read_user_file_if_present(s.write("f", "x"), "--thing")->text == "x");
}

TEST_CASE("user file: a FIFO is refused at once, without waiting for a writer", "[errors]") {
  Scratch s;
  const std::string fifo = s.dir + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  CHECK(error_of(fifo) == "--thing " + fifo + ": is a FIFO (named pipe), not a regular file; do this");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("user file: a file this user may not read is named with the system's reason", "[errors]") {
  if (::geteuid() == 0) {
    WARN("skipped: root reads a mode-0000 file");
    return;
  }
  Scratch s;
  const std::string p = s.write("secret", "x");
  ::chmod(p.c_str(), 0);
  CHECK(error_of(p) == "--thing " + p + ": cannot read it (Permission denied); do this");
}

TEST_CASE("user file: FinalLink::kRefuse refuses a link at the path, kFollow follows it", "[errors]") {
  Scratch s;
  const std::string target = s.write("target", "{}");
  const std::string link = s.dir + "/link";
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  CHECK(dl::read_user_file(link, "--thing").text == "{}");
  try {
    dl::read_user_file_if_present(link, "--thing", "do this", dl::FinalLink::kRefuse);
    FAIL("a link was read");
  } catch (const dl::UsageError& e) {
    CHECK(std::string(e.what()) == "--thing " + link + ": is a symbolic link, not a regular file; do this");
  }
  // A link to /dev/zero: refused as a link, before anything is opened through it.
  const std::string zero = s.dir + "/zero";
  REQUIRE(::symlink("/dev/zero", zero.c_str()) == 0);
  CHECK_THROWS_AS(dl::read_user_file(zero, "--thing", "do this", dl::FinalLink::kRefuse), dl::UsageError);
  CHECK_FALSE(dl::read_user_file_if_present(s.dir + "/none", "--thing", "do this", dl::FinalLink::kRefuse));
  CHECK(dl::read_user_file(target, "--thing", "do this", dl::FinalLink::kRefuse).text == "{}");
}
