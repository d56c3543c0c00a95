#pragma once
// The `dlaunch doctor` command line, parsed once into DoctorOptions. Every
// default is written here.
#include <string>
#include <vector>

namespace dl::doctor {

struct DoctorOptions {
  // Which hosts (stage 1).
  std::string hostfile;            // --hostfile/--machinefile
  std::string hosts;               // -H/--host list
  int np = 0;                      // -n: check that the slots add up to at least this many ranks; 0 = no check
  // ssh (stage 2), as `dlaunch run` takes them.
  std::string ssh_config;          // --ssh-config FILE (like ssh -F)
  double ssh_timeout_s = 10;       // --ssh-timeout: connect timeout per host
  bool ssh_accept_new = false;     // --ssh-accept-new
  int ssh_parallel = 32;           // --ssh-parallel
  std::string prefix;              // --prefix DIR: dlaunch is DIR/bin/dlaunch on remote hosts
  // How the peers are started (stage 2), as a job's agents are.
  std::string launcher = "auto";   // --launcher libssh|ssh|sim (auto: libssh)
  int fanout = 32;                 // --fanout F: with more remote hosts than F, the peers start each other (0: all from here)
  // Remote environment (stage 3).
  std::string program;             // --program PATH: must exist and be executable on every host
  std::vector<std::string> exports;  // -x VAR: compared across hosts (VAR=value: the value is set by dlaunch)
  int gpus_per_node = -1;          // --gpus-per-node: each host must see at least this many; -1 = report only
  double clock_threshold_s = 1.0;  // --clock-threshold: flag a clock further off than this from the launcher's
  // Network and links (stages 4, 5).
  double connect_timeout_s = 3;    // --connect-timeout: one probe between two hosts
  double link_factor = 3;          // --link-factor: a pair slower than a typical host's best pair by this factor is flagged
  double link_seconds = 0.25;      // --link-seconds: bandwidth test time per direction and pair
  std::string links = "auto";      // --links full|sparse|auto: every pair, or a ring and random matchings (auto: full up to 8 hosts)
  int link_parallel = -1;          // --link-parallel N: pairs measured at once (0: a whole round; -1: 0, or this machine's cores for sim)
  // Output.
  bool quick = false;              // --quick: stop after stage 3
  bool json = false;               // --json: the report as JSON on stdout instead of the table
  bool verbose = false;            // -v: a table row for every host, however many
  std::string write_healthy;       // --write-healthy FILE: hostfile of the hosts that passed
  bool peer = false;               // --peer: the hidden remote side (reads its commands on stdin)
  bool cuda_probe = false;         // --cuda-probe: hidden; prints what the CUDA driver sees (cuda_probe.h)
};

// Parses `args` (after "doctor"). Throws UsageError naming the bad option.
// Sets *help when --help was given (then nothing else is validated).
DoctorOptions parse_doctor_options(const std::vector<std::string>& args, bool* help);
std::string doctor_options_help();
// Every option's spellings ("--hostfile", "-H", ...), internal ones left out: bash completion's.
std::vector<std::string> doctor_option_names();

}  // namespace dl::doctor
