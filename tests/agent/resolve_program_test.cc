#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/rank_process.h"

using dl::agent::resolve_program;

namespace {
struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/dl-resolve-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name, int mode) const {
    std::string p = path + "/" + name;
    std::ofstream(p) << "#!/bin/sh\n";
    ::chmod(p.c_str(), static_cast<mode_t>(mode));
    return p;
  }
  std::string path;
};
}  // namespace

TEST_CASE("resolve: a path with '/' is taken as it is", "[agent]") {
  TempDir d;
  const std::string exe = d.file("app", 0755);
  auto r = resolve_program(exe, "/nonexistent");
  CHECK(r.code == 0);
  CHECK(r.path == exe);
}

TEST_CASE("resolve: a missing path is 127 and names the file", "[agent]") {
  TempDir d;
  auto r = resolve_program(d.path + "/nope", "/usr/bin");
  CHECK(r.code == 127);
  CHECK(r.message.find(d.path + "/nope") != std::string::npos);
  CHECK(r.message.find("No such file") != std::string::npos);
}

TEST_CASE("resolve: a file without x permission or a directory is 126", "[agent]") {
  TempDir d;
  const std::string plain = d.file("plain", 0644);
  auto r = resolve_program(plain, "");
  CHECK(r.code == 126);
  CHECK(r.message.find(plain) != std::string::npos);
  auto dir = resolve_program(d.path, "");
  CHECK(dir.code == 126);
  CHECK(dir.message.find("directory") != std::string::npos);
}

TEST_CASE("resolve: a bare name is searched along PATH, first match wins", "[agent]") {
  TempDir a, b;
  const std::string in_b = b.file("tool", 0755);
  auto r = resolve_program("tool", a.path + ":" + b.path);
  CHECK(r.code == 0);
  CHECK(r.path == in_b);
  const std::string in_a = a.file("tool", 0755);
  CHECK(resolve_program("tool", a.path + ":" + b.path).path == in_a);
}

TEST_CASE("resolve: a non-executable match is skipped for a later executable one", "[agent]") {
  TempDir a, b;
  a.file("tool", 0644);
  const std::string good = b.file("tool", 0755);
  auto r = resolve_program("tool", a.path + ":" + b.path);
  CHECK(r.code == 0);
  CHECK(r.path == good);
}

TEST_CASE("resolve: only non-executable matches is 126, none is 127", "[agent]") {
  TempDir a;
  a.file("tool", 0644);
  CHECK(resolve_program("tool", a.path).code == 126);
  auto r = resolve_program("dl-no-such-tool", a.path + ":/usr/bin");
  CHECK(r.code == 127);
  CHECK(r.message.find("dl-no-such-tool") != std::string::npos);
  CHECK(r.message.find("PATH") != std::string::npos);
}

TEST_CASE("resolve: an empty PATH entry means the current directory", "[agent]") {
  TempDir d;
  d.file("here-tool", 0755);
  char old[4096];
  REQUIRE(::getcwd(old, sizeof old));
  REQUIRE(::chdir(d.path.c_str()) == 0);
  auto r = resolve_program("here-tool", ":/nonexistent");
  REQUIRE(::chdir(old) == 0);
  CHECK(r.code == 0);
  CHECK(r.path == "./here-tool");
  CHECK(resolve_program("", "/usr/bin").code == 127);
}
