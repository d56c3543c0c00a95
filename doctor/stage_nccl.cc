// Stage 6, NCCL: a real dlaunch job with one rank per GPU over every host
// that passed and has GPUs, running dlaunch-nccl-check (an NCCL all_reduce
// on device buffers, every element checked) and reporting its bus bandwidth
// next to the built-in runtime's. Where it cannot run (no GPUs, or a dlaunch
// built without NCCL) the summary says so and why.
#include "doctor/doctor.h"
#include "doctor/hostlist.h"
#include "doctor/gpu.h"

#ifndef DLAUNCH_HAVE_NCCL
#define DLAUNCH_HAVE_NCCL 0
#endif

namespace dl::doctor {

std::string Doctor::nccl_helper() const {
  if (!DLAUNCH_HAVE_NCCL) return "";
  return remote_exe_.substr(0, remote_exe_.rfind('/') + 1) + "dlaunch-nccl-check";
}

void Doctor::stage_nccl() {
  const std::vector<int> hosts = alive();
  std::vector<int> usable;
  for (int h : hosts) usable.push_back(usable_gpus_.empty() ? 0 : usable_gpus_[static_cast<size_t>(h)]);
  const NcclPlan plan = plan_nccl(hosts, usable, DLAUNCH_HAVE_NCCL != 0);
  Notes& notes = report_->notes();
  notes.nccl_check = NcclNote{plan.run, plan.reason, plan.total, std::nullopt};
  if (!plan.run) {
    notes.nccl = "skipped: " + plan.reason;
    if (plan.mark != Mark::kWarn) return;
    std::vector<std::string> names;
    for (size_t i = 0; i < hosts.size(); ++i)
      if (usable[i] > 0) report_->set(hosts[i], Check::kNccl, Mark::kWarn, "not built"), names.push_back(name(hosts[i]));
    report_->add({Mark::kWarn, Check::kNccl, names, plan.reason, plan.fix});
    return;
  }
  std::vector<std::string> names;
  for (auto [h, k] : plan.ranks) names.push_back(name(h));
  const std::string all = compress_hosts(names);
  if (!plan.left_out.empty()) {
    std::vector<std::string> names;
    std::string list;
    for (int h : plan.left_out) names.push_back(name(h)), list += (list.empty() ? "" : ", ") + name(h);
    report_->add({Mark::kWarn, Check::kNccl, names, list + (names.size() == 1 ? " has" : " have") +
                  " no GPU while " + all + " do: the NCCL check ran without " + (names.size() == 1 ? "it" : "them"),
                  "leave GPU-less hosts out of GPU jobs' hostfiles, or check their driver (nvidia-smi)"});
  }
  progress("nccl all_reduce over " + std::to_string(plan.total) + " GPUs");
  std::vector<std::string> options;
  // The interface stage 4 found, so NCCL does not guess one.
  if (!ifname_.empty()) options = {"-x", "NCCL_SOCKET_IFNAME=" + ifname_};
  ChildResult r = run_job(plan.ranks, options, {nccl_helper(), "--bytes", "4194304", "--iters", "5"}, "the NCCL job");
  const auto j = json_after_output<NcclCheckResult>(r.out);
  const bool parsed = j.has_value();
  const std::string shape = std::to_string(plan.total) + " GPUs on " + std::to_string(plan.ranks.size()) +
                            (plan.ranks.size() == 1 ? " host" : " hosts");
  if (r.status == 0 && parsed && j->wrong == 0) {
    const double busbw = j->busbw * 1e9;
    for (auto [h, k] : plan.ranks) report_->set(h, Check::kNccl, Mark::kOk, human_rate(busbw));
    notes.nccl = "4 MB float32 sum over " + shape + ", busbw " + human_rate(busbw) + ", every element right" +
                 (plan.total == 1 ? " (one rank: no bus traffic)" : "");
    notes.nccl_check->busbw_Bps = busbw;
    return;
  }
  std::string what = "an NCCL all_reduce over " + shape + " (" + all + ") ";
  if (r.status == 124) what += "did not finish within " + job_bound_text(job_bounds());
  else if (parsed && j->wrong > 0) what += "got " + std::to_string(j->wrong) + " wrong elements";
  else what += "failed with status " + std::to_string(r.status) + ": " + verdict_lines(r.err.empty() ? r.out : r.err, 2);
  for (auto [h, k] : plan.ranks) report_->set(h, Check::kNccl, Mark::kFail);
  notes.nccl = "failed (below)";
  report_->add({Mark::kFail, Check::kNccl, {}, what,
                "rerun it with NCCL_DEBUG=INFO to see why: dlaunch --hostfile H -n " + std::to_string(plan.total) +
                    " -x NCCL_DEBUG=INFO " + nccl_helper()});
}

}  // namespace dl::doctor
