// libssh (and the libcrypto and Kerberos it brings) is loaded only when a
// remote host is reached (remote/ssh/libssh_loader.h): `dlaunch --version`
// and a job on this host alone must never map it. Both tests read the
// launcher's own mappings, so they fail as soon as anything links libssh into
// dlaunch again.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
const char* const kRemoteOnly[] = {"libssh.so", "libcrypto.so", "libgssapi_krb5.so", "libkrb5.so"};
}

TEST_CASE("dlaunch --version loads no libssh (LD_DEBUG=libs)", "[integration]") {
  auto [code, log] = run_ld_debug_libs({bin("dlaunch"), "--version"});
  REQUIRE(code == 0);
  INFO(log);
  // The log is real: it names what dlaunch does load.
  REQUIRE_THAT(log, Catch::Contains("find library=libc.so.6"));
  REQUIRE_THAT(log, Catch::Contains("calling init: /lib"));
  for (const char* lib : kRemoteOnly) CHECK_THAT(log, !Catch::Contains(lib));
}

TEST_CASE("a local job's launcher has no libssh mapped while its ranks run", "[integration]") {
  // The rank's parent is the agent; the agent's parent is dlaunch. The rank
  // prints dlaunch's /proc/PID/maps while the job runs.
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "/bin/sh", "-c",
            "[ \"$RANK\" = 0 ] || exit 0; L=$(cut -d' ' -f4 /proc/$PPID/stat); " +
            print_maps_sh("launcher", "L")};
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  REQUIRE_THAT(r.out, Catch::Contains("launcher /") && Catch::Contains("/dlaunch\n"));
  REQUIRE_THAT(r.out, Catch::Contains("/libc.so.6"));
  for (const char* lib : kRemoteOnly) CHECK_THAT(r.out, !Catch::Contains(lib));
}
