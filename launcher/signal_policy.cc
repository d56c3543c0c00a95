#include "launcher/signal_policy.h"

#include <signal.h>

namespace dl::launcher {

SignalAction signal_action(Phase phase, int sig, int earlier) {
  if (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) return SignalAction::kSuspend;
  if (sig == SIGCONT) return SignalAction::kContinue;
  if (sig == SIGUSR1 || sig == SIGUSR2)  // the scheduler's warning (Slurm's --signal=USR1@90): never fatal
    return phase == Phase::kLaunched || phase == Phase::kTearingDown ? SignalAction::kForwardNotice
                                                                      : SignalAction::kIgnoreNotice;
  if (phase == Phase::kRestarting) return SignalAction::kEndRestart;
  if (phase == Phase::kStarting || phase == Phase::kAborting) return SignalAction::kAbortStartup;
  return earlier == 0 ? SignalAction::kForward : SignalAction::kKillNow;
}

}  // namespace dl::launcher
