#include "hostfiles/allocation.h"

#include <cstdlib>
#include <map>
#include <sstream>

#include "errors/error.h"
#include "errors/user_file.h"
#include "hostfiles/hostlist.h"

namespace dl::hostfiles {

namespace {

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// A count: digits only, at least 1, not absurd.
int parse_count(std::string_view s, std::string_view what, std::string_view whole) {
  if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string_view::npos || std::stoi(std::string(s)) < 1)
    throw ParseError(std::string(what) + " " + quoted(whole) + ": expected a count such as 2 or 2(x3), got " + quoted(s));
  return std::stoi(std::string(s));
}

HostEntry entry(std::string host, int slots, std::string origin) {
  HostEntry e;
  e.host = std::move(host);
  e.slots = slots;
  e.slots_given = true;
  e.origin = std::move(origin);
  return e;
}

std::optional<Allocation> from_slurm(const EnvLookup& env) {
  std::string list_var = "SLURM_JOB_NODELIST";
  std::string list = env(list_var);
  if (list.empty()) list = env(list_var = "SLURM_NODELIST");
  if (list.empty()) return std::nullopt;
  Allocation a;
  a.scheduler = "Slurm";
  a.job_id = env("SLURM_JOB_ID");
  if (a.job_id.empty()) a.job_id = env("SLURM_JOBID");
  const auto names = expand_hostlist(list, list_var);
  // A job that asked for tasks (-n) gets as many slots as it has tasks on
  // each node; one that asked only for nodes gets their CPUs (as mpirun does).
  std::string count_var = "SLURM_JOB_CPUS_PER_NODE";
  if (!env("SLURM_NTASKS").empty() && !env("SLURM_TASKS_PER_NODE").empty()) count_var = "SLURM_TASKS_PER_NODE";
  else if (env(count_var).empty()) count_var = "SLURM_TASKS_PER_NODE";
  const std::string counts_text = env(count_var);
  std::vector<int> counts(names.size(), 1);
  if (!counts_text.empty()) counts = expand_slurm_counts(counts_text, count_var);
  if (counts.size() != names.size())
    throw ParseError(count_var + "=" + counts_text + " gives counts for " + std::to_string(counts.size()) +
                     " nodes but " + list_var + "=" + list + " names " + std::to_string(names.size()) +
                     "; is the environment of another job mixed into this one?");
  a.source = list_var + "=" + list + (counts_text.empty() ? "" : ", " + count_var + "=" + counts_text);
  for (size_t i = 0; i < names.size(); ++i) a.hosts.push_back(entry(names[i], counts[i], list_var));
  return a;
}

// A file of one host name per line, repeated once per slot (PBS_NODEFILE,
// LSB_DJOB_HOSTFILE): hosts in first-appearance order, slots counted.
std::vector<HostEntry> read_slot_file(const std::string& path, const std::string& var, const FileReader& read) {
  const std::string text = read(path);
  std::vector<HostEntry> hosts;
  std::map<std::string, size_t> seen;
  std::istringstream in(text);
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    const auto e = line.find_last_not_of(" \t\r");
    const std::string name = line.substr(b, e - b + 1);
    const std::string where = path + ":" + std::to_string(no);
    if (name.find_first_of(" \t[]") != std::string::npos)
      throw ParseError(where + ": expected one host name per line (" + var + "), got " + quoted(name));
    try {
      expand_host_pattern(name);
    } catch (const HostSyntaxError& err) {
      throw ParseError(where + ": " + err.what() + " (" + var + ")");
    }
    auto [it, fresh] = seen.emplace(name, hosts.size());
    if (fresh) hosts.push_back(entry(name, 1, where));
    else ++hosts[it->second].slots;
  }
  if (hosts.empty()) throw ParseError(path + ": no hosts in the file that " + var + " names");
  return hosts;
}

std::optional<Allocation> from_pbs(const EnvLookup& env, const FileReader& read) {
  const std::string file = env("PBS_NODEFILE");
  if (file.empty()) return std::nullopt;
  Allocation a{"PBS", env("PBS_JOBID"), "PBS_NODEFILE=" + file, read_slot_file(file, "PBS_NODEFILE", read)};
  return a;
}

