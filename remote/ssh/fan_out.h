#pragma once
// Many hosts at once: one Session per host, at most `parallel` being set up at
// the same time (one thread each), every failure a one-line message naming the
// host and the fix. The launcher starts its agents with start_all; run_all is
// the same for commands that run to completion (tests, benchmarks, doctor).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "errors/error.h"
#include "remote/ssh/session.h"

namespace dl::ssh {

struct Started {
  Target target;
  std::unique_ptr<Session> session;        // set on success
  std::unique_ptr<RemoteProcess> process;  // running; stdin got the payload and is still open
  std::string error;                       // one line naming the host; empty on success
  ErrorKind kind = ErrorKind::kIo;         // what failed, when error is set
};

// Connects to targets[i], runs commands[i] and writes `stdin_payload` to it
// (the job token: it never appears on a command line). Never throws for a
// host's failure: it is in that host's Started. REQUIRES: commands.size() ==
// targets.size(), parallel >= 1. The returned sessions belong to the caller's
// thread from now on.
std::vector<Started> start_all(const std::vector<Target>& targets,
                               const std::vector<std::string>& commands,
                               std::string_view stdin_payload, const Options& options,
                               int parallel);

struct Finished {
  Target target;
  int exit_status = -1;  // -1 when it never ran
  std::string out, err;
  std::string error;     // one line when it could not run, or ended with 126/127; else empty
};

// Like start_all, then closes stdin and waits (within `timeout` per host) for
// each command to end, collecting its output.
std::vector<Finished> run_all(const std::vector<Target>& targets,
                              const std::vector<std::string>& commands,
                              std::string_view stdin_payload, const Options& options,
                              int parallel, Millis timeout);

// One line for a remote command that could not start: exit 127 "not found",
// 126 "not executable", with the first line of its stderr (what the remote
// shell said). Empty for any other status.
std::string describe_start_failure(const std::string& host, int status, const std::string& err);

}  // namespace dl::ssh
