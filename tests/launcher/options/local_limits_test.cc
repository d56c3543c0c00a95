// What a job's ranks on this host take from the kernel's limits
// (launcher/options/local_limits.h), decided without starting anything.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include "errors/error.h"
#include "launcher/options/local_limits.h"

using dl::launcher::HostLimits;
using dl::launcher::limits_problem;
using dl::launcher::LocalJob;

TEST_CASE("local limits: descriptors, 3 per rank in the agent and 64 of its own", "[launcher]") {
  HostLimits l;
  l.nofile = 1024;
  CHECK(limits_problem({320, 320, false}, l).empty());  // 3 x 320 + 64 = 1024
  CHECK(limits_problem({321, 321, false}, l) ==
        "the agent of the 321 ranks on this host needs 1027 file descriptors (3 per rank and 64 of its own), and "
        "RLIMIT_NOFILE lets a process of this user open 1024; raise the hard limit (ulimit -Hn, limits.conf nofile) or "
        "run fewer ranks on this host");
  l.nofile = RLIM_INFINITY;
  CHECK(limits_problem({1000000, 1000000, false}, l).empty());
}

TEST_CASE("local limits: the launcher's output files count against its own descriptors", "[launcher]") {
  HostLimits l;
  l.nofile = 1024;
  // 10 ranks here, 600 in the job: the agent fits, the launcher's 1200 files do not.
  CHECK(limits_problem({10, 600, false}, l).empty());
  CHECK(limits_problem({10, 600, true}, l).find("the launcher, writing the output files of 600 ranks needs 1264 file "
                                                "descriptors (2 per rank and 64 of its own)") == 0);
}

TEST_CASE("local limits: processes count what this user runs already", "[launcher]") {
  HostLimits l;
  l.nproc = 200;
  l.user_tasks = 100;
  CHECK(limits_problem({68, 68, false}, l).empty());  // 100 + 68 + 32 = 200
  CHECK(limits_problem({69, 69, false}, l) ==
        "the 69 ranks on this host need 101 processes (one per rank and 32 for dlaunch), this user runs 100 already, "
        "and RLIMIT_NPROC allows 200; raise it (ulimit -u, limits.conf nproc) or run fewer ranks on this host");
  l.nproc = RLIM_INFINITY;  // root, or no limit
  CHECK(limits_problem({100000, 100000, false}, l).empty());
}

TEST_CASE("local limits: the system's threads-max bounds everyone's tasks", "[launcher]") {
  HostLimits l;
  l.threads_max = 1000;
  l.system_tasks = 900;
  CHECK(limits_problem({68, 68, false}, l).empty());
  CHECK(limits_problem({69, 69, false}, l).find("kernel.threads-max allows 1000") != std::string::npos);
}

TEST_CASE("local limits: this host's real limits take a small job", "[launcher]") {
  CHECK_NOTHROW(dl::launcher::check_local_limits({2, 2, true}));
  CHECK_THROWS_AS(dl::launcher::check_local_limits({1L << 40, 1L << 40, false}), dl::UsageError);
}
