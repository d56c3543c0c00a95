#include <catch2/catch.hpp>

#include <signal.h>

#include "launcher/fate.h"

using dl::launcher::Fate;
using dl::launcher::RankExit;

namespace {
RankExit exited(int rank, int code, int pid = 100) {
  RankExit e;
  e.rank = rank, e.host = "node" + std::to_string(rank / 2), e.pid = pid, e.code = code;
  return e;
}
RankExit killed(int rank, int sig, int pid = 100) {
  RankExit e = exited(rank, 0, pid);
  e.signal = sig;
  return e;
}
}  // namespace

TEST_CASE("fate: all ranks exit 0", "[launcher]") {
  Fate f(3);
  for (int r = 0; r < 3; ++r) {
    CHECK_FALSE(f.all_done());
    CHECK(f.remaining() == 3 - r);
    CHECK_FALSE(f.on_exit(exited(r, 0)));
  }
  CHECK(f.all_done());
  CHECK_FALSE(f.failed());
  CHECK(f.exit_code() == 0);
  CHECK(f.verdict().empty());
}

TEST_CASE("fate: the first failure wins, never an OR of codes", "[launcher]") {
  Fate f(4);
  CHECK_FALSE(f.on_exit(exited(0, 0)));
  CHECK(f.on_exit(exited(3, 5, 4711)));  // the first failure: tear down
  CHECK_FALSE(f.on_exit(exited(1, 2)));  // 5|2 = 7 must not appear
  CHECK_FALSE(f.on_exit(killed(2, SIGKILL)));  // our own teardown's kill
  CHECK(f.all_done());
  CHECK(f.exit_code() == 5);
  CHECK(f.verdict() == "rank 3 on node1 (pid 4711) exited with code 5");
}

TEST_CASE("fate: a signal becomes 128+N with its name", "[launcher]") {
  Fate f(2);
  CHECK(f.on_exit(killed(1, SIGSEGV, 42)));
  CHECK(f.exit_code() == 139);
  CHECK(f.verdict() == "rank 1 on node0 (pid 42) was killed by signal 11 (Segmentation fault)");
  Fate g(1);
  RankExit e = killed(0, SIGABRT, 7);
  e.core = true;
  CHECK(g.on_exit(e));
  CHECK(g.exit_code() == 128 + SIGABRT);
  CHECK(g.verdict() == "rank 0 on node0 (pid 7) was killed by signal 6 (Aborted), core dumped");
}

TEST_CASE("fate: teardown kills after a failure do not change the verdict", "[launcher]") {
  Fate f(3);
  CHECK(f.on_exit(exited(0, 1)));
  const std::string v = f.verdict();
  CHECK_FALSE(f.on_exit(killed(1, SIGTERM)));
  CHECK_FALSE(f.on_exit(killed(2, SIGKILL)));
  CHECK(f.exit_code() == 1);
  CHECK(f.verdict() == v);
}

TEST_CASE("fate: ranks that fail by themselves after the first failure are named after it", "[launcher]") {
  Fate f(6);
  CHECK(f.on_exit(exited(0, 1, 10)));  // a survivor's error arrives first
  RankExit k = killed(3, SIGKILL, 13);
  k.by_agent = false;  // no agent sent it: the likely cause
  CHECK_FALSE(f.on_exit(k));
  RankExit e = exited(1, 1, 11);
  e.by_agent = false;
  CHECK_FALSE(f.on_exit(e));
  CHECK_FALSE(f.on_exit(killed(2, SIGTERM)));  // our teardown's: not named
  CHECK(f.exit_code() == 1);  // the first failure still decides the code
  CHECK(f.verdict() ==
        "rank 0 on node0 (pid 10) exited with code 1; before dlaunch stopped them, also rank 3 on node1 (pid 13) was "
        "killed by signal 9 (Killed), rank 1 on node0 exited with code 1");
  // More than three: the rest are counted, signal deaths listed first.
  for (int r : {4, 5}) {
    RankExit x = exited(r, 2, 20 + r);
    x.by_agent = false;
    f.on_exit(x);
  }
  CHECK(f.verdict().find("killed by signal 9 (Killed), rank 1 on node0 exited with code 1, rank 4 on node2 exited "
                         "with code 2, and 1 more ranks failed") != std::string::npos);
}

