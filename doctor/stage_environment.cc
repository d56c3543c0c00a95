// Stage 3: what each host's peer reports (facts.h), compared with the
// launcher and across hosts.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "doctor/analysis.h"
#include "doctor/doctor.h"
#include "doctor/gpu.h"
#include "remote/agent_starter.h"

namespace dl::doctor {

namespace {
constexpr Millis kFactsTimeout{30000};
constexpr Millis kClockTimeout{10000};

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct ClockSample {
  double rtt_us = 1e18;
  long long offset_ns = 0;
};

// Three exchanges; the one with the shortest round trip gives the offset.
ClockSample measure_clock(PeerLink& p) {
  ClockSample best;
  for (int i = 0; i < 3; ++i) {
    const long long t0 = now_ns();
    const auto reply = p.call({{"op", "clock"}}, kClockTimeout);
    const long long t1 = now_ns();
    const double rtt = (t1 - t0) / 1e3;
    if (rtt < best.rtt_us) best = {rtt, clock_offset_ns(t0, t1, reply.at("time_ns").get<long long>())};
  }
  return best;
}

std::string signed_ms(double ms) {
  char b[32];
  if (std::fabs(ms) >= 1000) std::snprintf(b, sizeof b, "%+.1fs", ms / 1000);
  else std::snprintf(b, sizeof b, "%+.1fms", ms);
  return b;
}
}  // namespace

void Doctor::stage_environment() {
  std::vector<std::string> vars{"PATH", "LD_LIBRARY_PATH"};
  for (const auto& x : o_.exports)
    if (x.find('=') == std::string::npos) vars.push_back(x);  // VAR=value: dlaunch sets it, nothing to compare
  const std::string local_agent = remote::agent_path("", false);
  const std::string remote_agent = remote::agent_path(o_.prefix, true);
  std::vector<nlohmann::json> facts(entries_.size());
  usable_gpus_.assign(entries_.size(), 0);
  const std::string helper = nccl_helper();  // "" without the NCCL backend
  std::vector<ClockSample> clocks(entries_.size());
  progress("remote environment of " + std::to_string(alive().size()) + " hosts");
  auto errors = each_alive([&](int h) {
    PeerLink& p = *peers_[static_cast<size_t>(h)];
    clocks[static_cast<size_t>(h)] = measure_clock(p);
    const bool local = report_->cell(h, Check::kSsh).text == "local";
    facts[static_cast<size_t>(h)] = p.call({{"op", "facts"}, {"vars", vars}, {"program", o_.program},
                                            {"agent", local ? local_agent : remote_agent}, {"nccl_helper", helper}},
                                           kFactsTimeout);
  });
  for (int h : alive()) {
    const size_t i = static_cast<size_t>(h);
    if (!errors[i].empty()) {
      if (report_->cell(h, Check::kSsh).mark == Mark::kNotRun) report_->set(h, Check::kSsh, Mark::kOk);  // ssh itself worked
      fail(h, Check::kDlaunch, "", errors[i]);
      continue;
    }
    if (report_->cell(h, Check::kSsh).mark != Mark::kOk || report_->cell(h, Check::kSsh).text.empty())
      report_->set(h, Check::kSsh, Mark::kOk, human_us(clocks[i].rtt_us));
    const auto& f = facts[i];
    auto& hf = report_->host_facts(h);
    hf = f;
    hf["ssh_rtt_us"] = clocks[i].rtt_us;
    hf["clock_offset_ms"] = clocks[i].offset_ns / 1e6;
    judge_host(h, f, clocks[i].offset_ns);
  }
  check_env(facts);
}

// Stage 3's verdicts on one host's facts, against the launcher's.
void Doctor::judge_host(int h, const nlohmann::json& f, long long offset_ns) {
  // dlaunch and its agent.
  const auto& a = f.at("agent");
  if (f.value("version", "") != DLAUNCH_VERSION)
    fail(h, Check::kDlaunch, f.value("version", "?"), name(h) + ": dlaunch there is version " + f.value("version", "?") + ", this one is " DLAUNCH_VERSION,
         "install the same dlaunch on every host");
  else if (!a.value("ok", false))
    fail(h, Check::kDlaunch, "no agent", name(h) + ": dlaunch-agent at " + a.value("path", "") + ": " + a.value("why", ""),
         "install dlaunch at the same path on every host, or pass --prefix DIR");
  else if (a.value("version", "") != DLAUNCH_VERSION)
    fail(h, Check::kDlaunch, "agent " + a.value("version", "?"),
         name(h) + ": dlaunch-agent at " + a.value("path", "") + " is version " + a.value("version", "?") + ", dlaunch is " DLAUNCH_VERSION,
         "install the same dlaunch on every host");
  else
    report_->set(h, Check::kDlaunch, Mark::kOk, DLAUNCH_VERSION);
  // The program.
  if (f.contains("program")) {
    const auto& pr = f["program"];
    if (pr.value("ok", false)) report_->set(h, Check::kProgram, Mark::kOk);
    else
      fail(h, Check::kProgram, "missing", name(h) + ": --program " + o_.program + ": " + pr.value("why", ""),
           "install it at the same path on every host (or on a filesystem they all mount)");
  }
  // The clock.
  const double off_ms = offset_ns / 1e6;
  char threshold[32];
  std::snprintf(threshold, sizeof threshold, "%g", o_.clock_threshold_s);
  if (std::fabs(off_ms) > o_.clock_threshold_s * 1000)
    fail(h, Check::kClock, signed_ms(off_ms),
         name(h) + ": its clock is " + signed_ms(off_ms) + " off the launcher's (more than --clock-threshold " +
             threshold + " s)",
         "synchronise the clocks (chrony or ntpd; `timedatectl set-ntp true`)");
  else
    report_->set(h, Check::kClock, Mark::kOk, signed_ms(off_ms));
  // GPUs: what the driver lists and what CUDA makes of them.
  GpuView v;
  view_gpu_list(f.at("gpus"), v);
  v.has_smi = !f.value("gpu_tool", "").empty();
  v.smi_error = f.value("gpu_error", "");
  if (f.contains("cuda_visible_devices") && f["cuda_visible_devices"].is_string())
    v.visible_devices = f["cuda_visible_devices"].get<std::string>();
  if (f.contains("cuda")) {
    v.cuda = f["cuda"].value("count", 0);
    v.cuda_error = f["cuda"].value("error", "");
    v.cuda_error_name = f["cuda"].value("error_name", "");
  }
  if (f.contains("cuda_runtime")) v.runtime = f["cuda_runtime"].value("count", 0), v.runtime_error = f["cuda_runtime"].value("error", "");
  const GpuVerdict g = judge_gpus(name(h), v, o_.gpus_per_node);
  usable_gpus_[static_cast<size_t>(h)] = g.usable;
  if (g.mark == Mark::kFail) fail(h, Check::kGpus, g.cell, g.what, g.fix);
  else report_->set(h, Check::kGpus, g.mark, g.cell);
  if (g.mark == Mark::kWarn) report_->add({Mark::kWarn, Check::kGpus, {name(h)}, g.what, g.fix});
  if (f.contains("tmp_free_bytes") && f["tmp_free_bytes"].is_number() && f["tmp_free_bytes"].get<double>() < 1e9)
    report_->add({Mark::kWarn, Check::kEnv, {name(h)}, name(h) + ": /tmp has only " + human_bytes(f["tmp_free_bytes"].get<double>()) + " free",
                  "free space there (ranks and NCCL write to /tmp)"});
}

void Doctor::check_env(const std::vector<nlohmann::json>& facts) {
  std::vector<int> hosts;
  for (int h : alive())
    if (facts[static_cast<size_t>(h)].contains("env")) hosts.push_back(h);
  std::vector<std::string> bad(entries_.size());
  std::vector<std::string> vars;
  if (!hosts.empty())
    for (auto& [k, v] : facts[static_cast<size_t>(hosts[0])]["env"].items()) vars.push_back(k);
  for (const auto& var : vars) {
    std::vector<std::optional<std::string>> vals;
    for (int h : hosts) {
      const auto& v = facts[static_cast<size_t>(h)]["env"][var];
      vals.push_back(v.is_string() ? std::optional<std::string>(v.get<std::string>()) : std::nullopt);
    }
    const auto want = majority(vals);
    for (size_t k = 0; k < hosts.size(); ++k) {
      if (vals[k] == want) continue;
      const int h = hosts[k];
      bad[static_cast<size_t>(h)] += (bad[static_cast<size_t>(h)].empty() ? "" : ",") + var;
      report_->add({Mark::kFail, Check::kEnv, {name(h)}, name(h) + ": " + var + " " + describe_difference(vals[k], want),
                    "make " + var + " the same on every host (sshd's SetEnv, /etc/environment, the shell's rc file "
                    "for non-interactive ssh), or pass -x " + var + " to dlaunch"});
    }
  }
  for (int h : hosts) {
    const size_t i = static_cast<size_t>(h);
    if (bad[i].empty()) report_->set(h, Check::kEnv, Mark::kOk);
    else report_->set(h, Check::kEnv, Mark::kFail, bad[i]), dropped_[i] = true;
  }
}

}  // namespace dl::doctor
