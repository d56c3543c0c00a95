#include "doctor/preflight.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

#include "doctor/doctor.h"
#include "doctor/options.h"
#include "errors/error.h"
#include "launcher/options/options.h"
#include "launcher/run.h"

namespace dl::doctor {

DoctorOptions preflight_options(const launcher::RunOptions& o) {
  DoctorOptions d;
  d.hostfile = o.hostfile, d.hosts = o.hosts;
  d.ssh_config = o.ssh_config, d.ssh_timeout_s = o.ssh_timeout_s, d.ssh_accept_new = o.ssh_accept_new;
  d.ssh_parallel = o.ssh_parallel, d.prefix = o.prefix, d.fanout = o.fanout;
  // As written: the doctor resolves "auto" its own way (doctor.cc).
  d.launcher = o.as_written.launcher == "slurm" ? throw UsageError("--preflight checks the job's hosts over ssh (or the test bed); "
                                                        "inside Slurm run `srun -N N dlaunch doctor --quick -H localhost` "
                                                        "or pass --launcher libssh")
                                     : o.as_written.launcher;
  for (const auto& x : o.exports)
    if (x.find('=') == std::string::npos && x.find('*') == std::string::npos) d.exports.push_back(x);
  if (o.interpreter.empty() && !o.command.empty() && o.command[0].rfind('/', 0) == 0) d.program = o.command[0];
  d.quick = true;
  return d;
}

std::map<std::string, std::string> preflight_failures(const Report& r, const std::vector<hostfiles::HostEntry>& entries) {
  std::map<std::string, std::string> failed;
  for (size_t h = 0; h < entries.size(); ++h) {
    if (r.host_passed(static_cast<int>(h))) continue;
    std::string why = "failed";
    for (const auto& p : r.problems())
      if (p.mark == Mark::kFail && std::find(p.hosts.begin(), p.hosts.end(), r.hosts()[h]) != p.hosts.end()) {
        why = std::string(check_name(p.check)) + ": " + p.what;
        break;
      }
    failed.emplace(entries[h].host, why);
  }
  return failed;
}

int run_with_preflight(const std::vector<std::string>& args) {
  if (std::find(args.begin(), args.end(), "--preflight") == args.end()) return launcher::run_command(args);
  bool help = false;
  launcher::RunOptions o;
  try {
    o = launcher::parse_run_options(args, &help);
  } catch (const Error&) {
    return launcher::run_command(args);  // says what is wrong, as without --preflight
  }
  if (help || o.version || !o.preflight) return launcher::run_command(args);
  const auto t0 = std::chrono::steady_clock::now();
  Doctor d(preflight_options(o));
  const Report& r = d.run();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f s", s);
  if (r.exit_code() != 0 && o.spares == 0 && o.max_hosts == 0) {
    std::cerr << r.render(true) << "dlaunch: --preflight: the job's hosts failed the checks above (" << took
              << "); the job was not started. `dlaunch doctor` with the same hosts checks their network and links too\n";
    return 1;
  }
  if (r.exit_code() != 0) {
    // With spares (--spares, --max-hosts), each host that failed fails the
    // job's health gate as its agent says hello: a spare takes its seat
    // before any rank starts, or the job does not start (no spare left).
    std::map<std::string, std::string> failed = preflight_failures(r, d.entries());
    std::string names;
    for (const auto& [host, why] : failed) names += (names.empty() ? "" : ", ") + host;
    std::cerr << r.render(true) << "dlaunch: --preflight: " << failed.size() << (failed.size() == 1 ? " host" : " hosts")
              << " failed the checks above (" << names << ") in " << took
              << "; the job starts without them, a spare in the seat of each that held one\n";
    return launcher::run_command(args, std::move(failed));
  }
  std::cerr << "dlaunch: --preflight: " << r.hosts().size() << (r.hosts().size() == 1 ? " host" : " hosts")
            << " passed (dlaunch and its agent, the program, PATH and -x variables, clocks, GPUs) in " << took << "\n";
  return launcher::run_command(args);
}

}  // namespace dl::doctor
