#pragma once
// Numbers a user types (option values): finite and bounded, or a UsageError
// that names the option, the range and what was given. strtod alone takes
// "nan", "inf" and 1e300, and a NaN passes every `x < 0` check.
#include <string>

namespace dl {

// The most a duration option may be where it travels as an int of
// milliseconds (2^31 ms is 24.8 days): 1,000,000 s, 11.5 days.
inline constexpr double kMaxWaitSeconds = 1e6;
// The most --timeout may be (a whole job's bound): 366 days, which a
// std::chrono deadline in nanoseconds holds with centuries to spare.
inline constexpr double kMaxJobSeconds = 366 * 86400.0;

// `text` as a finite number greater than `above` and at most `at_most`
// (or exactly 0 when zero_ok). The whole text must be the number. Throws
// UsageError "OPTION takes a number above A and at most B, got 'TEXT'".
double parse_number(const std::string& option, const std::string& text, double above, double at_most,
                    bool zero_ok = false);

// A duration in seconds: every duration option of dlaunch is read by this.
// Greater than 0 and at most `max_s`; 0 too when `zero_means` says what 0
// does ("no timeout"). Throws UsageError "OPTION takes seconds: a number
// above 0 and at most MAX, or 0 (WHAT IT MEANS), got 'TEXT'".
double parse_seconds(const std::string& option, const std::string& text, double max_s,
                     const char* zero_means = nullptr);

}  // namespace dl
