// The real OpenMPI programs and mpi4py launched by dlaunch itself (the agent's
// PMIx server, --mpi auto): MPI's own view of size and rank, the results, the
// MPI_Abort code and verdict, and no process left behind (a unique marker in
// argv). The programs check themselves and print one "ok" line per rank.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hostfiles/usable_cpus.h"
#include "tests/mpi/pmix/mpi_test_util.h"

using namespace dl::mpitest;

namespace {

const std::string kBin = DLAUNCH_BIN_DIR;
const std::string kSrc = DLAUNCH_SOURCE_DIR;
const std::string kDlaunch = kBin + "/dlaunch";

// `before` goes in front of dlaunch ("taskset -c 0 ").
void check_program(int n, const std::string& program, const std::string& ok_prefix, const std::string& before = "") {
  const std::string mark = marker();
  Result r = run(before + kDlaunch + " -n " + std::to_string(n) + " " + program + " " + std::to_string(n) + " " + mark);
  INFO("dlaunch -n " << n << " " << program << "\n" << r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, ok_prefix) == n);
  CHECK(count(r.out, " ok") == n);
  CHECK(count(r.out, "BAD") == 0);
  for (int k = 0; k < n; ++k)  // each rank saw its own rank and the right size
    CHECK(count(r.out, ok_prefix + " " + std::to_string(k) + " of " + std::to_string(n)) == 1);
  CHECK_FALSE(leftover(mark));
}

const std::string kPy = "/usr/bin/python3 " + kSrc + "/tests/mpi/pmix/mpi4py_coll.py";

// run(cmd), and how long it took in *secs.
Result run_timed(const std::string& cmd, double* secs) {
  const auto t0 = std::chrono::steady_clock::now();
  Result r = run(cmd);
  *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// "taskset -c K ", K the first CPU this process may use: a dlaunch under it
// may use one CPU, so the host it runs on without a hostfile has one slot.
std::string on_one_cpu() {
  cpu_set_t set;
  REQUIRE(::sched_getaffinity(0, sizeof set, &set) == 0);
  int first = 0;
  while (!CPU_ISSET(first, &set)) ++first;
  return "taskset -c " + std::to_string(first) + " ";
}

}  // namespace

TEST_CASE("dlaunch -n N mpi_hello: MPI size, rank, allreduce, node-local size", "[pmix][slow]") {
  for (int n : {1, 2, 4}) check_program(n, kBin + "/mpi_hello", "hello rank");
}

TEST_CASE("dlaunch -n N mpi_ring: sendrecv ring", "[pmix][slow]") {
  for (int n : {1, 2, 4}) check_program(n, kBin + "/mpi_ring", "ring rank");
}

TEST_CASE("dlaunch -n N mpi4py: bcast, scatter, gather, allreduce", "[pmix][slow]") {
  for (int n : {1, 2, 4}) check_program(n, kPy, "mpi4py rank");
}

TEST_CASE("dlaunch: MPI_Abort ends the job with the rank's code and names it", "[pmix][slow]") {
  for (int n : {1, 2, 4}) {
    const std::string mark = marker();
    Result r = run(kDlaunch + " -n " + std::to_string(n) + " " + kBin + "/mpi_abort 13 " + mark);
    INFO(r.out);
    CHECK(r.code == 13);
    CHECK(count(r.out, "dlaunch: rank " + std::to_string(n - 1) + " on ") == 1);
    CHECK(count(r.out, "called MPI_Abort with code 13") == 1);
    CHECK(count(r.out, "N/A") == 0);  // OpenMPI's placeholder text is not quoted
    CHECK_FALSE(leftover(mark));
  }
}

TEST_CASE("dlaunch MPMD: MPI_APPNUM differs per app context, one MPI_COMM_WORLD", "[pmix][slow]") {
  const std::string mark = marker();
  const std::string prog = kBin + "/mpi_appnum";
  Result r = run(kDlaunch + " -n 1 " + prog + " server " + mark + " : -n 2 " + prog + " worker " + mark);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, "BAD") == 0);
  CHECK(count(r.out, "appnum 0 of 3 app 0 server ok") == 1);
  CHECK(count(r.out, "appnum 1 of 3 app 1 worker ok") == 1);
  CHECK(count(r.out, "appnum 2 of 3 app 1 worker ok") == 1);
  CHECK_FALSE(leftover(mark));
}

