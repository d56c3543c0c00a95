#include "control/agent_args.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "errors/error.h"
#include "wire/socket.h"

namespace dl::control {

namespace {
// The one table: option names, and how each maps to AgentArgs.
constexpr const char* kConnect = "connect";
constexpr const char* kControlFd = "control-fd";
constexpr const char* kNode = "node";
constexpr const char* kNodeNames = "node-names";
constexpr const char* kGpusPerNode = "gpus-per-node";
constexpr const char* kNoGpuBind = "no-gpu-bind";
constexpr const char* kNoPmix = "no-pmix";
constexpr const char* kCpuTopology = "cpu-topology";
constexpr const char* kSimHost = "sim-host";
constexpr const char* kParent = "parent";

// Each option: its name, whether it takes a value, and its help line.
struct Option {
  const char* name;
  bool value;
  const char* help;
};
constexpr Option kOptions[] = {
    {kConnect, true, "HOST:PORT of the launcher's control server"},
    {kControlFd, true, "instead of --connect: the inherited control socket of a local agent"},
    {kNode, true, "the node index this agent runs"},
    {kNodeNames, true, "H1,H2,..: instead of --node, the node is this host's place in the list"},
    {kGpusPerNode, true, "hand out GPUs 0..N-1 instead of detecting them"},
    {kNoGpuBind, false, "do not detect GPUs; leave CUDA_VISIBLE_DEVICES alone"},
    {kNoPmix, false, "do not start a PMIx server ahead of the launch (--mpi none)"},
    {kCpuTopology, false, "report cores and NUMA nodes in the hello (--bind-to)"},
    {kSimHost, true, "NAME: stand for the simulated host NAME (--launcher sim, tests only)"},
    {kParent, true, "HOST: the launch tree's agent that started this one, and which --connect reaches"},
    {"version", false, "print the version and exit"},
    {"help", false, "print this help and exit"},
};

const Option* find_option(std::string_view name) {
  for (const auto& o : kOptions)
    if (name == o.name) return &o;
  return nullptr;
}

int to_int(const std::string& name, const std::string& value) {
  int v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty())
    throw UsageError("the argument ('" + value + "') for option '--" + name + "' is invalid: expected an integer");
  return v;
}

std::string flag(const char* name) { return std::string("--") + name; }
std::string host_port(const std::string& h, uint16_t p) {
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(p);
}
}  // namespace

std::vector<std::string> to_argv(const AgentArgs& a) {
  std::vector<std::string> v = a.control_fd >= 0
                                   ? std::vector<std::string>{flag(kControlFd), std::to_string(a.control_fd)}
                                   : std::vector<std::string>{flag(kConnect), host_port(a.connect_host, a.connect_port)};
  if (a.node_names.empty()) v.insert(v.end(), {flag(kNode), std::to_string(a.node)});
  else {
    std::string names;
    for (const auto& n : a.node_names) names += (names.empty() ? "" : ",") + n;
    v.insert(v.end(), {flag(kNodeNames), names});
  }
  if (a.gpus_per_node >= 0) v.insert(v.end(), {flag(kGpusPerNode), std::to_string(a.gpus_per_node)});
  if (!a.detect_gpus) v.push_back(flag(kNoGpuBind));
  if (!a.prepare_pmix) v.push_back(flag(kNoPmix));
  if (a.cpu_topology) v.push_back(flag(kCpuTopology));
  if (!a.sim_host.empty()) v.insert(v.end(), {flag(kSimHost), a.sim_host});
  if (!a.parent.empty()) v.insert(v.end(), {flag(kParent), a.parent});
  return v;
}

