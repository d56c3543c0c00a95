// --max-restarts decisions and wording (launcher/attempts.h) over a real
// Fate: which failures are retried, how the ready answers are collected,
// and the lines the user reads.
#include <catch2/catch.hpp>

#include <signal.h>

#include "launcher/attempts.h"

using namespace dl::launcher;

namespace {
RankExit exit_of(int rank, int code, int sig = 0, bool by_agent = false) {
  RankExit e;
  e.rank = rank, e.host = "n1", e.pid = 100 + rank, e.code = code, e.signal = sig, e.by_agent = by_agent;
  return e;
}
}  // namespace

TEST_CASE("attempts: a rank's own failure, MPI_Abort and a lost host are retried while restarts are left",
          "[launcher][restart]") {
  Attempts a(1);
  Fate code(2), sig(2), host(2), abort(2);
  code.on_exit(exit_of(1, 3));
  sig.on_exit(exit_of(1, 0, SIGSEGV));
  host.on_host_lost("n1", "connection reset", {0, 1});
  abort.on_mpi_abort(0, "n1", 2);
  for (Fate* f : {&code, &sig, &host, &abort}) CHECK(a.retry(*f));
  a.begin_restart({0});
  CHECK(a.ready(0, a.next(), 4000));
  a.relaunched();
  CHECK(a.restarts() == 1);
  CHECK_FALSE(a.retry(code));  // none left
  CHECK_FALSE(Attempts(0).retry(code));
}

TEST_CASE("attempts: no retry for a rank that could not start, a signal to dlaunch, --timeout, MPI_Init, success",
          "[launcher][restart]") {
  Attempts a(5);
  Fate spawn(2), interrupted(2), timeout(2), late_timeout(2), ok(1);
  RankExit bad = exit_of(0, 127);
  bad.spawn_failed = true, bad.message = "no such program";
  spawn.on_exit(bad);
  interrupted.on_signal(SIGINT);
  interrupted.on_exit(exit_of(0, 0, SIGINT, true));
  timeout.on_timeout(10);
  late_timeout.on_exit(exit_of(1, 1));  // a retryable failure first,
  late_timeout.on_timeout(10);          // then --timeout while tearing down: the job ends
  ok.on_exit(exit_of(0, 0));
  for (Fate* f : {&spawn, &interrupted, &timeout, &late_timeout, &ok}) CHECK_FALSE(a.retry(*f));
  CHECK(late_timeout.exit_code() == 1);
  CHECK_THAT(a.final_line(late_timeout), Catch::EndsWith("not restarted: dlaunch was stopped (a signal or --timeout)"));
  CHECK_THAT(a.final_line(spawn), Catch::EndsWith("not restarted (only a rank's own failure or a lost host is)"));
  Fate mpi(2);  // a usage failure's verdict says what to do; nothing is added to it
  mpi.on_mpi_refused(0, "node0", "PMIx");
  CHECK_FALSE(a.retry(mpi));
  CHECK(a.final_line(mpi) == "dlaunch: attempt 1 of 6 failed: " + mpi.verdict());
}

TEST_CASE("attempts: ready answers: every node once, for the right attempt - node 0's port is the next MASTER_PORT",
          "[launcher][restart]") {
  Attempts a(3);
  a.begin_restart({0, 1, 2});
  CHECK(a.next() == 1);
  CHECK_FALSE(a.ready(1, 1, 5001));
  CHECK_FALSE(a.ready(1, 1, 5001));  // twice counts once
  CHECK_FALSE(a.ready(0, 2, 5000));  // another attempt's answer is ignored
  CHECK_FALSE(a.ready(7, 1, 5007));  // so is a node not waited for
  CHECK(a.waiting() == std::vector<int>{0, 2});
  CHECK_FALSE(a.ready(0, 1, 5000));
  CHECK(a.ready(2, 1, 5002));
  CHECK(a.master_port() == 5000);
  a.relaunched();
  CHECK(a.restarts() == 1);
  CHECK(a.next() == 2);
}

