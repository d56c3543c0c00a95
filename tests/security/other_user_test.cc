// The attacker of the other security tests is really someone else: it
// cannot read this user's private files, and it is gone afterwards.
#include <catch2/catch.hpp>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/security/other_user.h"

using dl::sec::OtherUser;

TEST_CASE("other user: a different uid, kept out of 0700 dirs, removed afterwards", "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  char tmpl[] = "/tmp/dlsec-own.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string mine = tmpl;
  { std::ofstream(mine + "/secret") << "s3cret\n"; }
  std::string name;
  uid_t uid = 0;
  pid_t sleeper = -1;
  {
    OtherUser other;
    name = other.name();
    uid = other.uid();
    CHECK(uid != ::geteuid());
    dl::it::RunSpec spec;
    spec.argv = {"/usr/bin/id", "-u"};
    auto r = dl::it::run(other.as(spec), 30);
    CHECK(r.code == 0);
    CHECK(r.out == std::to_string(uid) + "\n");
    spec.argv = {"/bin/cat", mine + "/secret"};
    r = dl::it::run(other.as(spec), 30);
    CHECK(r.code != 0);
    CHECK(r.out.find("s3cret") == std::string::npos);
    // It keeps running something; the destructor must end it.
    spec.argv = {"/bin/sleep", "600"};
    dl::it::Child c = dl::it::start(other.as(spec));
    ::close(c.out_fd), ::close(c.err_fd);
    sleeper = c.pid;
  }
  int st = 0;
  REQUIRE(::waitpid(sleeper, &st, 0) == sleeper);
  CHECK(WIFSIGNALED(st));
  CHECK(::getpwnam(name.c_str()) == nullptr);
  CHECK_FALSE(std::filesystem::exists("/tmp/" + name));
  dl::it::RunSpec ps;
  ps.argv = {"/usr/bin/pgrep", "-U", std::to_string(uid)};
  CHECK(dl::it::run(ps, 10).code == 1);  // no process of that uid
  std::filesystem::remove_all(mine);
}
