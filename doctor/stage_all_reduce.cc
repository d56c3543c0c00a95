// Stage 6: a real dlaunch job over the hosts that passed, one rank each,
// running `dlaunch bench` (the collectives runtime's all_reduce, every
// element checked) and reporting its bus bandwidth. It goes through the same
// launcher, agents, store and collectives a user's job does.
#include <fstream>
#include <thread>

#include "collectives/bench/bench_report.h"
#include "doctor/analysis.h"
#include "doctor/child.h"
#include "doctor/doctor.h"
#include "doctor/hostlist.h"
#include "errors/error.h"

namespace dl::doctor {

ChildResult Doctor::run_job(const std::vector<std::pair<int, int>>& slots, const std::vector<std::string>& options,
                            const std::vector<std::string>& program, const std::string& what) {
  TempDir dir;
  const std::string hostfile = dir.path() + "/hosts";
  int n = 0;
  {
    std::ofstream f(hostfile);
    for (auto [h, k] : slots) f << hostfiles::describe(entries_[static_cast<size_t>(h)]) << " slots=" << k << "\n", n += k;
    if (!f) throw_errno("writing " + hostfile);
  }
  const JobBounds b = job_bounds();
  std::vector<std::string> argv{self_exe_, "--hostfile", hostfile, "-n", std::to_string(n), "--timeout", std::to_string(b.timeout_s),
                                "--agent-timeout", std::to_string(b.agent_timeout_s), "--ssh-timeout", std::to_string(o_.ssh_timeout_s)};
  if (!o_.ssh_config.empty()) argv.insert(argv.end(), {"--ssh-config", o_.ssh_config});
  if (!o_.prefix.empty()) argv.insert(argv.end(), {"--prefix", o_.prefix});
  if (o_.ssh_accept_new) argv.push_back("--ssh-accept-new");
  // Started as the peers were: the same start method and launch tree.
  argv.insert(argv.end(), {"--launcher", method_, "--fanout", std::to_string(o_.fanout)});
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), program.begin(), program.end());
  return run_child(argv, std::chrono::seconds(b.kill_after_s), what);
}

void Doctor::stage_all_reduce() {
  const std::vector<int> passed = alive();
  if (passed.size() < 2) return;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const AllReduceSpread spread = all_reduce_hosts(passed, sim_, cores);
  const std::vector<int>& hosts = spread.hosts;
  const bool all_of_them = spread.step == 1;
  // "256 of the 1024 hosts (one in 4" where the test bed could not run them all.
  const std::string some = std::to_string(hosts.size()) + " of the " + std::to_string(passed.size()) + " hosts (one in " +
                           std::to_string(spread.step);
  const std::string of = all_of_them ? std::to_string(hosts.size()) + " hosts"
                                     : some + ": the test bed runs a job over at most " + std::to_string(kMachineHostsPerCore) +
                                           " simulated hosts a core, and this machine has " + std::to_string(cores) + ")";
  progress("all_reduce over " + (all_of_them ? std::to_string(hosts.size()) + " hosts" : some + ")"));
  std::vector<std::pair<int, int>> slots;
  for (int h : hosts) slots.emplace_back(h, 1);
  const int n = static_cast<int>(hosts.size());
  const std::string bytes = std::to_string(all_reduce_bytes(n)), size = size_text(all_reduce_bytes(n));
  ChildResult r = run_job(slots, {}, {remote_exe_, "bench", "-b", bytes, "-e", bytes, "-n", n <= 8 ? "5" : "2", "-w", n <= 8 ? "2" : "1", "--json"},
                          "the all_reduce job");
  const auto j = json_after_output<coll::BenchReport>(r.out);
  const bool parsed = j && !j->rows.empty();
  std::vector<std::string> names;
  for (int h : hosts) names.push_back(name(h));
  const std::string all = compress_hosts(names);
  if (r.status == 0 && parsed && j->wrong == 0) {
    const double busbw = j->rows[0].out_of_place.busbw * 1e9;
    for (int h : hosts) report_->set(h, Check::kAllReduce, Mark::kOk, human_rate(busbw));
    report_->notes().all_reduce = size + " float32 sum over " + of + ", busbw " +
                                  human_rate(busbw) + ", every element right";
    report_->notes().busbw_Bps = busbw;
    return;
  }
  std::string what = "a " + std::to_string(hosts.size()) + "-host job (" + all + ") running `dlaunch bench` ";
  const bool wrong = parsed && j->wrong > 0;
  if (r.status == 124) what += "did not finish within " + job_bound_text(job_bounds());
  else if (wrong) what += "got " + std::to_string(j->wrong) + " wrong elements in all_reduce";
  else what += "failed with status " + std::to_string(r.status) + ": " + verdict_lines(r.err.empty() ? r.out : r.err, 2);
  // The job ran on what this machine can run (all_reduce_hosts): its
  // failure is a finding, on hosts of their own and on the test bed.
  for (int h : hosts) report_->set(h, Check::kAllReduce, Mark::kFail);
  // By hand over the same hosts: all of them, or (on the test bed) a hostfile
  // of the spread's, which `-n` alone over the whole one would not pick.
  report_->add({Mark::kFail, Check::kAllReduce, {}, what,
                std::string("run it by hand to see every rank's output: dlaunch --hostfile H -n ") +
                    std::to_string(hosts.size()) + " dlaunch bench -b " + bytes + " -e " + bytes +
                    (all_of_them ? "" : " (H: a hostfile of the " + std::to_string(hosts.size()) + " hosts named above, one slot each)")});
}

}  // namespace dl::doctor
