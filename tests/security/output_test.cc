// The files a job writes for its user (--output-filename, --log-dir,
// --report-json): another user who plants links, directories and files in
// a shared sticky directory (as /tmp) gets neither the job's output nor a
// write into the victim's files. The job refuses before any rank starts
// (exit 2, naming the path and its owner), or writes where it is safe.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "tests/security/other_user.h"

using dl::it::RunSpec;
using dl::sec::OtherUser;

namespace {
// A root-owned directory like /tmp (1777) that the test alone uses, and
// beside it a 0700 one of the victim's holding a file it cares about.
struct Shared {
  Shared() {
    shared = make("/tmp/dlsec-shared.XXXXXX", 01777);
    home = make("/tmp/dlsec-victim.XXXXXX", 0700);
    precious = home + "/important.txt";
    dl::it::write_file(precious, "precious\n", 0600);
  }
  ~Shared() {
    std::filesystem::remove_all(shared);
    std::filesystem::remove_all(home);
  }
  static std::string make(std::string tmpl, mode_t mode) {
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    REQUIRE(::chmod(tmpl.c_str(), mode) == 0);
    return tmpl;
  }
  std::string shared, home, precious;
};

// Runs `script` as the other user; REQUIREs that it worked.
void as_other(const OtherUser& other, const std::string& script) {
  RunSpec s;
  s.argv = {"/bin/sh", "-ec", script};
  auto r = dl::it::run(other.as(s), 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
}

// What the other user can read of `path` (cat's output; "" when refused).
std::string read_as(const OtherUser& other, const std::string& path) {
  RunSpec s;
  s.argv = {"/bin/cat", path};
  return dl::it::run(other.as(s), 30).out;
}

dl::it::RunResult victim_job(const std::vector<std::string>& options) {
  RunSpec s;
  s.argv = {dl::it::bin("dlaunch"), "-n", "2"};
  s.argv.insert(s.argv.end(), options.begin(), options.end());
  for (const char* a : {"/bin/sh", "-c", "echo secret-of-rank-$RANK"}) s.argv.push_back(a);
  return dl::it::run(s, 60);
}

}  // namespace

TEST_CASE("output files: another user's planted 0777 dirs, link and 0666 file are refused before any rank starts",
          "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  Shared sh;
  OtherUser other;
  const std::string out = sh.shared + "/out";
  as_other(other, "mkdir -p " + out + "/rank.0 " + out + "/rank.1; chmod 777 " + out + " " + out + "/rank.0 " + out +
                      "/rank.1; ln -s " + sh.precious + " " + out + "/rank.0/stdout; touch " + out +
                      "/rank.1/stdout; chmod 666 " + out + "/rank.1/stdout");
  for (const char* option : {"--output-filename", "--log-dir"}) {
    INFO(option);
    std::vector<std::string> opts{option, out};
    if (std::string(option) == "--log-dir") opts.insert(opts.end(), {"-r", "3"});
    auto r = victim_job(opts);
    CHECK(r.code == 2);
    CHECK(r.err.find(std::string("dlaunch: error: ") + option + ": " + out + " belongs to user " + other.name()) !=
          std::string::npos);
    CHECK(r.out.find("secret") == std::string::npos);
    CHECK(r.err.find("secret") == std::string::npos);
  }
  CHECK(dl::it::read_file(sh.precious) == "precious\n");
  CHECK(read_as(other, out + "/rank.1/stdout").empty());
}

TEST_CASE("output files: a link planted for the output directory or a --report-json file is not followed",
          "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  Shared sh;
  OtherUser other;
  // A directory the attacker links to the victim's own, and files it links or offers.
  as_other(other, "ln -s " + sh.home + " " + sh.shared + "/run; ln -s " + sh.precious + " " + sh.shared +
                      "/report.json; touch " + sh.shared + "/open.json; chmod 666 " + sh.shared + "/open.json");
  auto r = victim_job({"--output-filename", sh.shared + "/run"});
  CHECK(r.code == 2);
  CHECK(r.err.find(sh.shared + "/run is a symbolic link of user " + other.name()) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(sh.home + "/rank.0"));
  for (const std::string json : {"/report.json", "/open.json"}) {
    r = victim_job({"--report-json", sh.shared + json});
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("dlaunch: error: --report-json: " + sh.shared + json) != std::string::npos);
    CHECK(r.out.find("secret") == std::string::npos);
  }
  CHECK(dl::it::read_file(sh.precious) == "precious\n");
}

TEST_CASE("output files: in a shared sticky directory the job's own files are written, and the other user reads none",
          "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  Shared sh;
  OtherUser other;
  const std::string out = sh.shared + "/mine";
  auto r = victim_job({"--output-filename", out});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(dl::it::read_file(out + "/rank.1/stdout") == "secret-of-rank-1\n");
  CHECK(read_as(other, out + "/rank.1/stdout").empty());
  // Too late to plant anything in the job's directories: they are 0700.
  RunSpec s;
  s.argv = {"/bin/sh", "-c", "ln -s " + sh.precious + " " + out + "/rank.0/stderr2 || mkdir " + out + "/rank.2"};
  CHECK(dl::it::run(other.as(s), 30).code != 0);
  CHECK_FALSE(std::filesystem::exists(out + "/rank.2"));
}
