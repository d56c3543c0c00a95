#pragma once
// Exit codes of dlaunch, in one place. A job's own failure is passed through
// (the failing rank's code, or 128+signal); these are dlaunch's own.
namespace dl::exit_codes {
inline constexpr int kOk = 0;
inline constexpr int kFailure = 1;         // a check found a problem (doctor), a remote host failed
inline constexpr int kUsage = 2;           // bad command line or bad hostfile: nothing was started
inline constexpr int kTimeout = 124;       // --timeout fired (as timeout(1) does)
inline constexpr int kNotExecutable = 126; // the program exists but cannot be executed (as a shell does)
inline constexpr int kNotFound = 127;      // the program does not exist (as a shell does)
inline constexpr int kSignalBase = 128;    // a rank killed by signal S exits the job with 128+S
}  // namespace dl::exit_codes
