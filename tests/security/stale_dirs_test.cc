// The reaper of dead agents' temp dirs (errors/temp_dirs.h) in a temp dir
// that another user shares (sticky and world-writable, as /tmp): a dir of the
// other user's named as a dead agent's, and a link the other user named so,
// pointing at this user's files, are left alone; a live process's dir too.
// Only this user's dead agent's dir goes. The real dlaunch and agent.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "errors/temp_dirs.h"
#include "tests/integration/run_command.h"
#include "tests/security/other_user.h"

using dl::sec::OtherUser;
using namespace dl::it;

namespace {
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

bool exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}
}  // namespace

TEST_CASE("stale temp dirs: another user's, a link and a live process's are left alone by the next job",
          "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  OtherUser other;
  TempDir shared;
  REQUIRE(::chmod(shared.path.c_str(), 01777) == 0);
  // Named as this test process's dirs would be, for a pid that is gone:
  // start time and pid namespace as the reaper compares them.
  const std::string own = dl::temp_dir_prefix("py");
  const std::string same_ns = own.substr(own.find("-py-") + 4);
  auto dead_name = [&](const std::string& kind, const std::string& tail) {
    return shared.path + "/dlaunch-" + std::to_string(dead_pid()) + "-" + kind + "-" + same_ns + tail;
  };
  const std::string theirs = dead_name("py", "a1"), their_link = dead_name("store", "b2");
  const std::string mine_dead = dead_name("py", "c3"), mine_live = shared.path + "/" + own + "d4";
  TempDir precious;
  write_file(precious.path + "/keep", "x");
  RunSpec s;
  s.argv = {"/bin/sh", "-c",
            "mkdir -m 700 " + theirs + " && touch " + theirs + "/f && ln -s " + precious.path + " " + their_link};
  REQUIRE(run(other.as(s), 30).code == 0);
  for (const auto& d : {mine_dead, mine_live}) REQUIRE(::mkdir(d.c_str(), 0700) == 0);
  // The other user's link points at this user's dir: a reaper that followed
  // it would empty it.
  REQUIRE(::chmod(precious.path.c_str(), 0755) == 0);

  RunSpec job;
  job.argv = {bin("dlaunch"), "-n", "1", "--mpi", "none", "/bin/true"};
  job.set_env = {{"TMPDIR", shared.path}};
  RunResult r = run(job, 30);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK_FALSE(exists(mine_dead));  // the reaper ran
  CHECK(exists(theirs + "/f"));
  CHECK(exists(their_link));
  CHECK(exists(precious.path + "/keep"));
  CHECK(exists(mine_live));
}