// MPI_Comm_spawn (docs/mpi.md, "Spawning"): the children start on free
// slots (or oversubscribed), as a namespace of their own; parent and
// children merge the intercommunicator and all-reduce over it.
TEST_CASE("dlaunch: MPI_Comm_spawn starts 2 children that all-reduce with the parent over the merged intercomm",
          "[pmix][slow]") {
  for (const std::string slots : {"--oversubscribe", "-H localhost:3"}) {
    const std::string mark = marker();
    Result r = run(kDlaunch + " -v --tag-output -n 1 " + slots + " " + kBin + "/mpi_spawn " + mark);
    INFO(slots << "\n" << r.out);
    CHECK(r.code == 0);
    CHECK(count(r.out, "[0@localhost] spawn parent ok") == 1);
    CHECK(count(r.out, "[spawn1:0@localhost] spawn child ok") == 1);
    CHECK(count(r.out, "[spawn1:1@localhost] spawn child ok") == 1);
    CHECK(count(r.out, "BAD") == 0);
    // -v names the spawn.
    CHECK(count(r.out, "dlaunch: rank 0 on localhost called MPI_Comm_spawn (2 x " + kBin + "/mpi_spawn child " + mark +
                           "): started spawn1:0..spawn1:1 on localhost (namespace ") == 1);
    CHECK_FALSE(leftover(mark));
  }
}

// No free slot and no --oversubscribe: the call fails at once, a line says
// why (who asked for how many of what, the slots), and the job ends. On one
// CPU and no hostfile, localhost has one slot, which the job's rank takes.
TEST_CASE("dlaunch: MPI_Comm_spawn without a free slot returns an error at once, naming the call and the slots",
          "[pmix][slow]") {
  const std::string mark = marker();
  double secs = 0;
  Result r = run_timed(on_one_cpu() + kDlaunch + " -n 1 " + kBin + "/mpi_spawn " + mark, &secs);
  INFO(r.out);
  CHECK(r.code == 1);
  const std::string call = "rank 0 on localhost called MPI_Comm_spawn (2 x " + kBin + "/mpi_spawn child " + mark + ")";
  const std::string why = "localhost has 0 free slots (1 slot, 1 in use; one slot per CPU dlaunch may use); pass "
                          "--oversubscribe to start more processes than CPUs, or give it slots (-H localhost:N)";
  CHECK(count(r.out, "dlaunch: " + call + ", which dlaunch could not start: " + why) == 1);  // the verdict
  CHECK(count(r.out, call) == 1);                                                            // and no other line
  // The call returned MPI_ERR_SPAWN to the program (MPI_ERRORS_RETURN): it
  // says so, unless the teardown's SIGTERM came first.
  CHECK(count(r.out, "spawn failed: MPI_ERR_SPAWN") <= 1);
  CHECK(count(r.out, "spawn parent ok") == 0);
  CHECK(secs < 30);
  CHECK_FALSE(leftover(mark));
}

TEST_CASE("dlaunch: a spawned child that crashes ends the job with a verdict naming it", "[pmix][slow]") {
  const std::string mark = marker();
  double secs = 0;
  Result r = run_timed(kDlaunch + " -n 1 --oversubscribe " + kBin + "/mpi_spawn " + mark + " crash", &secs);
  INFO(r.out);
  CHECK(r.code == 128 + 11);
  CHECK(count(r.out, "dlaunch: spawn1:1 (spawned by rank 0) on localhost (pid ") == 1);
  CHECK(count(r.out, ") was killed by signal 11 (Segmentation fault)") == 1);
  CHECK(count(r.out, "spawn parent ok") == 0);
  CHECK(secs < 60);
  CHECK_FALSE(leftover(mark));
}

TEST_CASE("dlaunch: mpi4py's MPIPoolExecutor spawns 3 workers and maps over them", "[pmix][slow]") {
  for (const std::string slots : {"--oversubscribe", "-H localhost:4"}) {
    const std::string mark = marker();
    Result r = run(kDlaunch + " -v -n 1 " + slots + " /usr/bin/python3 " + kSrc + "/tests/mpi/pmix/mpi4py_pool.py " + mark);
    INFO(slots << "\n" << r.out);
    CHECK(r.code == 0);
    CHECK(count(r.out, "pool ok") == 1);
    CHECK(count(r.out, "-m mpi4py.futures.server): started spawn1:0..spawn1:2 on localhost") == 1);
    CHECK_FALSE(leftover(mark));  // the parent and the workers (python3 -X dltest=<mark>)
  }
}

