#pragma once
// What a signal to dlaunch does, by the job's phase (launcher/job_phase.h)
// and how many ending signals came before: a pure function, so the whole
// table is tested without a process (tests/launcher/signal_policy_test.cc)
// and the Job only carries the action out. docs/failures.md "Signals".
#include "launcher/job_phase.h"

namespace dl::launcher {

enum class SignalAction {
  kSuspend,        // Ctrl-Z, SIGTTIN/SIGTTOU: stop the ranks, then dlaunch, until SIGCONT
  kContinue,       // SIGCONT: the ranks go on, heartbeats count afresh
  kForwardNotice,  // SIGUSR1/2 while ranks run: to every rank, the job goes on
  kIgnoreNotice,   // SIGUSR1/2 while no rank runs: said, nothing else
  kEndRestart,     // between attempts: no restart; the failed attempt's verdict stands
  kAbortStartup,   // before the launch: the job fails, nothing was started
  kForward,        // the first ending signal while ranks run: to every rank
  kKillNow,        // a second one: tear down without the grace period
};

// `earlier` counts the ending signals (INT, TERM, HUP) already forwarded in
// this attempt.
SignalAction signal_action(Phase phase, int sig, int earlier);

}  // namespace dl::launcher