TEST_CASE("fate: after a user's signal, no rank is listed as failing by itself", "[launcher]") {
  Fate f(2);
  f.on_signal(SIGINT);
  RankExit a = killed(0, SIGINT);
  a.by_agent = false;
  CHECK(f.on_exit(a));
  RankExit b = exited(1, 130);
  b.by_agent = false;
  CHECK_FALSE(f.on_exit(b));
  CHECK(f.verdict().find("also") == std::string::npos);
}

TEST_CASE("fate: a program that cannot start", "[launcher]") {
  Fate f(2);
  RankExit e = exited(0, 127);
  e.spawn_failed = true;
  e.message = "./nope: No such file or directory";
  CHECK(f.on_exit(e));
  CHECK(f.exit_code() == 127);
  CHECK(f.verdict() == "cannot start rank 0 on node0: ./nope: No such file or directory");
}

TEST_CASE("fate: a lost host fails its unfinished ranks", "[launcher]") {
  Fate f(4);
  CHECK_FALSE(f.on_exit(exited(2, 0)));
  CHECK(f.on_host_lost("node1", "connection reset", {2, 3}));
  CHECK(f.exit_code() == 1);
  CHECK(f.verdict().find("node1") != std::string::npos);
  CHECK(f.verdict().find("connection reset") != std::string::npos);
  CHECK(f.remaining() == 2);
  // A host whose ranks had all finished is no failure.
  Fate g(2);
  CHECK_FALSE(g.on_exit(exited(0, 0)));
  CHECK_FALSE(g.on_host_lost("node0", "closed", {0}));
  CHECK_FALSE(g.failed());
}

TEST_CASE("fate: --timeout gives 124 and says so", "[launcher]") {
  Fate f(2);
  CHECK(f.on_timeout(1.5));
  CHECK(f.exit_code() == 124);
  CHECK(f.verdict().find("--timeout 1.5") != std::string::npos);
  CHECK_FALSE(f.on_exit(killed(0, SIGTERM)));
  CHECK(f.exit_code() == 124);
  // After a failure the timer firing changes nothing.
  Fate g(1);
  CHECK(g.on_exit(exited(0, 3)));
  CHECK_FALSE(g.on_timeout(2));
  CHECK(g.exit_code() == 3);
}

TEST_CASE("fate: a user's signal makes the job 'interrupted'", "[launcher]") {
  Fate f(2);
  f.on_signal(SIGINT);
  CHECK_FALSE(f.failed());
  CHECK(f.on_exit(killed(0, SIGINT)));
  CHECK(f.exit_code() == 130);
  CHECK(f.verdict().find("interrupted") != std::string::npos);
  CHECK(f.verdict().find("SIGINT") != std::string::npos);
  CHECK_FALSE(f.on_exit(killed(1, SIGINT)));
  CHECK(f.exit_code() == 130);
}

TEST_CASE("fate: after a user's SIGINT, ranks ended by the kill that follows still mean 'interrupted'",
          "[launcher]") {
  // A second Ctrl-C kills ranks that ignored the first: they die of SIGTERM
  // or SIGKILL, but the job was interrupted by the user.
  Fate f(2);
  f.on_signal(SIGINT);
  CHECK(f.on_exit(killed(0, SIGKILL)));
  CHECK(f.exit_code() == 130);
  CHECK(f.verdict().find("interrupted") != std::string::npos);
}

TEST_CASE("fate: signal names", "[launcher]") {
  CHECK(dl::launcher::signal_name(SIGSEGV) == "Segmentation fault");
  CHECK(dl::launcher::signal_name(SIGKILL) == "Killed");
}

TEST_CASE("fate: the exception torch's @record wrote is on the verdict line", "[launcher][torchrun]") {
  Fate f(3);
  RankExit e = exited(2, 1, 4711);
  e.error = "ValueError: bad lr 3.0 (at /work/train.py:12)";
  CHECK(f.on_exit(e));
  CHECK(f.exit_code() == 1);
  CHECK(f.verdict() == "rank 2 on node1 (pid 4711) exited with code 1: ValueError: bad lr 3.0 (at /work/train.py:12)");
  // A later failure's exception does not replace the first one's.
  RankExit later = exited(0, 1, 5);
  later.by_agent = false;
  later.error = "RuntimeError: Connection closed by peer (at /usr/lib/x.py:1)";
  CHECK_FALSE(f.on_exit(later));
  CHECK(f.verdict().rfind("rank 2 on node1 (pid 4711) exited with code 1: ValueError: bad lr 3.0", 0) == 0);
  CHECK(f.verdict().find("Connection closed") == std::string::npos);

  Fate g(1);  // no error file: the line is as before
  CHECK(g.on_exit(exited(0, 3, 9)));
  CHECK(g.verdict() == "rank 0 on node0 (pid 9) exited with code 3");
}

