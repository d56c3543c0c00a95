#include "launcher/options/option_sources.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "control/env_names.h"
#include "errors/error.h"
#include "errors/user_file.h"
#include "hostfiles/binding.h"
#include "launcher/options/options.h"
#include "wire/socket_owner.h"

namespace dl::launcher {

namespace {
// Options that cannot be defaults, and why (docs/dlaunch.md says the same).
// Every other option of the run table can be one: an option added to
// options.cc that describes one job rather than a habit belongs here.
const std::map<std::string, std::string>& refused() {
  static const std::map<std::string, std::string> m = {
      {"help", "it is an action, not a setting"},
      {"version", "it is an action, not a setting"},
      {"np", "a job's size belongs to the job (and -n does not mix with --rdzv): give -n on the command line"},
      {"x", "it is a list: put the variables in a file and set env-file = FILE"},
      {"dry-run", "it would keep every job from starting"},
      {"display-map", "it prints the rank map of every job: give it on the command line"},
      {"nnodes", "it places one job in a per-node launch (and DLAUNCH_NNODES is the ranks' variable)"},
      {"node-rank", "it places one job in a per-node launch (and DLAUNCH_NODE_RANK is the ranks' variable)"},
      {"rdzv", "it names one job's meeting point"},
      {"rdzv-endpoint", "it names one job's meeting point"},
      {"master-addr", "it names one job's meeting point"},
      {"master-port", "it names one job's meeting point"},
      {"rdzv-id", "it names one job"},
      {"standalone", "it describes one job"},
      {"module", "it says how to run one program"},
      {"app", "it names one job's programs"},
      {"no-python", "it says how to run one program"},
      {"machinefile", "it is an alias: write hostfile"},
      {"ppn", "it is an alias: write npernode"},
      {"no-gpu-bind", "it is an alias: write gpu-bind = none"},
  };
  return m;
}

// Each group sets one thing; see option_group().
const std::vector<std::vector<std::string>>& groups() {
  static const std::vector<std::vector<std::string>> g = {
      {"hostfile", "machinefile", "host", "rdzv", "rdzv-endpoint", "master-addr", "standalone"},
      {"npernode", "ppn", "nproc-per-node"},
      {"gpu-bind", "no-gpu-bind"},
      {"output-pty", "no-output-pty"},
      {"output-filename", "log-dir"},
  };
  return g;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// true/false and the usual spellings; nullopt-like: returns -1 for anything else.
int switch_value(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "true" || v == "yes" || v == "on" || v == "1") return 1;
  if (v == "false" || v == "no" || v == "off" || v == "0") return 0;
  return -1;
}

const OptionSpec* find_spec(const std::vector<OptionSpec>& table, const std::string& name) {
  for (const auto& s : table)
    if (s.name == name) return &s;
  return nullptr;
}

// One source's settings; `on` false for a switch set to false (it hides the
// lower sources' setting of its group, and sets nothing itself).
struct Raw {
  OptionSetting setting;
  bool on = true;
};

std::string expand_home(const std::string& v, const rdzv::Environment& env) {
  auto home = env.find("HOME");
  if (v.rfind("~/", 0) == 0 && home != env.end() && !home->second.empty()) return home->second + v.substr(1);
  return v;
}

// One `option = value` line of `path` (label "user config"), already trimmed.
Raw parse_line(const std::vector<OptionSpec>& table, const std::string& line, const std::string& where,
               const rdzv::Environment& env) {
  const size_t eq = line.find('=');
  if (eq == std::string::npos)
    throw ParseError(where + ": expected 'option = value' (an option of `dlaunch help run`, without dashes), got '" +
                     line.substr(0, 80) + "'");
  std::string name = trim(line.substr(0, eq));
  name.erase(0, std::min(name.find_first_not_of('-'), name.size()));
  std::replace(name.begin(), name.end(), '_', '-');
  const std::string value = trim(line.substr(eq + 1));
  const OptionSpec* spec = find_spec(table, name);
  if (!spec) {
    std::vector<std::string> names;
    for (const auto& s : table) names.push_back(s.name);
    const std::string hint = did_you_mean(name, names);
    throw ParseError(where + ": expected an option of `dlaunch help run` (long name, without dashes), got '" + name +
                     "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
  }
  if (auto why = not_a_default(name); !why.empty())
    throw ParseError(where + ": '" + name + "' cannot be a default: " + why);
  if (!spec->takes_value) {
    const int on = switch_value(value);
    if (on < 0) throw ParseError(where + ": expected true or false for the switch '" + name + "', got '" + value + "'");
    return {{name, "true", ""}, on == 1};
  }
  if (value.empty()) throw ParseError(where + ": expected a value after '" + name + " ='");
  return {{name, expand_home(value, env), ""}, true};
}

// Refuses the config file `f` (read from `path`) that another user could
// have written: it can name a program that dlaunch runs (launcher-exec), so
// it must belong to this user or root and be writable by neither group nor
// others, as ssh checks ~/.ssh/config. `f` was fstat'ed through the
// descriptor it was read from: a link or a rename cannot swap what is judged.
void check_config_owner(const UserFile& f, const std::string& path, const std::string& label,
                        const std::string& fix) {
  if (!S_ISREG(f.mode)) return;  // /dev/null: no settings
  const std::string why = ", and a config file can name a program that dlaunch runs (launcher-exec)";
  if (f.owner != ::geteuid() && f.owner != 0)
    throw UsageError(label + " " + path + ": belongs to " + wire::describe_uid(f.owner) + ", not to you (" +
                     wire::describe_uid(::geteuid()) + ") or root" + why + "; use a file of your own, or " + fix);
  if (f.mode & (S_IWGRP | S_IWOTH))
    throw UsageError(label + " " + path + ": mode " + octal_mode(f.mode) + " lets " +
                     (f.mode & S_IWOTH ? "every user" : "its group") + " change it" + why + "; run `chmod go-w " +
                     path + "`");
}

// A config file's settings; none when it does not exist (and was not named
// explicitly). Sets *read when it was read.
std::vector<Raw> read_config(const std::vector<OptionSpec>& table, const std::string& path, bool is_explicit,
                             const std::string& label, const rdzv::Environment& env, bool* read) {
  const std::string fix = is_explicit ? "fix or unset " + std::string(label == "user config" ? "DLAUNCH_CONFIG"
                                                                                              : "DLAUNCH_SYSTEM_CONFIG")
                                     : "fix or remove it";
  const auto file = is_explicit ? std::optional(read_user_file(path, label, fix))
                                : read_user_file_if_present(path, label, fix);
  if (!file) return {};
  check_config_owner(*file, path, label, fix);
  *read = true;
  std::istringstream f(file->text);
  std::vector<Raw> out;
  std::map<std::string, int> first_line;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    // A '#' at the start, or after a blank, starts a comment.
    for (size_t k = 0; k < line.size(); ++k)
      if (line[k] == '#' && (k == 0 || line[k - 1] == ' ' || line[k - 1] == '\t')) {
        line.resize(k);
        break;
      }
    line = trim(line);
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(n);
    Raw r = parse_line(table, line, where, env);
    if (auto [it, fresh] = first_line.emplace(r.setting.name, n); !fresh)
      throw ParseError(where + ": '" + r.setting.name + "' is set twice in this file (first on line " +
                       std::to_string(it->second) + "); keep one");
    r.setting.origin = label + " " + where;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Raw> read_env(const std::vector<OptionSpec>& table, const rdzv::Environment& env) {
  std::vector<Raw> out;
  for (const auto& spec : table) {
    const std::string var = env_name_for(spec.name);
    if (var.empty()) continue;
    auto it = env.find(var);
    if (it == env.end() || it->second.empty()) continue;  // empty: as if unset
    Raw r{{spec.name, it->second, "env " + var}, true};
    if (!spec.takes_value) {
      const int on = switch_value(it->second);
      if (on < 0)
        throw UsageError(var + "=" + it->second + ": expected true or false (1/0, yes/no, on/off) for --" + spec.name);
      r.on = on == 1;
      r.setting.value = "true";
    }
    out.push_back(std::move(r));
  }
  return out;
}
}  // namespace

ConfigPaths config_paths(const rdzv::Environment& env) {
  auto get = [&](const char* k) {
    auto it = env.find(k);
    return it == env.end() ? std::string() : it->second;
  };
  ConfigPaths p;
  p.system = get("DLAUNCH_SYSTEM_CONFIG");
  p.explicit_system = !p.system.empty();
  if (p.system.empty()) p.system = "/etc/dlaunch/config";
  p.user = get("DLAUNCH_CONFIG");
  p.explicit_user = !p.user.empty();
  if (p.user.empty()) {
    // XDG base directories: a relative XDG_CONFIG_HOME is invalid and ignored.
    const std::string xdg = get("XDG_CONFIG_HOME");
    if (!xdg.empty() && xdg[0] == '/') p.user = xdg + "/dlaunch/config";
    else if (!get("HOME").empty()) p.user = get("HOME") + "/.config/dlaunch/config";
  }
  return p;
}

const std::vector<std::string>& reserved_env_names() {
  static const std::vector<std::string> names = {
      env::kDlRank, env::kDlWorldSize, env::kDlLocalRank, env::kDlLocalWorldSize, env::kDlNodeRank, env::kDlNNodes,
      env::kDlJobId, env::kDlHostId, env::kDlToken, env::kDlStoreAddr, env::kDlStoreDoor, env::kDlSocketIfname, env::kDlStoreSpinUs,
      hostfiles::kDlaunchGpus, "DLAUNCH_SYSFS_ROOT", "DLAUNCH_CONFIG", "DLAUNCH_SYSTEM_CONFIG", "DLAUNCH_JOBS",
      env::kDlAgentStallMs, env::kDlLocalAgent};
  return names;
}

std::string not_a_default(const std::string& option) {
  auto it = refused().find(option);
  return it == refused().end() ? "" : it->second;
}

std::string env_name_for(const std::string& option) {
  if (!not_a_default(option).empty()) return "";
  std::string v = "DLAUNCH_";
  for (char c : option) v += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const auto& r = reserved_env_names();
  return std::find(r.begin(), r.end(), v) == r.end() ? v : "";
}

std::vector<std::string> option_group(const std::string& option) {
  for (const auto& g : groups())
    if (std::find(g.begin(), g.end(), option) != g.end()) return g;
  return {option};
}

OptionDefaults load_option_defaults(const std::vector<OptionSpec>& table, const rdzv::Environment& env) {
  OptionDefaults d;
  d.paths = config_paths(env);
  // Highest precedence first; a group any source sets is closed to the ones below it.
  std::vector<std::vector<Raw>> sources;
  sources.push_back(read_env(table, env));
  if (!d.paths.user.empty())
    sources.push_back(read_config(table, d.paths.user, d.paths.explicit_user, "user config", env, &d.user_read));
  sources.push_back(
      read_config(table, d.paths.system, d.paths.explicit_system, "system config", env, &d.system_read));
  std::set<std::string> closed;
  std::map<std::string, OptionSetting> won;
  for (const auto& source : sources) {
    std::set<std::string> touched;
    for (const auto& r : source) {
      const std::string group = option_group(r.setting.name)[0];
      if (closed.count(group)) continue;
      touched.insert(group);
      if (r.on) won[r.setting.name] = r.setting;
    }
    closed.insert(touched.begin(), touched.end());
  }
  for (const auto& spec : table)
    if (auto it = won.find(spec.name); it != won.end()) d.settings.push_back(it->second);
  return d;
}

std::string describe_defaults(const OptionDefaults& d) {
  std::ostringstream s;
  auto file = [&](const char* label, const std::string& path, bool read, bool is_explicit, const char* var) {
    s << "  " << label << path << (read ? " (read)" : " (none there)")
      << (is_explicit ? std::string(" from ") + var : std::string()) << "\n";
  };
  s << "\nOption defaults, highest first: the command line, DLAUNCH_<OPTION> variables, the user config,\n"
       "the system config, built in (docs/dlaunch.md, \"Option defaults\"):\n";
  file("system config: ", d.paths.system, d.system_read, d.paths.explicit_system, "DLAUNCH_SYSTEM_CONFIG");
  if (d.paths.user.empty()) s << "  user config:   none (neither XDG_CONFIG_HOME nor HOME is set)\n";
  else file("user config:   ", d.paths.user, d.user_read, d.paths.explicit_user, "DLAUNCH_CONFIG");
  for (const auto& st : d.settings) {
    std::string lhs = "  " + st.name + " = " + st.value;
    if (lhs.size() < 32) lhs.resize(32, ' ');
    s << lhs << " " << st.origin << "\n";
  }
  s << "  every " << (d.settings.empty() ? "" : "other ") << "option: built in (its (=value) above, or as its line says)\n";
  return s.str();
}

}  // namespace dl::launcher
