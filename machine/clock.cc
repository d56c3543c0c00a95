#include "machine/clock.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace dl::machine {

long long wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

long long clock_offset_ns(long long t0, long long t1, long long remote) { return remote - (t0 + (t1 - t0) / 2); }

std::string signed_offset(long long offset_ns) {
  const double ms = static_cast<double>(offset_ns) / 1e6;
  char b[32];
  if (std::fabs(ms) >= 1000) std::snprintf(b, sizeof b, "%+.1fs", ms / 1000);
  else std::snprintf(b, sizeof b, "%+.1fms", ms);
  return b;
}

std::string clock_off(long long offset_ns, long long uncertain_ns, double threshold_s) {
  if (threshold_s <= 0) return "";
  const double surely_off_s = static_cast<double>(std::llabs(offset_ns) - std::llabs(uncertain_ns)) / 1e9;
  if (surely_off_s <= threshold_s) return "";
  char threshold[32];
  std::snprintf(threshold, sizeof threshold, "%g", threshold_s);
  return "its clock is " + signed_offset(offset_ns) + " off the launcher's (more than --clock-threshold " + threshold + " s)";
}

}  // namespace dl::machine
