// Files another user plants where this user's job reads its input (a shared
// /tmp, a group project directory): a FIFO that never gets a writer, a link
// to /dev/zero or /dev/urandom, a token file the other user can read. Each is
// refused at once with exit 2, and no rank runs (docs/dlaunch.md, "What
// dlaunch refuses").
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/run_command.h"
#include "tests/security/other_user.h"

using dl::sec::OtherUser;
using namespace dl::it;

namespace {
// The other user runs `sh -c script` in its dir.
void as_other(const OtherUser& other, const std::string& script) {
  RunSpec s;
  s.argv = {"/bin/sh", "-c", script};
  REQUIRE(run(other.as(s), 30).code == 0);
}

// This user runs dlaunch OPTIONS with a rank that would leave a marker.
RunResult victim_runs(const std::vector<std::string>& options, const std::string& marker) {
  RunSpec s;
  s.argv = {bin("dlaunch")};
  s.argv.insert(s.argv.end(), options.begin(), options.end());
  s.argv.insert(s.argv.end(), {"/bin/sh", "-c", "touch " + marker});
  s.unset_env = {"DLAUNCH_TOKEN"};
  return run(s, 30);
}
}  // namespace

TEST_CASE("planted input: a FIFO or a link to a device as hostfile or env file is refused at once",
          "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  OtherUser other;
  TempDir mine;
  const std::string marker = mine.path + "/ran", d = other.dir();
  as_other(other, "mkfifo hosts && ln -s /dev/zero env && ln -s /dev/urandom rand");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--hostfile", d + "/hosts"}, "hostfile " + d + "/hosts: is a FIFO (named pipe), not a regular file"},
      {{"--env-file", d + "/env"}, "--env-file " + d + "/env: is a character device, not a regular file"},
      {{"--hostfile", d + "/rand"}, "hostfile " + d + "/rand: is a character device, not a regular file"},
  };
  for (const auto& [options, want] : cases) {
    RunResult r = victim_runs(options, marker);
    INFO(r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.seconds < 5);
    CHECK(r.code == 2);
    CHECK(r.err.find(want) != std::string::npos);
    CHECK(::access(marker.c_str(), F_OK) != 0);
  }
}

TEST_CASE("planted input: a token file the other user owns or can read is refused, naming the fix", "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  OtherUser other;
  TempDir mine;
  const std::string marker = mine.path + "/ran", theirs = other.dir() + "/token", shared = mine.path + "/token";
  const std::string token(64, 'a');
  as_other(other, "umask 077; printf " + token + " > token");
  write_file(shared, token, 0644);
  const std::vector<std::string> rdzv = {"--rdzv", "tcp://127.0.0.1:1", "--nnodes", "2", "--node-rank", "0",
                                         "--token-file"};
  auto with = [&](const std::string& file) {
    auto v = rdzv;
    v.push_back(file);
    return v;
  };
  RunResult r = victim_runs(with(theirs), marker);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find("--token-file " + theirs + ": owned by uid " + std::to_string(other.uid()) + ", not by this user") !=
        std::string::npos);
  // Readable by the other user: mode 0644, and the other user can really read it.
  RunSpec cat;
  cat.argv = {"/bin/cat", shared};
  ::chmod(mine.path.c_str(), 0755);
  CHECK(run(other.as(cat), 30).out == token);
  r = victim_runs(with(shared), marker);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find("mode 0644 lets other users read or change the job token; run `chmod 600 " + shared + "`") !=
        std::string::npos);
  CHECK(::access(marker.c_str(), F_OK) != 0);
}

TEST_CASE("planted input: a config file the other user owns or can write is refused, naming the fix", "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  OtherUser other;
  TempDir mine;
  const std::string marker = mine.path + "/ran", evil = mine.path + "/evil";
  // The program a config file names runs as this user: here it leaves a marker.
  write_file(evil, "#!/bin/sh\ntouch " + marker + "\nexit 1\n", 0755);
  const std::string text = "launcher = ssh\nlauncher-exec = " + evil + "\n";
  as_other(other, "printf '" + text + "' > cfg");
  const std::string theirs = other.dir() + "/cfg", loose = mine.path + "/loose", own = mine.path + "/own";
  write_file(loose, text, 0666);
  write_file(own, text, 0644);
  auto with_config = [&](const std::string& config) {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-H", "node1.invalid", "-n", "1", "true"};
    s.set_env = {{"DLAUNCH_CONFIG", config}, {"DLAUNCH_SYSTEM_CONFIG", "/dev/null"}};
    return run(s, 30);
  };
  RunResult r = with_config(theirs);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find("user config " + theirs + ": belongs to user " + other.name()) != std::string::npos);
  r = with_config(loose);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find("user config " + loose + ": mode 0666 lets every user change it") != std::string::npos);
  CHECK(r.err.find("chmod go-w " + loose) != std::string::npos);
  CHECK(::access(marker.c_str(), F_OK) != 0);
  // The same lines in a file of this user's, 0644: honoured (the program ran).
  r = with_config(own);
  INFO(r.err);
  CHECK(::access(marker.c_str(), F_OK) == 0);
}