TEST_CASE("dlaunch: mpi4py's MPIPoolExecutor without a free slot fails at once", "[pmix][slow]") {
  const std::string mark = marker();
  double secs = 0;
  Result r = run_timed(on_one_cpu() + kDlaunch + " -n 1 /usr/bin/python3 " + kSrc + "/tests/mpi/pmix/mpi4py_pool.py " + mark,
                       &secs);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(count(r.out, "dlaunch: rank 0 on localhost called MPI_Comm_spawn (3 x /usr/bin/python3 ") == 1);
  CHECK(count(r.out, "-m mpi4py.futures.server), which dlaunch could not start: localhost has 0 free slots") == 1);
  CHECK(count(r.out, "pool ok") == 0);
  CHECK(secs < 30);
  CHECK_FALSE(leftover(mark));
}

// No hostfile: localhost's slots are the CPUs dlaunch may use (as mpirun's),
// so `-n 1` leaves room to spawn one child on a machine of 2 CPUs or more.
TEST_CASE("dlaunch -n 1 with no hostfile: mpi4py's COMM_SELF.Spawn of one child runs without --oversubscribe",
          "[pmix][slow]") {
  if (dl::hostfiles::usable_cpus() < 2) {
    WARN("this process may use 1 CPU: no slot beside rank 0 to spawn onto");
    return;
  }
  const std::string mark = marker();
  Result r = run(kDlaunch + " --tag-output -n 1 /usr/bin/python3 " + kSrc + "/tests/mpi/pmix/mpi4py_spawn_one.py " + mark);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, "[0@localhost] spawn_one parent ok") == 1);
  CHECK(count(r.out, "[spawn1:0@localhost] spawn_one child ok") == 1);
  CHECK(count(r.out, "free slot") == 0);
  CHECK_FALSE(leftover(mark));
}

// The ranks are not limited by the CPUs (only spawning is): 3 ranks on one
// CPU run, and a spawn beyond the CPUs fails at once naming --oversubscribe.
TEST_CASE("dlaunch with no hostfile: more ranks than CPUs run, a spawn beyond them names --oversubscribe",
          "[pmix][slow]") {
  check_program(3, kBin + "/mpi_hello", "hello rank", on_one_cpu());
  const std::string mark = marker();
  double secs = 0;
  Result r = run_timed(on_one_cpu() + kDlaunch + " -n 1 /usr/bin/python3 " + kSrc + "/tests/mpi/pmix/mpi4py_spawn_one.py " +
                           mark, &secs);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(count(r.out, "localhost has 0 free slots (1 slot, 1 in use; one slot per CPU dlaunch may use); pass "
                     "--oversubscribe to start more processes than CPUs") == 1);  // the verdict alone
  CHECK(count(r.out, "spawn_one parent ok") == 0);
  CHECK(secs < 30);
  // The same with --oversubscribe runs.
  Result over = run(on_one_cpu() + kDlaunch + " -n 1 --oversubscribe /usr/bin/python3 " + kSrc +
                    "/tests/mpi/pmix/mpi4py_spawn_one.py " + mark);
  INFO(over.out);
  CHECK(over.code == 0);
  CHECK(count(over.out, "spawn_one child ok") == 1);
  CHECK_FALSE(leftover(mark));
}

// Slots someone wrote (-H, a scheduler's allocation) stay as written, CPUs or
// not: one slot, which rank 0 takes.
TEST_CASE("dlaunch: -H localhost and a Slurm allocation of 1 CPU keep their 1 slot for spawning", "[pmix][slow]") {
  const std::string mark = marker();
  const std::string program = " -n 1 /usr/bin/python3 " + kSrc + "/tests/mpi/pmix/mpi4py_spawn_one.py " + mark;
  const std::string why = "localhost has 0 free slots (1 slot, 1 in use); give it more slots (a hostfile line 'host "
                          "slots=N', -H host:N) or pass --oversubscribe";
  for (const std::string& how : {kDlaunch + " -H localhost",
                                "env SLURM_JOB_NODELIST=localhost SLURM_JOB_CPUS_PER_NODE=1 SLURM_JOB_ID=1 " + kDlaunch}) {
    Result r = run(how + program);
    INFO(how << "\n" << r.out);
    CHECK(r.code == 1);
    CHECK(count(r.out, why) == 1);  // the verdict alone
  }
  CHECK_FALSE(leftover(mark));
}

