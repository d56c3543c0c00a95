#include "control/agent_args.h"

#include <algorithm>
#include <sstream>

#include <boost/program_options.hpp>

#include "errors/error.h"
#include "wire/socket.h"

namespace dl::control {

namespace po = boost::program_options;

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

po::options_description table() {
  po::options_description d("dlaunch-agent options");
  d.add_options()
      (kConnect, po::value<std::string>(), "HOST:PORT of the launcher's control server")
      (kControlFd, po::value<int>(), "instead of --connect: the inherited control socket of a local agent")
      (kNode, po::value<int>(), "the node index this agent runs")
      (kNodeNames, po::value<std::string>(), "H1,H2,..: instead of --node, the node is this host's place in the list")
      (kGpusPerNode, po::value<int>(), "hand out GPUs 0..N-1 instead of detecting them")
      (kNoGpuBind, po::bool_switch(), "do not detect GPUs; leave CUDA_VISIBLE_DEVICES alone")
      (kNoPmix, po::bool_switch(), "do not start a PMIx server ahead of the launch (--mpi none)")
      (kCpuTopology, po::bool_switch(), "report cores and NUMA nodes in the hello (--bind-to)")
      ("version", po::bool_switch(), "print the version and exit")
      ("help", po::bool_switch(), "print this help and exit");
  return d;
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
  return v;
}

ParsedAgentArgs parse_agent_args(const std::vector<std::string>& argv) {
  ParsedAgentArgs out;
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argv).options(table()).style(po::command_line_style::unix_style ^
                                                                    po::command_line_style::allow_guessing)
                  .run(),
              vm);
    out.version = vm["version"].as<bool>();
    out.help = vm["help"].as<bool>();
    if (out.version || out.help) return out;
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  AgentArgs& a = out.args;
  if (vm.count(kConnect) == vm.count(kControlFd))
    throw UsageError("give --connect HOST:PORT or --control-fd N (one of them)");
  if (vm.count(kConnect)) {
    auto [h, p] = wire::split_host_port(vm[kConnect].as<std::string>(), "--connect");
    a.connect_host = h, a.connect_port = p;
  } else {
    a.control_fd = vm[kControlFd].as<int>();
    if (a.control_fd < 3) throw UsageError("--control-fd must be 3 or more (0-2 are stdin, stdout, stderr)");
  }
  if (vm.count(kNode) == vm.count(kNodeNames)) throw UsageError("give --node K or --node-names H1,H2,.. (one of them)");
  if (vm.count(kNode)) a.node = vm[kNode].as<int>();
  if (a.node < 0) throw UsageError("--node must not be negative");
  if (vm.count(kNodeNames)) {
    const std::string list = vm[kNodeNames].as<std::string>();
    for (size_t p = 0; p <= list.size();) {
      const size_t e = std::min(list.find(',', p), list.size());
      if (e == p) throw UsageError("--node-names has an empty name: '" + list + "'");
      a.node_names.push_back(list.substr(p, e - p));
      p = e + 1;
    }
  }
  if (vm.count(kGpusPerNode)) a.gpus_per_node = vm[kGpusPerNode].as<int>();
  a.detect_gpus = !vm[kNoGpuBind].as<bool>();
  a.prepare_pmix = !vm[kNoPmix].as<bool>();
  a.cpu_topology = vm[kCpuTopology].as<bool>();
  return out;
}

std::string agent_usage() {
  std::ostringstream s;
  s << "usage: dlaunch-agent (--connect HOST:PORT | --control-fd N) (--node K | --node-names H1,H2,..) [options]\n"
       "(dlaunch starts this program, you do not; the job token is read from stdin)\n"
    << table();
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
