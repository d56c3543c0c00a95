// Which machine this is (machine/identity.h): the same for every process of
// one host, another in another network namespace (a host of the test
// cluster, a container with its own network) though the kernel is one.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "machine/identity.h"

namespace {
// machine_identity() as a child in a network namespace of its own sees it;
// "" when the namespace could not be made (not root).
std::string identity_in_new_netns() {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    const std::string id = ::unshare(CLONE_NEWNET) == 0 ? dl::machine::machine_identity() : "";
    const bool ok = ::write(fds[1], id.data(), id.size()) == static_cast<ssize_t>(id.size());
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  return out;
}
}  // namespace

TEST_CASE("machine identity: one per host and network namespace", "[machine]") {
  const std::string here = dl::machine::machine_identity();
  REQUIRE_FALSE(here.empty());
  CHECK(dl::machine::machine_identity() == here);
  CHECK(here.find("/net:") != std::string::npos);
  const std::string other = identity_in_new_netns();
  if (other.empty()) {
    WARN("cannot make a network namespace here (not root): the other half is not checked");
    return;
  }
  CHECK(other != here);
  // Same kernel, same boot: only the namespace part differs.
  CHECK(other.substr(0, other.find("/net:")) == here.substr(0, here.find("/net:")));
}
