// Stage 3: what each host's peer reports (facts.h), compared with the
// launcher and across hosts.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "doctor/analysis.h"
#include "machine/clock.h"
#include "doctor/doctor.h"
#include "doctor/gpu.h"
#include "remote/agent_starter.h"

namespace dl::doctor {

namespace {
constexpr Millis kFactsTimeout{30000};

}  // namespace

void Doctor::stage_environment() {
  std::vector<std::string> vars{"PATH", "LD_LIBRARY_PATH"};
  for (const auto& x : o_.exports)
    if (x.find('=') == std::string::npos) vars.push_back(x);  // VAR=value: dlaunch sets it, nothing to compare
  const std::string helper = nccl_helper();  // "" without the NCCL backend
  // The launcher's own host and the test bed's run this dlaunch's agent; the others the one --prefix names.
  std::vector<int> here, there;
  for (int h : alive()) (sim_ || report_->cell(h, Check::kSsh).text == "local" ? here : there).push_back(h);
  progress("remote environment of " + std::to_string(alive().size()) + " hosts");
  // Every parent reads its children's clocks: one reading per host, each a
  // round trip from the host that started it.
  std::map<int, ClockNote> clocks;
  for (const auto& c : fan_->clocks()) clocks[c.node] = c;
  // The test bed's hosts share this machine's cores: a thousand of them
  // take their turns.
  const Millis facts_timeout = kFactsTimeout + (sim_ ? Millis(50) * static_cast<long>(alive().size()) : Millis(0));
  auto facts_of = ask_every<HostFacts>(*fan_, here, FactsRequest{vars, o_.program, remote::agent_path("", false), helper},
                                       facts_timeout);
  facts_of.merge(ask_every<HostFacts>(*fan_, there, FactsRequest{vars, o_.program, remote::agent_path(o_.prefix, true), helper},
                                      facts_timeout));
  std::vector<HostFacts> facts(entries_.size());
  usable_gpus_.assign(entries_.size(), 0);
  for (int h : alive()) {
    const size_t i = static_cast<size_t>(h);
    if (!clocks.count(h)) clocks[h] = {h, 0, 0, name(h) + ": its clock was not read"};
    const ClockNote& clock = clocks[h];
    const Outcome<HostFacts>& got = facts_of[h];
    const std::string error = !clock.error.empty() ? clock.error : !got.reply ? (got.error.empty() ? "no answer" : got.error) : "";
    if (!error.empty()) {
      if (report_->cell(h, Check::kSsh).mark == Mark::kNotRun) report_->set(h, Check::kSsh, Mark::kOk);  // ssh itself worked
      fail(h, Check::kDlaunch, "", error);
      continue;
    }
    if (report_->cell(h, Check::kSsh).mark != Mark::kOk || report_->cell(h, Check::kSsh).text.empty())
      report_->set(h, Check::kSsh, Mark::kOk, human_us(clock.rtt_us));
    facts[i] = *got.reply;
    HostFacts f = facts[i];
    f.ssh_rtt_us = clock.rtt_us;
    f.clock_offset_ms = clock.offset_ns / 1e6;
    report_->set_facts(h, std::move(f));
    judge_host(h, facts[i], clock.offset_ns);
  }
  check_env(facts);
}

// Stage 3's verdicts on one host's facts, against the launcher's.
void Doctor::judge_host(int h, const HostFacts& f, long long offset_ns) {
  judge_dlaunch(h, f);
  if (f.program) {
    if (f.program->ok) report_->set(h, Check::kProgram, Mark::kOk);
    else
      fail(h, Check::kProgram, "missing", name(h) + ": --program " + o_.program + ": " + f.program->why,
           "install it at the same path on every host (or on a filesystem they all mount)");
  }
  judge_clock(h, offset_ns);
  judge_host_gpus(h, f);
  if (f.tmp_free_bytes && *f.tmp_free_bytes < 1e9)
    report_->add({Mark::kWarn, Check::kEnv, {name(h)}, name(h) + ": /tmp has only " + human_bytes(static_cast<double>(*f.tmp_free_bytes)) + " free",
                  "free space there (ranks and NCCL write to /tmp)"});
}

// dlaunch and its agent: there, and this dlaunch's version.
void Doctor::judge_dlaunch(int h, const HostFacts& f) {
  const ExecutableFact a = f.agent.value_or(ExecutableFact{});
  const std::string agent_version = a.version.value_or("?");
  if (f.version != DLAUNCH_VERSION)
    fail(h, Check::kDlaunch, f.version, name(h) + ": dlaunch there is version " + f.version + ", this one is " DLAUNCH_VERSION,
         "install the same dlaunch on every host");
  else if (!a.ok)
    fail(h, Check::kDlaunch, "no agent", name(h) + ": dlaunch-agent at " + a.path + ": " + a.why,
         "install dlaunch at the same path on every host, or pass --prefix DIR");
  else if (agent_version != DLAUNCH_VERSION)
    fail(h, Check::kDlaunch, "agent " + agent_version,
         name(h) + ": dlaunch-agent at " + a.path + " is version " + agent_version + ", dlaunch is " DLAUNCH_VERSION,
         "install the same dlaunch on every host");
  else
    report_->set(h, Check::kDlaunch, Mark::kOk, DLAUNCH_VERSION);
}

void Doctor::judge_clock(int h, long long offset_ns) {
  if (const std::string off = machine::clock_off(offset_ns, 0, o_.clock_threshold_s); !off.empty())
    fail(h, Check::kClock, machine::signed_offset(offset_ns), name(h) + ": " + off, machine::kClockFix);
  else
    report_->set(h, Check::kClock, Mark::kOk, machine::signed_offset(offset_ns));
}

// GPUs: what the driver lists and what CUDA makes of them.
void Doctor::judge_host_gpus(int h, const HostFacts& f) {
  GpuView v;
  view_gpu_list(f.gpus, v);
  v.has_smi = !f.gpu_tool.empty();
  v.smi_error = f.gpu_error;
  v.visible_devices = f.cuda_visible_devices;
  if (f.cuda) {
    v.cuda = f.cuda->count;
    v.cuda_error = f.cuda->error;
    v.cuda_error_name = f.cuda->error_name.value_or("");
  }
  if (f.cuda_runtime) v.runtime = f.cuda_runtime->count, v.runtime_error = f.cuda_runtime->error;
  const GpuVerdict g = judge_gpus(name(h), v, o_.gpus_per_node);
  usable_gpus_[static_cast<size_t>(h)] = g.usable;
  if (g.mark == Mark::kFail) fail(h, Check::kGpus, g.cell, g.what, g.fix);
  else report_->set(h, Check::kGpus, g.mark, g.cell);
  if (g.mark == Mark::kWarn) report_->add({Mark::kWarn, Check::kGpus, {name(h)}, g.what, g.fix});
}

void Doctor::check_env(const std::vector<HostFacts>& facts) {
  std::vector<int> hosts = alive();
  std::vector<std::string> bad(entries_.size());
  std::vector<bool> fails(entries_.size(), false);
  std::vector<std::string> vars;
  if (!hosts.empty())
    for (const auto& [k, v] : facts[static_cast<size_t>(hosts[0])].env) vars.push_back(k);
  for (const auto& var : vars) {
    std::vector<std::optional<std::string>> vals;
    for (int h : hosts) {
      const auto& env = facts[static_cast<size_t>(h)].env;
      const auto v = env.find(var);
      vals.push_back(v == env.end() ? std::nullopt : v->second);
    }
    const auto want = majority(vals);
    for (size_t k = 0; k < hosts.size(); ++k) {
      if (vals[k] == want) continue;
      const int h = hosts[k];
      const bool launcher = report_->cell(h, Check::kSsh).text == "local";
      const bool fail = env_difference_fails(var, launcher);
      bad[static_cast<size_t>(h)] += (bad[static_cast<size_t>(h)].empty() ? "" : ",") + var;
      fails[static_cast<size_t>(h)] = fails[static_cast<size_t>(h)] || fail;
      report_->add({fail ? Mark::kFail : Mark::kWarn, Check::kEnv, {name(h)}, name(h) + ": " + var + " " + describe_difference(vals[k], want),
                    "make " + var + " the same on every host (sshd's SetEnv, /etc/environment, the shell's rc file "
                    "for non-interactive ssh), or pass -x " + var + " to dlaunch"});
    }
  }
  for (int h : hosts) {
    const size_t i = static_cast<size_t>(h);
    if (bad[i].empty()) report_->set(h, Check::kEnv, Mark::kOk);
    else if (!fails[i]) report_->set(h, Check::kEnv, Mark::kWarn, bad[i]);
    else report_->set(h, Check::kEnv, Mark::kFail, bad[i]), dropped_[i] = true;
  }
}

}  // namespace dl::doctor