std::optional<Allocation> from_lsf(const EnvLookup& env, const FileReader& read) {
  Allocation a;
  a.scheduler = "LSF";
  a.job_id = env("LSB_JOBID");
  if (const std::string file = env("LSB_DJOB_HOSTFILE"); !file.empty()) {
    a.source = "LSB_DJOB_HOSTFILE=" + file;
    a.hosts = read_slot_file(file, "LSB_DJOB_HOSTFILE", read);
    return a;
  }
  const std::string mcpu = env("LSB_MCPU_HOSTS");
  if (mcpu.empty()) return std::nullopt;
  a.source = "LSB_MCPU_HOSTS=" + mcpu;
  std::istringstream in(mcpu);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.size() % 2 != 0)
    throw ParseError("LSB_MCPU_HOSTS " + quoted(mcpu) + ": expected pairs 'host count', got " +
                     std::to_string(words.size()) + " words");
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < words.size(); i += 2) {
    const int n = parse_count(words[i + 1], "LSB_MCPU_HOSTS", mcpu);
    auto [it, fresh] = seen.emplace(words[i], a.hosts.size());
    if (fresh) a.hosts.push_back(entry(words[i], n, "LSB_MCPU_HOSTS"));
    else a.hosts[it->second].slots += n;
  }
  return a;
}

bool is_address(const std::string& h) {
  return h.find(':') != std::string::npos || h.find_first_not_of("0123456789.") == std::string::npos;
}
std::string short_name(const std::string& h) { return is_address(h) ? h : h.substr(0, h.find('.')); }

}  // namespace

std::vector<int> expand_slurm_counts(std::string_view text, std::string_view what) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(pos, end - pos);
    int repeat = 1;
    std::string_view count = item;
    if (const auto paren = item.find('('); paren != std::string_view::npos) {
      if (item.size() < paren + 4 || item.substr(paren, 2) != "(x" || item.back() != ')')
        throw ParseError(std::string(what) + " " + quoted(text) + ": expected a count such as 2 or 2(x3), got " +
                         quoted(item));
      count = item.substr(0, paren);
      repeat = parse_count(item.substr(paren + 2, item.size() - paren - 3), what, text);
    }
    const int n = parse_count(count, what, text);
    if (out.size() + static_cast<size_t>(repeat) > kMaxExpandedHosts)
      throw ParseError(std::string(what) + " " + quoted(text) + ": more than " + std::to_string(kMaxExpandedHosts) + " nodes");
    out.insert(out.end(), static_cast<size_t>(repeat), n);
    pos = end + 1;
  }
  return out;
}

std::optional<Allocation> detect_allocation(const EnvLookup& env, const FileReader& read) {
  if (auto a = from_slurm(env)) return a;
  if (auto a = from_pbs(env, read)) return a;
  return from_lsf(env, read);
}

std::optional<Allocation> detect_allocation() {
  auto env = [](const std::string& name) {
    const char* v = std::getenv(name.c_str());
    return std::string(v ? v : "");
  };
  auto read = [](const std::string& path) {
    return read_user_file(path, "the scheduler's host file", "check the job's allocation (or unset the variable "
                          "that names this file)").text;
  };
  return detect_allocation(env, read);
}

void check_within_allocation(const std::vector<HostEntry>& given, const std::string& origin, const Allocation& alloc) {
  for (const auto& g : given) {
    bool inside = false;
    for (const auto& h : alloc.hosts) inside = inside || h.host == g.host || short_name(h.host) == short_name(g.host);
    if (inside) continue;
    std::string names;
    for (const auto& h : alloc.hosts) names += (names.empty() ? "" : ", ") + h.host;
    throw UsageError(origin + " names " + quoted(g.host) + ", which is not a host of " + alloc.scheduler + " job " +
                     (alloc.job_id.empty() ? "(no id)" : alloc.job_id) + " (its hosts: " + names +
                     "); name only those hosts, or drop --hostfile/-H to use them all");
  }
}

}  // namespace dl::hostfiles
