#include "launcher/options/unsent_env.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "remote/start_method.h"

namespace dl::launcher {

namespace {
// The usual families of variables meant for every rank (NCCL's and gloo's
// interfaces, torch's debug switches, OpenMP's threads, UCX's transports).
constexpr std::string_view kFamilies[] = {"NCCL_", "GLOO_", "TORCH_", "PYTORCH_", "CUDA_", "OMP_", "UCX_"};
constexpr std::string_view kNames[] = {"DLAUNCH_SOCKET_IFNAME"};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool meant_for_every_rank(std::string_view name) {
  if (name == "CUDA_VISIBLE_DEVICES") return false;
  // An install's, not the job's: each host has its own (CUDA_HOME, NCCL_VERSION).
  for (std::string_view end : {"_VERSION", "_HOME", "_PATH", "_ROOT"})
    if (name.size() > end.size() && name.substr(name.size() - end.size()) == end) return false;
  if (std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames)) return true;
  return std::any_of(std::begin(kFamilies), std::end(kFamilies), [&](std::string_view f) { return starts_with(name, f); });
}

std::string value_of(const EnvMap& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

// Whether the remote agents start with dlaunch's environment.
bool agents_inherit(const PlanInput& in) {
  const remote::StartMethod method = in.opts->launcher;
  if (!remote::passes_environment(method)) return false;
  if (method != remote::StartMethod::kSlurm) return true;
  // srun reads its --export from SLURM_EXPORT_ENV: ALL (the default) passes everything.
  std::string e = value_of(in.launcher_env, "SLURM_EXPORT_ENV");
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::toupper(c); });
  return e.empty() || e == "ALL" || e.rfind("ALL,", 0) == 0;
}

// The family (kFamilies) of the first of `names` that has one, or "".
std::string family_of(const std::vector<std::string>& names) {
  for (const auto& n : names)
    for (auto f : kFamilies)
      if (starts_with(n, f)) return std::string(f);
  return "";
}

// "a, b, c and 2 more" of the first `shown` of `words`.
std::string capped_list(const std::vector<std::string>& words, size_t shown) {
  std::string out;
  for (size_t k = 0; k < words.size() && k < shown; ++k) out += (k ? ", " : "") + words[k];
  if (words.size() > shown) out += " and " + std::to_string(words.size() - shown) + " more";
  return out;
}
}  // namespace

std::vector<std::string> unsent_names(const EnvMap& launcher_env, const EnvMap& sent) {
  std::vector<std::string> out;
  for (const auto& [name, value] : launcher_env)
    if (meant_for_every_rank(name) && !sent.count(name)) out.push_back(name);
  return out;  // sorted: the map's order
}

std::string unsent_env_warning(const PlanInput& in) {
  if (in.restart_count > 0 || !in.opts) return "";
  std::vector<std::string> remote;
  for (const auto& n : in.nodes)
    if (!n.local && !n.external) remote.push_back(n.host);
  if (remote.empty() || agents_inherit(in)) return "";
  const auto names = unsent_names(in.launcher_env, chosen_env(in));
  if (names.empty()) return "";
  const bool one = names.size() == 1;
  std::string how = one ? "send it with -x " + names[0] : "send them with -x NAME each";
  if (const std::string family = family_of(names); !one && !family.empty()) how += ", -x '" + family + "*' for a family";
  return "dlaunch: warning: " + capped_list(names, 8) + (one ? " is" : " are") + " set here but not sent: only this " +
         "host's ranks have " + (one ? "it" : "them") + ", not those on " + capped_list(remote, 3) +
         (in.opts->launcher == remote::StartMethod::kSlurm ? " (SLURM_EXPORT_ENV keeps srun from passing them); "
                                                            : " (their environment is their ssh login's); ") + how + ", or --export-all for every variable\n";
}

}  // namespace dl::launcher