TEST_CASE("fate: MPI_Abort's own message is quoted unless it only restates the call", "[launcher]") {
  Fate own(2);
  CHECK(own.on_mpi_abort(1, "node0", 3, "pmi2 rank 1 gives up\nsecond line"));
  CHECK(own.exit_code() == 3);
  CHECK(own.verdict() == "rank 1 on node0 called MPI_Abort with code 3: \"pmi2 rank 1 gives up\"");

  Fate mpich(2);  // MPICH's PMI-1 text says nothing the verdict does not
  CHECK(mpich.on_mpi_abort(0, "node0", 13, "application called MPI_Abort(MPI_COMM_WORLD, 13) - process 0"));
  CHECK(mpich.verdict() == "rank 0 on node0 called MPI_Abort with code 13");

  Fate openmpi(2);  // OpenMPI's placeholder when the program gave no text
  CHECK(openmpi.on_mpi_abort(1, "node0", 5, "N/A"));
  CHECK(openmpi.verdict() == "rank 1 on node0 called MPI_Abort with code 5");

  Fate zero(2);  // code 0 still fails the job
  CHECK(zero.on_mpi_abort(0, "node0", 0, ""));
  CHECK(zero.exit_code() == 1);
  CHECK(zero.verdict() == "rank 0 on node0 called MPI_Abort with code 0");

  Fate longer(1);
  CHECK(longer.on_mpi_abort(0, "node0", 2, std::string(500, 'x')));
  CHECK(longer.verdict().size() < 300);
  CHECK(longer.verdict().ends_with("...\""));
}

TEST_CASE("fate: a rank's MPI_Init in per-node mode ends the job with 2, names the rank, is never retried",
          "[launcher][restart]") {
  Fate f(2);
  CHECK(f.on_mpi_refused(1, "node0", "PMIx"));
  CHECK(f.exit_code() == 2);
  CHECK_FALSE(f.retryable());
  CHECK(f.verdict() ==
        "rank 1 on node0 called MPI_Init (connected to its PMIx server), but per-node mode (--rdzv) serves no MPI: "
        "start an MPI program from one dlaunch that starts every host's ranks (--hostfile, -H, or the Slurm "
        "allocation it runs in), or add --mpi none to run each rank as an MPI singleton");
  CHECK_FALSE(f.on_mpi_refused(0, "node0", "PMI"));  // the first one decides
  CHECK_FALSE(f.on_exit(exited(0, 1)));              // the teardown's consequences do not change it
  CHECK(f.exit_code() == 2);
  Fate pmi(1);
  CHECK(pmi.on_mpi_refused(0, "node3", "PMI"));
  CHECK(pmi.verdict().find("rank 0 on node3 called MPI_Init (wrote to its PMI_FD)") == 0);
}

TEST_CASE("fate: the rank a refused MPI_Init or an MPI_Abort names is not named again among the later failures",
          "[launcher]") {
  RankExit pipe = killed(1, SIGPIPE, 6024);  // its PMI_FD closed: it dies by itself, before the teardown
  pipe.by_agent = false;
  RankExit other = exited(0, 1, 6023);
  other.by_agent = false;
  Fate refused(2);
  CHECK(refused.on_mpi_refused(1, "localhost", "PMI"));
  CHECK_FALSE(refused.on_exit(pipe));
  CHECK_FALSE(refused.on_exit(other));  // another rank's own failure is still named
  CHECK(refused.verdict().find("pid 6024") == std::string::npos);
  CHECK(refused.verdict().ends_with("; before dlaunch stopped them, also rank 0 on node0 exited with code 1"));
  Fate aborted(2);
  CHECK(aborted.on_mpi_abort(1, "node0", 3));
  CHECK_FALSE(aborted.on_exit(pipe));
  CHECK(aborted.verdict() == "rank 1 on node0 called MPI_Abort with code 3");
}

TEST_CASE("fate: a verdict already said in full is said once - a restated one is said again", "[launcher]") {
  Fate f(2);
  f.mark_said();  // nothing failed yet: nothing was said
  CHECK_FALSE(f.said());
  CHECK(f.on_host_lost("node1", "its agent could not be started", {0, 1}));
  f.mark_said();
  CHECK(f.said());
  f.restate("agents could not be started on 2 hosts (node1, node2); each is explained above");
  CHECK_FALSE(f.said());
}
