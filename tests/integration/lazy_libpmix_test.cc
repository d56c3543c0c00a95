// dlaunch-agent loads libpmix and hwloc (and libevent, munge, udev with
// them) in its PMIx server thread when a rank connects, not at exec
// (mpi/pmix/pmix_loader.h): `dlaunch-agent --version`, the agent of a
// `--mpi none` job and that of an MPI job whose ranks never call MPI_Init
// never map them; the agent of a rank that calls MPI_Init does.
// These fail as soon as anything links libpmix into dlaunch-agent, or into
// dlaunch (whose local agent is forked from it), again.
#include <catch2/catch.hpp>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
const char* const kPmixLibs[] = {"libpmix.so", "libhwloc.so", "libevent_core", "libmunge.so"};

// A job of 1 rank that runs `first` (a shell command, say an MPI program)
// and then prints its agent's (its parent's) /proc/PID/maps, once `want` is
// mapped there or after 5 s.
RunResult agent_maps(const std::string& mpi, const std::string& want, const std::string& first = "") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "--mpi", mpi, "-n", "1", "/bin/sh", "-c",
            first + "for i in $(seq 50); do grep -q '" + want + "' /proc/$PPID/maps && break; sleep 0.1; done; " +
                print_maps_sh("agent", "PPID")};
  return run(s, 30);
}
}  // namespace

TEST_CASE("dlaunch-agent --version and dlaunch --version load no libpmix nor hwloc (LD_DEBUG=libs)", "[integration]") {
  // dlaunch carries the agent's code too, for the local agent it forks from itself.
  for (const char* program : {"dlaunch-agent", "dlaunch"}) {
    auto [code, log] = run_ld_debug_libs({bin(program), "--version"});
    REQUIRE(code == 0);
    INFO(program << ":\n" << log);
    REQUIRE_THAT(log, Catch::Contains("find library=libc.so.6"));  // the log is real
    for (const char* lib : kPmixLibs) CHECK_THAT(log, !Catch::Contains(lib));
  }
}

TEST_CASE("the agent of a --mpi none job never maps libpmix, an MPI job agent does", "[integration]") {
  RunResult none = agent_maps("none", "libpmix.so");  // waits the full 5 s: it must not come
  INFO(none.out << none.err);
  REQUIRE(none.code == 0);
  // The local agent is forked from dlaunch (its exe), or dlaunch-agent with DLAUNCH_LOCAL_AGENT=exec.
  REQUIRE_THAT(none.out, (Catch::Contains("/dlaunch-agent\n") || Catch::Contains("/dlaunch\n")) &&
                             Catch::Contains("/libc.so.6"));
  for (const char* lib : kPmixLibs) CHECK_THAT(none.out, !Catch::Contains(lib));

  RunResult mpi = agent_maps("pmix", "libpmix.so", bin("mpi_hello") + " >/dev/null; ");
  INFO(mpi.out << mpi.err);
  REQUIRE(mpi.code == 0);
  CHECK_THAT(mpi.out, Catch::Contains("/libpmix.so") && Catch::Contains("/libhwloc.so"));
}

TEST_CASE("an MPI job's agent maps libpmix only once a rank calls MPI_Init", "[integration]") {
  // --mpi pmix, but the rank is no MPI program: nothing of libpmix is loaded.
  RunResult plain = agent_maps("pmix", "libpmix.so");
  INFO(plain.out << plain.err);
  REQUIRE(plain.code == 0);
  REQUIRE_THAT(plain.out, (Catch::Contains("/dlaunch-agent\n") || Catch::Contains("/dlaunch\n")) &&
                              Catch::Contains("/libc.so.6"));
  for (const char* lib : kPmixLibs) CHECK_THAT(plain.out, !Catch::Contains(lib));
}