TEST_CASE("attempts: answers that come with the teardown count for the restart, but not a node started anew",
          "[launcher][restart]") {
  Attempts a(3);
  // Tearing down attempt 0: answers for attempt 1 are kept, none completes anything yet.
  CHECK_FALSE(a.ready(0, 1, 5000));
  CHECK_FALSE(a.ready(1, 1, 5001));
  CHECK_FALSE(a.ready(2, 2, 5002));  // another attempt's: dropped
  CHECK_FALSE(a.ready(3, 1, 5003));  // node 3's agent is lost and started anew: its hello counts, not this
  a.begin_restart({0, 1, 2, 3}, {3});
  CHECK(a.waiting() == std::vector<int>{2, 3});
  CHECK_FALSE(a.waiting().empty());
  CHECK_FALSE(a.ready(2, 1, 5002));
  CHECK(a.waiting() == std::vector<int>{3});
  CHECK(a.ready(3, 1, 6003));  // the new agent's hello
  CHECK(a.waiting().empty());
  CHECK(a.master_port() == 5000);  // node 0's early answer offered it
  a.relaunched();
  // The next teardown's answers: a node every agent answered for is ready at once.
  CHECK_FALSE(a.ready(0, 2, 7000));
  CHECK_FALSE(a.ready(1, 2, 7001));
  CHECK_FALSE(a.ready(1, 1, 5001));  // the attempt before's: stale
  a.begin_restart({0, 1});
  CHECK(a.waiting().empty());
  CHECK(a.master_port() == 7000);
  a.relaunched();
  // Kept answers do not outlive their restart: attempt 3 waits for both again.
  a.begin_restart({0, 1});
  CHECK(a.waiting() == std::vector<int>{0, 1});
}

TEST_CASE("attempts: the lines", "[launcher][restart]") {
  Fate f(2);
  f.on_exit(exit_of(1, 3));
  // Without --max-restarts the verdict is as it always was.
  CHECK(Attempts(0).final_line(f) == "dlaunch: rank 1 on n1 (pid 101) exited with code 3");
  CHECK(Attempts(0).final_line(Fate(0)).empty());
  Attempts a(2);
  CHECK(a.restarting_line(f.verdict()) ==
        "dlaunch: attempt 1 of 3 failed: rank 1 on n1 (pid 101) exited with code 3; restarting (1 more restart left)");
  CHECK(a.final_line(Fate(0)).empty());  // success on the first attempt says nothing
  a.begin_restart({0});
  a.relaunched();
  CHECK_THAT(a.restarting_line(f.verdict()), Catch::EndsWith("restarting (the last restart)"));
  CHECK(a.final_line(Fate(0)) == "dlaunch: attempt 2 of 3 succeeded");
  a.begin_restart({0});
  a.relaunched();
  CHECK(a.final_line(f) == "dlaunch: attempt 3 of 3 failed: rank 1 on n1 (pid 101) exited with code 3; no restarts left");
  Attempts b(2);
  b.refuse("the agent on n1 is gone");
  CHECK_FALSE(b.retry(f));
  CHECK_THAT(b.final_line(f), Catch::EndsWith("; cannot restart: the agent on n1 is gone"));
  // A restart that began says the verdict with "restarting"; its failure
  // then gives the reason alone.
  Attempts c(2);
  c.begin_restart({0, 1}, {1});
  c.refuse("n1: cannot connect");
  CHECK(c.final_line(f) == "dlaunch: attempt 1 of 3 failed (above); cannot restart: n1: cannot connect");
  CHECK(c.final_line(f).find("exited with code 3") == std::string::npos);
}

TEST_CASE("attempts: a verdict already on stderr in full is not the last line again, unless there were restarts",
          "[launcher][restart]") {
  Fate lost(2);
  lost.on_host_lost("n1", "its agent could not be started", {0, 1});
  CHECK(Attempts(0).final_line(lost) == "dlaunch: lost the agent on n1 (its agent could not be started); its ranks count as failed");
  lost.mark_said();
  CHECK(Attempts(0).final_line(lost).empty());
  CHECK_THAT(Attempts(1).final_line(lost), Catch::StartsWith("dlaunch: attempt 1 of 2 failed: lost the agent on n1"));
}