// By hand, not Boost.Program_options: the agent parses one machine-made
// command line per start, and building the options description and the
// store took ~100 us of each local start (docs/benchmarks.md,
// "Measurements behind the design").
ParsedAgentArgs parse_agent_args(const std::vector<std::string>& argv) {
  ParsedAgentArgs out;
  std::map<std::string, std::string> values;  // options with a value
  std::set<std::string> switches;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& word = argv[i];
    if (word.size() < 3 || word.compare(0, 2, "--") != 0)
      throw UsageError("unexpected argument '" + word + "': dlaunch-agent takes only --options");
    std::string name = word.substr(2), value;
    const auto eq = name.find('=');
    if (eq != std::string::npos) value = name.substr(eq + 1), name.resize(eq);
    const Option* o = find_option(name);
    if (o == nullptr) throw UsageError("unrecognised option '--" + name + "'");
    if (!o->value) {
      if (eq != std::string::npos) throw UsageError("option '--" + name + "' does not take a value");
      switches.insert(name);
      continue;
    }
    if (eq == std::string::npos) {
      if (i + 1 == argv.size()) throw UsageError("the required argument for option '--" + name + "' is missing");
      value = argv[++i];
    }
    if (!values.emplace(name, value).second)
      throw UsageError("option '--" + name + "' cannot be given more than once");
  }
  out.version = switches.count("version") > 0;
  out.help = switches.count("help") > 0;
  if (out.version || out.help) return out;
  auto has = [&](const char* name) { return values.count(name) > 0; };
  AgentArgs& a = out.args;
  if (has(kConnect) == has(kControlFd))
    throw UsageError("give --connect HOST:PORT or --control-fd N (one of them)");
  if (has(kConnect)) {
    auto [h, p] = wire::split_host_port(values[kConnect], "--connect");
    a.connect_host = h, a.connect_port = p;
  } else {
    a.control_fd = to_int(kControlFd, values[kControlFd]);
    if (a.control_fd < 3) throw UsageError("--control-fd must be 3 or more (0-2 are stdin, stdout, stderr)");
  }
  if (has(kNode) == has(kNodeNames)) throw UsageError("give --node K or --node-names H1,H2,.. (one of them)");
  if (has(kNode)) a.node = to_int(kNode, values[kNode]);
  if (a.node < 0) throw UsageError("--node must not be negative");
  if (has(kNodeNames)) {
    const std::string list = values[kNodeNames];
    for (size_t p = 0; p <= list.size();) {
      const size_t e = std::min(list.find(',', p), list.size());
      if (e == p) throw UsageError("--node-names has an empty name: '" + list + "'");
      a.node_names.push_back(list.substr(p, e - p));
      p = e + 1;
    }
  }
  if (has(kGpusPerNode)) a.gpus_per_node = to_int(kGpusPerNode, values[kGpusPerNode]);
  a.detect_gpus = switches.count(kNoGpuBind) == 0;
  a.prepare_pmix = switches.count(kNoPmix) == 0;
  a.cpu_topology = switches.count(kCpuTopology) > 0;
  if (has(kSimHost)) a.sim_host = values[kSimHost];
  if (has(kSimHost) && a.sim_host.empty()) throw UsageError("--sim-host needs a host name");
  if (has(kParent)) a.parent = values[kParent];
  if (has(kParent) && a.parent.empty()) throw UsageError("--parent needs a host name");
  return out;
}

std::string agent_usage() {
  std::ostringstream s;
  s << "usage: dlaunch-agent (--connect HOST:PORT | --control-fd N) (--node K | --node-names H1,H2,..) [options]\n"
       "(dlaunch starts this program, you do not; the job token is read from stdin)\n"
       "dlaunch-agent options:\n";
  for (const auto& o : kOptions) {
    std::string left = std::string("  --") + o.name + (o.value ? " arg" : "");
    left.resize(std::max<size_t>(left.size() + 1, 24), ' ');
    s << left << o.help << "\n";
  }
  return s.str();
}

int find_own_node(const std::vector<std::string>& names, const std::vector<std::string>& self) {
  auto short_name = [](const std::string& h) { return h.substr(0, h.find('.')); };
  for (const auto& me : self) {
    if (me.empty()) continue;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == me) return static_cast<int>(i);
    for (size_t i = 0; i < names.size(); ++i)
      if (short_name(names[i]) == short_name(me)) return static_cast<int>(i);
  }
  std::string mine, all;
  for (const auto& me : self) if (!me.empty()) mine += (mine.empty() ? "" : " or ") + me;
  for (const auto& n : names) all += (all.empty() ? "" : ",") + n;
  throw UsageError("this host (" + mine + ") is none of the job's nodes (" + all +
                   "): the launcher's host names must be the scheduler's node names");
}

}  // namespace dl::control
