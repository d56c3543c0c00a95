#pragma once
// What a peer reports about its host (stage 3), gathered on that host: the
// request names what to look at, the reply is a HostFacts (doctor/records.h;
// docs/doctor.md lists its fields), its GPUs the launch's (doctor/gpu.h).
#include <chrono>
#include <string>
#include <vector>

#include "doctor/records.h"

namespace dl::doctor {

// Never throws for what it finds (a missing program is a finding); the
// facts it cannot read are absent.
HostFacts collect_facts(const FactsRequest& request);

// `path` exists, is a regular file and executable by this user (access X_OK);
// `why` says which not.
ExecutableFact check_executable(const std::string& path);

// The first line a command prints (stdout and stderr), run through sh with
// a time limit; "" when it printed nothing. Sets *status to its exit status.
std::string first_output_line(const std::string& shell_command, int* status);
// The same for `argv` run without a shell (argv[0] a path), killed after
// `answer` (15 s) of its own time (status 124); 127 when it cannot be executed. Its own
// time leaves out what it spent runnable and waiting for a CPU, so a host
// with far more busy processes than CPUs does not pass for a hung program;
// whatever the wait, it is killed after `most` (kMostStarvedS). *waited_s,
// when given, is how long it ran in all.
inline constexpr int kAnswerS = 15, kMostStarvedS = 120;
std::string first_output_line(const std::vector<std::string>& argv, int* status, double* waited_s = nullptr,
                              std::chrono::milliseconds answer = std::chrono::seconds(kAnswerS),
                              std::chrono::milliseconds most = std::chrono::seconds(kMostStarvedS));

}  // namespace dl::doctor
