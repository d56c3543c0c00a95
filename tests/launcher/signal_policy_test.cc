// What each signal does in each phase of the job (launcher/signal_policy.h):
// the whole table, without a process or a socket.
#include <catch2/catch.hpp>

#include <signal.h>

#include "launcher/signal_policy.h"

using dl::launcher::Phase;
using dl::launcher::signal_action;
using A = dl::launcher::SignalAction;

namespace {
const Phase kAll[] = {Phase::kStarting,   Phase::kAborting, Phase::kLaunched, Phase::kTearingDown,
                      Phase::kRestarting, Phase::kClosing,  Phase::kDone};
}

TEST_CASE("signals: Ctrl-Z and SIGCONT suspend and continue in every phase", "[launcher][signals]") {
  for (Phase p : kAll) {
    INFO(dl::launcher::phase_name(p));
    for (int sig : {SIGTSTP, SIGTTIN, SIGTTOU}) CHECK(signal_action(p, sig, 0) == A::kSuspend);
    CHECK(signal_action(p, SIGCONT, 3) == A::kContinue);
  }
}

TEST_CASE("signals: the scheduler's SIGUSR1/2 reach the ranks while they run and never end the job",
          "[launcher][signals]") {
  for (int sig : {SIGUSR1, SIGUSR2}) {
    CHECK(signal_action(Phase::kLaunched, sig, 0) == A::kForwardNotice);
    CHECK(signal_action(Phase::kTearingDown, sig, 1) == A::kForwardNotice);
    for (Phase p : {Phase::kStarting, Phase::kAborting, Phase::kRestarting, Phase::kClosing, Phase::kDone})
      CHECK(signal_action(p, sig, 0) == A::kIgnoreNotice);
  }
}

TEST_CASE("signals: INT, TERM and HUP are forwarded once, kill on the second, and end a start-up or a restart",
          "[launcher][signals]") {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    INFO(sig);
    CHECK(signal_action(Phase::kStarting, sig, 0) == A::kAbortStartup);
    CHECK(signal_action(Phase::kAborting, sig, 0) == A::kAbortStartup);
    CHECK(signal_action(Phase::kLaunched, sig, 0) == A::kForward);
    CHECK(signal_action(Phase::kLaunched, sig, 1) == A::kKillNow);
    CHECK(signal_action(Phase::kTearingDown, sig, 0) == A::kForward);
    CHECK(signal_action(Phase::kTearingDown, sig, 2) == A::kKillNow);
    CHECK(signal_action(Phase::kRestarting, sig, 0) == A::kEndRestart);
    CHECK(signal_action(Phase::kClosing, sig, 0) == A::kForward);
  }
}
