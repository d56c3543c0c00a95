#pragma once
// This host's wall clock against another's, from one exchange (the doctor's
// clock check, the health gate's): the reader notes its clock when it asks
// (t0) and when the answer comes (t1); the peer read its own in between.
// Taking the midpoint, the offset is off by at most half the round trip.
#include <string>

namespace dl::machine {

// CLOCK_REALTIME in nanoseconds since the epoch.
long long wall_ns();

// The peer's offset (ns, positive: ahead) from one exchange: `remote` read
// halfway between `t0` and `t1`.
long long clock_offset_ns(long long t0, long long t1, long long remote);

// "+83.2s", "-12.0ms": an offset for the user.
std::string signed_offset(long long offset_ns);

// What the user should do about a clock that is off.
inline constexpr const char* kClockFix = "synchronise the clocks (chrony or ntpd; `timedatectl set-ntp true`)";

// "" when a clock `offset_ns` off, known to within `uncertain_ns` (half the
// exchange's round trip), may be within `threshold_s` of the reader's; else
// "its clock is +83.2s off the launcher's (more than --clock-threshold 1 s)".
// A threshold of 0 or less judges nothing.
std::string clock_off(long long offset_ns, long long uncertain_ns, double threshold_s);

}  // namespace dl::machine