// The way docs/mpi.md ("Spawning") gives instead: the workers start with the
// job (python3 -m mpi4py.futures), and the pool uses them without spawning.
TEST_CASE("dlaunch -n 4 python3 -m mpi4py.futures: the pool runs on the job's ranks", "[pmix][slow]") {
  const std::string mark = marker();
  Result r = run(kDlaunch + " -n 4 /usr/bin/python3 -m mpi4py.futures " + kSrc + "/tests/mpi/pmix/mpi4py_pool.py " + mark);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, "pool ok") == 1);
  CHECK(count(r.out, "MPI_Comm_spawn") == 0);
  CHECK_FALSE(leftover(mark));
}

TEST_CASE("dlaunch --mpi none: no PMIx server, each rank is an MPI singleton", "[pmix][slow]") {
  const std::string mark = marker();
  // Without PMIx, OpenMPI starts every rank as a size-1 singleton: the
  // program sees size 1 where 2 was expected, and says so.
  Result r = run(kDlaunch + " -n 2 --mpi none " + kBin + "/mpi_hello 2 " + mark);
  INFO(r.out);
  CHECK(r.code != 0);
  CHECK(count(r.out, "PMIX_SERVER_URI") == 0);
  CHECK(count(r.out, "MPI_Comm_size is 1, expected 2") >= 1);
  CHECK_FALSE(leftover(mark));
}

TEST_CASE("dlaunch: ranks get the PMIx server's variables, not inherited ones", "[pmix]") {
  Result r = run("env PMIX_RANK=77 PMIX_NAMESPACE=outer " + kDlaunch + " -n 2 --tag-output /usr/bin/env");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, "PMIX_RANK=0") == 1);
  CHECK(count(r.out, "PMIX_RANK=1") == 1);
  CHECK(count(r.out, "PMIX_RANK=77") == 0);
  CHECK(count(r.out, "PMIX_NAMESPACE=outer") == 0);
  CHECK(count(r.out, "PMIX_NAMESPACE=dl-") == 2);
  CHECK(count(r.out, "PMIX_SERVER_URI") >= 2);
  CHECK(count(r.out, "OMPI_MCA_schizo=^orte") == 2);
}

TEST_CASE("dlaunch: an agent removes the temp dirs that killed agents left behind", "[pmix]") {
  // A job dir of an agent whose pid no longer exists (as after SIGKILL), one
  // of a live process, and an unrelated dlaunch-* name.
  char base[] = "/tmp/dl_mpi_stale.XXXXXX";
  REQUIRE(mkdtemp(base) != nullptr);
  pid_t child = fork();
  if (child == 0) _exit(0);
  REQUIRE(waitpid(child, nullptr, 0) == child);
  const std::string dead = std::string(base) + "/dlaunch-" + std::to_string(child) + "-AbCdEf";
  const std::string live = std::string(base) + "/dlaunch-" + std::to_string(getpid()) + "-GhIjKl";
  const std::string other = std::string(base) + "/dlaunch-it-MnOpQr";
  for (auto& d : {dead, live, other}) REQUIRE(mkdir(d.c_str(), 0700) == 0);
  REQUIRE(mkdir((dead + "/pmix").c_str(), 0700) == 0);
  Result r = run("env TMPDIR=" + std::string(base) + " " + kDlaunch + " -n 1 /bin/true");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(access(dead.c_str(), F_OK) != 0);
  CHECK(access(live.c_str(), F_OK) == 0);
  CHECK(access(other.c_str(), F_OK) == 0);
  // And the job's own dir is gone too: only the two kept remain.
  int entries = 0;
  DIR* d = opendir(base);
  while (dirent* e = readdir(d)) entries += e->d_name[0] != '.';
  closedir(d);
  CHECK(entries == 2);
  std::filesystem::remove_all(base);
}

