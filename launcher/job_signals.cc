// The Job's signals: what each one does in each phase is
// launcher/signal_policy.h's pure decision; here it is carried out.
#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "launcher/job.h"
#include "launcher/signal_policy.h"

namespace dl::launcher {

namespace msg = control::msg;
using std::chrono::milliseconds;

void Job::on_signal(int sig) {
  signals_.async_wait([this](auto ec, int s) { if (!ec) on_signal(s); });
  const std::string name = std::string("SIG") + ::sigabbrev_np(sig);
  switch (signal_action(phase_.now(), sig, signals_seen_)) {
    case SignalAction::kSuspend: return suspend(sig);
    case SignalAction::kContinue: return continued();
    case SignalAction::kForwardNotice:
      server_->broadcast(msg::Signal{sig});  // to every rank's process group, on every host
      return log(name + " forwarded to every rank");
    case SignalAction::kIgnoreNotice: return log(name + " ignored: no ranks run now");
    case SignalAction::kEndRestart:
      fate_.on_signal(sig);  // ends the job: the failed attempt's verdict stands, not restarted
      return restart_failed("dlaunch was stopped (" + name + ")");
    case SignalAction::kAbortStartup:
      fate_.on_host_lost("(startup)", "interrupted by " + name, {});
      return teardown(0);
    case SignalAction::kForward:
      ++signals_seen_;
      fate_.on_signal(sig);
      if (isatty(2)) write_fully(2, "dlaunch: forwarding " + name + " to all ranks (again to kill them at once)\n");
      return server_->broadcast(msg::Signal{sig});
    case SignalAction::kKillNow: return teardown(0);
  }
}

void Job::suspend(int sig) {
  // The ranks first (mpirun forwards Ctrl-Z the same way): with dlaunch
  // stopped and theirs running, their output would pile up and, after
  // --heartbeat-timeout, the agents would end the job as launcher-less.
  if (phase_.is(Phase::kLaunched)) server_->broadcast(msg::Signal{SIGSTOP});
  log(std::string("SIG") + ::sigabbrev_np(sig) + ": the ranks are stopped, and dlaunch stops until SIGCONT (fg or bg)");
  stop_self_when_sent(0);
}

// The SIGSTOP frames must be in the kernel's hands before this process
// stops: up to a second for a congested connection, in 10 ms steps.
void Job::stop_self_when_sent(int waited_ms) {
  if (server_->queued_bytes() == 0 || waited_ms >= 1000) {
    ::raise(SIGSTOP);  // returns once continued; continued() runs from SIGCONT's handler
    return;
  }
  suspend_timer_.expires_after(milliseconds(10));
  suspend_timer_.async_wait([this, waited_ms](boost::system::error_code ec) {
    if (!ec) stop_self_when_sent(waited_ms + 10);
  });
}

void Job::continued() {
  // However this process was stopped (Ctrl-Z, kill -STOP), the agents' last
  // frames are old now: their silence counts afresh, as ours does there.
  if (!phase_.is(Phase::kLaunched) && !phase_.is(Phase::kTearingDown)) return;
  server_->start_heartbeats(milliseconds(heartbeat_interval_ms(opts_.heartbeat_timeout_s)), secs(opts_.heartbeat_timeout_s));
  server_->broadcast(msg::Signal{SIGCONT});
  log("SIGCONT: the ranks continue");
}

}  // namespace dl::launcher
