#pragma once
// The job's life as named phases that only move forward (no booleans to
// keep consistent), except for a restart, which goes back to launched for
// the next attempt (--max-restarts, launcher/attempts.h):
//
//                      ┌─────────────relaunch─────────────────┐
//                      ▼                                      │
//   starting ──launch──► launched ──teardown──► tearing down ──restart──► restarting
//      │                    │                        │                       │
//      │ abort              └──────finish────────────┤ finish         finish │
//      ▼                                             ▼                       │
//   aborting ─────────────────► done ◄──────────── closing ◄─────────────────┘
//
//   starting      agents are being started; none has its ranks yet
//   aborting      the job failed before the launch: agents were told to leave
//   launched      every agent has its launch message; ranks run
//   tearing down  a rank failed (or a signal, timeout, lost host): kill sent
//   restarting    every rank of a failed attempt ended and the failure may be
//                 retried: agents were told to restart; the next launch
//                 waits for each to say it is ready
//   closing       every rank has ended: agents were told bye
//   done          the event loop is stopping
#include <stdexcept>
#include <string>

namespace dl::launcher {

enum class Phase { kStarting, kAborting, kLaunched, kTearingDown, kRestarting, kClosing, kDone };

inline const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kStarting: return "starting";
    case Phase::kAborting: return "aborting";
    case Phase::kLaunched: return "launched";
    case Phase::kTearingDown: return "tearing down";
    case Phase::kRestarting: return "restarting";
    case Phase::kClosing: return "closing";
    case Phase::kDone: return "done";
  }
  return "?";
}

// The transitions of the diagram above (staying put is not one).
inline bool phase_step_allowed(Phase from, Phase to) {
  switch (from) {
    case Phase::kStarting: return to == Phase::kLaunched || to == Phase::kAborting || to == Phase::kDone;
    case Phase::kAborting: return to == Phase::kDone;
    case Phase::kLaunched: return to == Phase::kTearingDown || to == Phase::kClosing || to == Phase::kDone;
    case Phase::kTearingDown: return to == Phase::kRestarting || to == Phase::kClosing || to == Phase::kDone;
    case Phase::kRestarting: return to == Phase::kLaunched || to == Phase::kClosing;
    case Phase::kClosing: return to == Phase::kDone;
    case Phase::kDone: return false;
  }
  return false;
}

class JobPhase {
 public:
  Phase now() const { return p_; }
  // Moves to `to`; a step the diagram does not have is a bug and throws.
  void to(Phase to) {
    if (!phase_step_allowed(p_, to))
      throw std::logic_error(std::string("job phase cannot go from ") + phase_name(p_) + " to " + phase_name(to));
    p_ = to;
  }
  bool is(Phase p) const { return p_ == p; }
  // The ranks were sent out and the loop still runs: launched, tearing down,
  // restarting (between two attempts), closing.
  bool launched() const {
    return p_ == Phase::kLaunched || p_ == Phase::kTearingDown || p_ == Phase::kRestarting || p_ == Phase::kClosing;
  }
  // Agents were told to leave: aborting, closing, done.
  bool ending() const { return p_ == Phase::kAborting || p_ == Phase::kClosing || p_ == Phase::kDone; }

 private:
  Phase p_ = Phase::kStarting;
};

}  // namespace dl::launcher
