#include "remote/start_method.h"

#include <cstdlib>
#include <sstream>
#include <string_view>

#include "errors/error.h"
#include "remote/sim_starter.h"
#include "remote/slurm_starter.h"

namespace dl::remote {

namespace {

using Factory = std::unique_ptr<AgentStarter> (*)(boost::asio::io_context&, StarterOptions, AgentStarter::Events);

struct Method {
  StartMethod method;
  const char* name;
  Factory make;          // nullptr: a known name this build has not got
  bool runs_program;     // --launcher-exec replaces its program
  bool forks_local;      // the local node's agent is dlaunch's child (make_local_starter), not srun's
  bool test_only;        // the test bed's (refused without DLAUNCH_SIM=1, left out of the lists users see)
  bool tree;             // agents can start agents with it (--fanout); srun starts every agent itself
  bool passes_env;       // remote agents start with dlaunch's environment (srun's --export=ALL; sim's fork)
};

// The start methods; a known name with a null factory would be one this build
// has not got.
const Method kMethods[] = {
    {StartMethod::kLibssh, "libssh", make_process_starter, false, true, false, true, false},
    {StartMethod::kSsh, "ssh", make_openssh_starter, true, true, false, true, false},
    {StartMethod::kSlurm, "slurm", make_slurm_starter, true, false, false, false, true},
    {StartMethod::kSim, "sim", make_sim_starter, false, true, true, true, true},
};

const Method* find(std::string_view name) {
  for (const auto& m : kMethods)
    if (name == m.name) return &m;
  return nullptr;
}

const Method& row(StartMethod method) {
  for (const auto& m : kMethods)
    if (m.method == method) return m;
  return kMethods[0];  // unreachable: every enumerator has its row
}

const char* getenv_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string known_list() {
  std::string s;
  for (const auto& n : start_method_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}
}  // namespace

const char* word(StartMethod m) { return row(m).name; }

std::optional<StartMethod> start_method_named(std::string_view word) {
  const Method* m = find(word);
  return m ? std::optional<StartMethod>(m->method) : std::nullopt;
}

std::vector<std::string> start_method_names() {
  std::vector<std::string> out;
  for (const auto& m : kMethods)
    if (!m.test_only) out.push_back(m.name);
  out.push_back("auto");
  return out;
}

StartMethod resolve_start_method(const std::string& asked, const std::string& slurm_job_id,
                                 const std::vector<std::string>& launcher_exec) {
  const std::string method = asked == "auto" ? (slurm_job_id.empty() ? "libssh" : "slurm") : asked;
  const Method* m = find(method);
  if (!m) {
    // What people call these methods elsewhere (Hydra's, PRRTE's names).
    static const std::pair<const char*, const char*> kAliases[] = {
        {"srun", "slurm"}, {"openssh", "ssh"}, {"rsh", "ssh"}, {"ssh2", "libssh"}};
    std::string hint;
    for (const auto& [alias, name] : kAliases)
      if (asked == alias) hint = std::string(" (did you mean ") + name + "?)";
    throw UsageError("--launcher takes " + known_list() + ", got '" + asked + "'" + hint);
  }
  if (!m->make)
    throw UsageError("--launcher " + method + " is not built into this dlaunch; use --launcher libssh" +
                     std::string(slurm_job_id.empty() ? "" : " or slurm"));
  if (m->test_only && std::string_view(getenv_or_empty(kSimEnv)) != "1")
    throw UsageError("--launcher " + method + " simulates hosts on this machine for dlaunch's own tests and benches, "
                     "not for jobs: it runs only with " + kSimEnv + "=1 in the environment");
  if (m->method == StartMethod::kSlurm && slurm_job_id.empty())
    throw UsageError("--launcher slurm starts agents with srun inside a Slurm job, but SLURM_JOB_ID is unset: run "
                     "dlaunch inside salloc or sbatch, or use --launcher libssh");
  if (!launcher_exec.empty() && !m->runs_program)
    throw UsageError("--launcher-exec names the program that starts agents (srun, ssh); --launcher " + method +
                     " runs none: drop --launcher-exec or pick --launcher slurm");
  return m->method;
}

std::unique_ptr<AgentStarter> make_agent_starter(StartMethod method, boost::asio::io_context& io,
                                                 StarterOptions o, AgentStarter::Events ev) {
  const Method& m = row(method);
  if (!m.make) throw UsageError(std::string("no agent starter '") + m.name + "' in this dlaunch (" + known_list() + ")");
  return m.make(io, std::move(o), std::move(ev));
}

bool forks_local_agent(StartMethod method) { return row(method).forks_local; }
bool starts_tree(StartMethod method) { return row(method).tree; }
bool passes_environment(StartMethod method) { return row(method).passes_env; }
bool simulates_hosts(StartMethod method) { return row(method).test_only; }

std::vector<std::string> split_launcher_exec(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

}  // namespace dl::remote
