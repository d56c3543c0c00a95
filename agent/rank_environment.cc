#include "agent/rank_environment.h"

#include <stdlib.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "control/env_names.h"
#include "errors/error.h"
#include "errors/user_file.h"

namespace dl::agent {

EnvVars compose_rank_env(EnvVars env, const EnvVars& common, const EnvVars& own,
                         const std::vector<std::pair<std::string, std::string>>& server_vars) {
  // Identity variables of an outer launcher (PMIx, PMI, OpenMPI's runtime)
  // would make the rank talk to it: they go before ours are added. Slurm's
  // task-only ones describe the task srun started (this agent's dlaunch), not
  // the rank; the per-task ones with a counterpart come rewritten in `own`.
  for (auto it = env.begin(); it != env.end();)
    it = env::is_foreign_identity_var(it->first) || env::is_slurm_task_only_var(it->first) ? env.erase(it)
                                                                                          : std::next(it);
  for (const auto& [k, v] : common) env[k] = v;
  for (const auto& [k, v] : own) env[k] = v;
  for (const auto& [k, v] : server_vars) env[k] = v;
  return env;
}

RankEnvBase rank_env_base(EnvVars inherited, const EnvVars& common) {
  RankEnvBase b;
  b.vars = compose_rank_env(std::move(inherited), common, {}, {});
  b.strings.reserve(b.vars.size());
  for (const auto& [k, v] : b.vars) b.strings.push_back(k + "=" + v);
  return b;
}

std::vector<std::string> rank_env_strings(const RankEnvBase& base, const EnvVars& over) {
  // Both are sorted by name: one merge, the rank's value winning a tie.
  std::vector<std::string> out;
  out.reserve(base.vars.size() + over.size());
  auto b = base.vars.begin();
  size_t bi = 0;
  auto o = over.begin();
  while (b != base.vars.end() || o != over.end()) {
    if (o == over.end() || (b != base.vars.end() && b->first < o->first)) {
      out.push_back(base.strings[bi]);
      ++b, ++bi;
      continue;
    }
    if (b != base.vars.end() && b->first == o->first) ++b, ++bi;
    out.push_back(o->first + "=" + o->second);
    ++o;
  }
  return out;
}

const std::string* rank_env_value(const RankEnvBase& base, const EnvVars& over, const std::string& name) {
  return RankEnvSoFar{base.vars, over}.find(name);
}

namespace {
// The innermost `File "F", line N` of a Python traceback: "F:N", or "".
std::string raise_site(const std::string& callstack) {
  std::string site;
  std::istringstream in(callstack);
  for (std::string line; std::getline(in, line);) {
    const auto f = line.find("File \"");
    if (f == std::string::npos || line.find_first_not_of(' ') != f) continue;
    const auto end = line.find("\", line ", f + 6);
    if (end == std::string::npos) continue;
    const auto num = end + 8, num_end = line.find_first_not_of("0123456789", num);
    if (num_end == num) continue;
    site = line.substr(f + 6, end - f - 6) + ":" + line.substr(num, num_end - num);
  }
  return site;
}

// The first line of `text`, at most `max` bytes (a whole page of repr() would
// not fit the verdict's one line).
std::string first_line(const std::string& text, size_t max) {
  std::string s = text.substr(0, text.find('\n'));
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}
}  // namespace

std::optional<std::string> summarize_torch_error(std::string_view json_text) {
  const auto j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("message")) return std::nullopt;
  const auto& m = j["message"];
  std::string text, callstack;
  if (m.is_string()) {
    text = m.get<std::string>();
  } else if (m.is_object() && m.contains("message") && m["message"].is_string()) {
    text = m["message"].get<std::string>();
    if (m.contains("extraInfo") && m["extraInfo"].is_object() && m["extraInfo"].contains("py_callstack") &&
        m["extraInfo"]["py_callstack"].is_string())
      callstack = m["extraInfo"]["py_callstack"].get<std::string>();
  } else {
    return std::nullopt;
  }
  std::string out = first_line(text, 300);
  if (out.empty()) return std::nullopt;
  if (const std::string site = raise_site(callstack); !site.empty()) out += " (at " + site + ")";
  return out;
}

TorchErrorFiles::TorchErrorFiles(const PythonDir& dir) : dir_(dir.path()) {}

std::string TorchErrorFiles::path(int rank) const {
  return dir_.empty() ? "" : dir_ + "/rank." + std::to_string(rank) + ".error.json";
}

TaskEnv TorchErrorFiles::task_env(int rank, const RankEnvSoFar&) {
  TaskEnv t;
  if (std::string p = path(rank); !p.empty()) t.vars.emplace_back(env::kTorchelasticErrorFile, std::move(p));
  return t;
}

std::optional<std::string> TorchErrorFiles::read(int rank) const {
  if (dir_.empty()) return std::nullopt;
  // The rank wrote it, and may have made it anything: a FIFO (an open that
  // waits for a writer), a link to /dev/zero (a read without end), a file
  // of gigabytes. It is read as a file a user names is, and never through a
  // link.
  try {
    const auto f = read_user_file_if_present(path(rank), "rank " + std::to_string(rank) + "'s TORCHELASTIC_ERROR_FILE",
                                             "not read, the verdict goes without it", FinalLink::kRefuse);
    return f ? summarize_torch_error(f->text) : std::nullopt;
  } catch (const Error& e) {
    std::cerr << "dlaunch-agent: warning: " << e.what() << "\n";
    return std::nullopt;
  }
}

void TorchErrorFiles::remove() {
  // Only the error files: the directory holds the stack dumps too (PythonDir).
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("rank.", 0) == 0 && name.size() > 11 && name.compare(name.size() - 11, 11, ".error.json") == 0)
      std::filesystem::remove(it->path(), ec);
  }
}

}  // namespace dl::agent
