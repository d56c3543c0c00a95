#include "launcher/dry_run_program.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "agent/python_dir.h"
#include "agent/rank_process.h"
#include "launcher/options/app_context.h"
#include "remote/agent_starter.h"
#include "wire/host.h"

namespace dl::launcher {

namespace {
// The -x PATH=... the ranks of a context get, or "" (the agent's own PATH).
std::string set_path(const RunOptions& o, const std::vector<std::string>& app_exports) {
  std::string path;
  for (const auto* list : {&o.exports, &app_exports})
    for (const auto& e : *list)
      if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  return path;
}

// The PATH the ranks get: the last -x PATH=... of the job (or of the rank's
// context), else dlaunch's own.
std::string ranks_path(const RunOptions& o, const std::vector<std::string>& app_exports) {
  std::string path = set_path(o, app_exports);
  if (const char* own = std::getenv("PATH"); path.empty() && own) path = own;
  return path.empty() ? "/usr/bin:/bin" : path;
}

// The working directory the agent starts the rank in: its context's
// --wdir, the job's, else dlaunch's own.
std::string ranks_wdir(const RunOptions& o, const std::string& app_wdir) {
  if (!app_wdir.empty()) return app_wdir;
  if (!o.wdir.empty()) return o.wdir;
  char cwd[4096];
  return ::getcwd(cwd, sizeof cwd) ? cwd : "";
}

std::string rank_range(int first, int last) {
  return first == last ? "rank " + std::to_string(first) : "ranks " + std::to_string(first) + "-" + std::to_string(last);
}
}  // namespace

std::vector<control::msg::ProgramProbe> program_probes(const RunOptions& o, const std::vector<int>& ranks) {
  static const AppContext none;
  std::vector<size_t> apps;
  if (o.apps.empty()) apps.push_back(0);
  else if (ranks.empty())
    for (size_t a = 0; a < o.apps.size(); ++a) apps.push_back(a);
  else
    for (int r : ranks) apps.push_back(static_cast<size_t>(app_of_rank(o.apps, r)));
  std::vector<control::msg::ProgramProbe> out;
  for (size_t a : apps) {
    const AppContext& c = o.apps.empty() ? none : o.apps.at(a);
    const auto& command = o.apps.empty() ? o.command : c.command;
    if (command.empty()) continue;
    control::msg::ProgramProbe p{command[0], set_path(o, c.exports), ranks_wdir(o, c.wdir)};
    if (std::none_of(out.begin(), out.end(), [&](const auto& q) {
          return q.argv0 == p.argv0 && q.path == p.path && q.wdir == p.wdir;
        }))
      out.push_back(std::move(p));
  }
  return out;
}

ProgramCheck check_programs(const hostfiles::Placement& p, const RunOptions& o) {
  ProgramCheck out;
  static const AppContext none;
  int first = -1, last = -1, shown_app = -1;
  std::string line;
  auto flush = [&] {
    if (first >= 0) out.resolved += rank_range(first, last) + " run " + line + "\n";
    first = -1;
  };
  for (const auto& r : p.ranks) {
    if (!wire::is_local_host(p.nodes.at(static_cast<size_t>(r.node)).host)) continue;
    const int app = o.apps.empty() ? 0 : app_of_rank(o.apps, r.rank);
    const AppContext& c = o.apps.empty() ? none : o.apps.at(static_cast<size_t>(app));
    const auto& command = o.apps.empty() ? o.command : c.command;
    if (command.empty()) continue;
    const agent::Resolved res = agent::resolve_program(command[0], ranks_path(o, c.exports), ranks_wdir(o, c.wdir));
    if (res.code != 0) {
      out.code = res.code;
      out.message = "cannot start rank " + std::to_string(r.rank) + " on " + p.nodes.at(static_cast<size_t>(r.node)).host +
                    ": " + res.message + missing_python_hint(o, res.message);
      return out;
    }
    if (app != shown_app || r.rank != last + 1) {
      flush();
      shown_app = app;
      first = r.rank;
      line = res.path;
      for (size_t i = 1; i < command.size(); ++i) line += " " + command[i];
    }
    last = r.rank;
  }
  flush();
  return out;
}

namespace {
// Where `python` is on the ranks' PATH here: "/usr/bin/python3 on this
// machine (the ranks' PATH; $PYTHON names another)", and a pyenv shim named.
// `typed`: the user named it as the program, so $PYTHON is not what chose it.
std::string interpreter_found(const RunOptions& o, const std::string& python, bool typed = false) {
  const agent::Resolved res = agent::resolve_program(python, ranks_path(o, {}), ranks_wdir(o, ""));
  if (res.code != 0) return res.message + " on this machine";
  std::string note = res.path + " on this machine (the ranks' PATH" + (typed ? ")" : "; $PYTHON names another)");
  if (res.path.find("/shims/") != std::string::npos)
    note += "; a pyenv shim: the version it runs depends on the rank's directory and PYENV_VERSION, so a "
            "module installed for another version is not found";
  return note;
}

// The rank's program when the user named a Python interpreter as it
// (`dlaunch -n 4 python spmd.py`), else "".
std::string typed_python(const RunOptions& o) {
  if (!o.interpreter.empty() || !o.apps.empty() || o.command.empty()) return "";
  return agent::PythonDir::is_python(o.command[0]) ? o.command[0] : "";
}
}  // namespace

std::string interpreter_note(const RunOptions& o, const std::string& python, const std::vector<std::string>& typed) {
  const std::string what = typed.empty() ? "the program" : typed[0];
  return "dlaunch: " + what + " runs under " + python + ": " + interpreter_found(o, python) + "\n";
}

std::string interpreter_hint(const RunOptions& o, const std::string& error) {
  if (error.rfind("ModuleNotFoundError", 0) != 0) return "";
  if (!o.interpreter.empty())
    return "; the rank ran under " + o.interpreter + ": " + interpreter_found(o, o.interpreter) +
           "; install the module for that interpreter, or name the one that has it with $PYTHON";
  const std::string typed = typed_python(o);
  if (typed.empty()) return "";
  return "; the rank ran under " + typed + ": " + interpreter_found(o, typed, true) +
         "; install the module for that interpreter, or run the one that has it by its full path";
}

std::string missing_python_hint(const RunOptions& o, const std::string& message) {
  static const std::string kNotFound = ": command not found in PATH";
  const size_t end = message.size() > kNotFound.size() ? message.size() - kNotFound.size() : 0;
  if (end == 0 || message.compare(end, std::string::npos, kNotFound) != 0) return "";
  const std::string name = message.substr(0, end);
  if (name == "python3" || !agent::PythonDir::is_python(name)) return "";
  const agent::Resolved res = agent::resolve_program("python3", ranks_path(o, {}), ranks_wdir(o, ""));
  if (res.code != 0) return "";
  return "; python3 is " + res.path + " on this machine: run python3 instead of " + name;
}

}  // namespace dl::launcher
