#pragma once
// Running `dlaunch doctor` inside h0 of a namespace cluster, and what the
// tests look for in its output.
#include <chrono>
#include <string>
#include <vector>

#include "tests/cluster/cluster_fixture.h"

namespace dl::doctor_test {

// Absolute path of a built binary.
std::string bin(const std::string& name);

// The PATH sshd gives a session on h0 (what every remote peer sees; the
// tests never change h0's sshd); the doctor runs with it so that h0, whose
// peer inherits the doctor's environment, matches the others.
std::string ssh_path(const dl::cluster::Cluster& c);

// Runs `dlaunch doctor --hostfile HOSTFILE --ssh-config C ARGS` inside h0.
dl::cluster::RunResult run_doctor(const dl::cluster::Cluster& c, const std::string& args,
                                  const std::string& hostfile = "",
                                  std::chrono::milliseconds timeout = std::chrono::seconds(150));

// As run_doctor, with the doctor's own PATH (and so h0's peer's) set to `path`.
dl::cluster::RunResult run_doctor_with_path(const dl::cluster::Cluster& c, const std::string& path, const std::string& args);

// The mark of a failed check in the doctor's table and problem lines.
inline const std::string kFail = "\u2717";

// The lines of `text` that start with `prefix`.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix);
// The table row of `host` (the line that starts with "host ").
std::string row_of(const std::string& text, const std::string& host);
// Peer processes ("doctor --peer") left in any host, and what it left in its TMPDIR; "" when clean.
std::string leftovers(const dl::cluster::Cluster& c);

bool contains(const std::string& hay, const std::string& needle);

std::string read_file(const std::string& path);
// The problem lines ("✗ CHECK: ...") of one check, and of all checks.
std::vector<std::string> failures(const std::string& out, const std::string& check);
int count_failures(const std::string& out);

}  // namespace dl::doctor_test
