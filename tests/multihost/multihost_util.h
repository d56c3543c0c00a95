#pragma once
// Helpers for the multi-host tests: run dlaunch inside h0 of a namespace
// cluster, find processes by a marker in their argv, wait for them to go.
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "tests/cluster/cluster_fixture.h"

namespace dl::multihost {

// Absolute path of a built binary (DLAUNCH_BIN_DIR/name), or of a copy of
// the build's bin/ named by $DLAUNCH_TEST_BIN_DIR (a long chaos run on a
// snapshot while the build goes on changing).
std::string bin(const std::string& name);

// A token unique to this test process and call, to put in rank argv.
std::string unique_marker();

// "dlaunch -n 8 --hostfile H --ssh-config C <args>", quoted for sh.
std::string dlaunch_cmd(const dl::cluster::Cluster& c, const std::string& args);

// Runs dlaunch (dlaunch_cmd) inside h0 and returns its result.
dl::cluster::RunResult run_dlaunch(const dl::cluster::Cluster& c, const std::string& args,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(40));

// Starts the same in the background.
std::future<dl::cluster::RunResult> start_dlaunch(const dl::cluster::Cluster& c, const std::string& args,
                                                  std::chrono::milliseconds timeout = std::chrono::seconds(40));

// Pids in `host` whose argv contains `needle`.
std::vector<int> pids_matching(const dl::cluster::Cluster& c, const std::string& host, const std::string& needle);

// Pid of the dlaunch process (argv[0] ends in /dlaunch) whose argv has `marker`, or -1.
int launcher_pid(const std::string& marker);

// Waits until every host runs at least `per_host` processes matching `needle`.
bool wait_running(const dl::cluster::Cluster& c, const std::string& needle, int per_host,
                  std::chrono::milliseconds limit = std::chrono::seconds(15));

// Waits until no host runs a process matching `marker` or dlaunch-agent;
// returns what is left ("h2: 1234 sleep 40.1", ...), empty when clean.
std::string wait_clean(const dl::cluster::Cluster& c, const std::string& marker,
                       std::chrono::milliseconds limit = std::chrono::seconds(12));

bool contains(const std::string& hay, const std::string& needle);

// A slow start (dlaunch's --prefix DIR): writes DIR/bin/dlaunch-agent, which
// on host `host` sleeps `delay_s` before it runs the real agent, and
// elsewhere runs it at once. Put the test's marker in DIR: the sleeping
// agent's argv holds it.
void write_slow_agent(const std::string& dir, const std::string& host, double delay_s);

// How many lines of `text` contain `needle`.
int count_lines_with(const std::string& text, const std::string& needle);

}  // namespace dl::multihost