TEST_CASE("dlaunch: what an agent killed outright left in TMPDIR goes with the next job's agent", "[pmix]") {
  // A Python rank connects to its PMIx port and keeps the connection open (one
  // closed before the agent accepts it is nobody's, refused: the agent makes
  // the PMIx dir only for an admitted one)
  // and runs dlaunch's hook (it makes the Python ranks' dir), then SIGKILLs
  // its agent: both dirs stay behind; the next job on the host must remove both.
  char base[] = "/tmp/dl_mpi_killed.XXXXXX";
  REQUIRE(mkdtemp(base) != nullptr);
  const std::string env = "env TMPDIR=" + std::string(base) + " ";
  const std::string rank =
      "import os, socket, time\n"
      "uri = os.environ['PMIX_SERVER_URI41']\n"
      "s = socket.create_connection(('127.0.0.1', int(uri.rsplit(':', 1)[1])))\n"
      "d = os.environ['TMPDIR']\n"
      "while len([n for n in os.listdir(d) if n.startswith('dlaunch-')]) < 2: time.sleep(0.01)\n"
      "os.kill(os.getppid(), 9)\n"
      "time.sleep(2)\n";
  Result first = run(env + kDlaunch + " -n 1 /usr/bin/python3 -c \"" + rank + "\"");
  INFO(first.out);
  CHECK(first.code != 0);
  auto entries = [&] {
    std::vector<std::string> names;
    DIR* d = opendir(base);
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
    return names;
  };
  CHECK(entries().size() >= 2);  // left behind: else this test proves nothing
  Result second = run(env + kDlaunch + " -n 1 /bin/true");
  INFO(second.out);
  CHECK(second.code == 0);
  const auto left = entries();
  std::string names;
  for (const auto& n : left) names += n + " ";
  INFO("left in TMPDIR: " << names);
  CHECK(left.empty());
  std::filesystem::remove_all(base);
}

// A restarted MPI job (docs/failures.md, "MPI jobs"): every attempt is a
// namespace of its own, registered with the agent's PMIx server, which
// stays up. A rank lost in attempt 0 (after MPI_Init: the server serves, and
// the next namespace replaces the first) and the whole job comes back as one
// world of N in attempt 1, never as singletons ("rank 0 of 1").
TEST_CASE("dlaunch -n 4 --max-restarts 1 with OpenMPI: a rank that exits 1 or is killed in attempt 0, one world of 4 "
          "in attempt 1",
          "[pmix][slow][restart]") {
  const std::string how = GENERATE("exit", "kill");
  check_restart(kDlaunch + " -n 4 --max-restarts 1", kBin + "/mpi_restart", 4, 2, how);
  // --mpi pmix (PMIx only) restarts as auto does.
  if (how == std::string("exit")) check_restart(kDlaunch + " -n 2 --max-restarts 1 --mpi pmix", kBin + "/mpi_restart", 2, 0, how);
}

// The same, with the namespace registered while libpmix is still idle: in
// attempt 0 no rank reached MPI_Init (a shell exits first), so the PMIx
// server starts for attempt 1's namespace, the first it serves.
TEST_CASE("dlaunch --max-restarts 1: an attempt that never called MPI_Init, then OpenMPI's mpi_hello in the next",
          "[pmix][slow][restart]") {
  const std::string mark = marker();
  Result r = run(kDlaunch + " -n 2 --max-restarts 1 sh -c '[ \"$DLAUNCH_RESTART_COUNT\" = 0 ] && exit 3; exec \"$0\" 2 " +
                 mark + "' " + kBin + "/mpi_hello");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, "dlaunch: attempt 1 of 2 failed: rank ") == 1);
  CHECK(count(r.out, "hello rank 0 of 2 ") == 1);
  CHECK(count(r.out, "hello rank 1 of 2 ") == 1);
  CHECK(count(r.out, " ok") == 2);
  CHECK(count(r.out, " of 1 ") == 0);
  CHECK_FALSE(leftover(mark));
}

// The launch tree (--fanout) on 8 simulated hosts (--launcher sim), 3 levels
// deep with fanout 2: OpenMPI's wire-up fences, the modex and the
// allreduce's fence pass through relaying agents; every host runs a PMIx
// server of its own.
TEST_CASE("dlaunch --fanout 2 on 8 simulated hosts: mpi_hello through a depth-3 launch tree", "[pmix][slow]") {
  const std::string mark = marker();
  Result r = run(sim_tree_command(kDlaunch, 8, 2, 2) + " --mpi pmix " + kBin + "/mpi_hello 16 " + mark);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, "launch tree: 8 hosts, fanout 2, depth 3") == 1);
  CHECK(count(r.out, " ok") == 16);
  for (int k = 0; k < 16; ++k) CHECK(count(r.out, "hello rank " + std::to_string(k) + " of 16") == 1);
  CHECK(count(r.out, "BAD") == 0);
  CHECK_FALSE(leftover(mark));
}
