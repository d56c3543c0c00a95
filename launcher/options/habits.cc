#include "launcher/options/habits.h"

#include <algorithm>
#include <cctype>

#include "errors/error.h"
#include "launcher/options/options.h"

namespace dl::launcher {

namespace {
// raw[i] (typed `typed`) with its value: attached (--opt=V) or the next word.
std::string value_after(const std::vector<std::string>& raw, size_t& i, const std::string& typed) {
  const size_t eq = raw[i].find('=');
  if (eq != std::string::npos) return raw[i].substr(eq + 1);
  if (i + 1 >= raw.size()) throw UsageError(typed + " needs a value");
  return raw[++i];
}

// mpirun's --mca NAME VALUE, hydra's -genv NAME VALUE at raw[i]: the ranks'
// PREFIX NAME=VALUE, as -x.
void name_value_export(const std::vector<std::string>& raw, size_t& i, std::vector<std::string>& mine,
                       const std::string& prefix, const char* example) {
  const std::string typed = raw[i].substr(0, raw[i].find('='));
  if (i + 2 >= raw.size()) throw UsageError(typed + " takes NAME VALUE (e.g. " + typed + " " + example + ")");
  const std::string var = prefix + raw[i + 1];
  if (!is_env_name(var))
    throw UsageError(typed + " " + raw[i + 1] + ": " + (prefix.empty() ? "a variable" : "an MCA parameter") +
                     " name is letters, digits and _");
  mine.push_back("-x");
  mine.push_back(var + "=" + raw[i + 2]);
  i += 2;
}

void mca(const std::vector<std::string>& raw, size_t& i, std::vector<std::string>& mine) {
  name_value_export(raw, i, mine, "OMPI_MCA_", "btl tcp,self");
}

void genv(const std::vector<std::string>& raw, size_t& i, std::vector<std::string>& mine) {
  name_value_export(raw, i, mine, "", "NCCL_DEBUG INFO");
}

void dropped(const std::vector<std::string>&, size_t&, std::vector<std::string>&) {}

// srun's --cpu-bind values, as the --bind-to words they mean.
const std::vector<std::pair<std::string, std::string>> kSrunCpuBind = {
    {"cores", "core"}, {"threads", "hwthread"}, {"sockets", "socket"}, {"ldoms", "numa"}, {"none", "none"}};

void srun_cpu_bind(const std::vector<std::string>& raw, size_t& i, std::vector<std::string>& mine) {
  const std::string typed = raw[i].substr(0, raw[i].find('='));
  const std::string v = value_after(raw, i, typed);
  const auto it = std::find_if(kSrunCpuBind.begin(), kSrunCpuBind.end(), [&](const auto& c) { return c.first == v; });
  if (it == kSrunCpuBind.end())
    throw UsageError(typed + " " + v + ": dlaunch binds with srun's cores, threads, sockets, ldoms or none "
                     "(--bind-to core, hwthread, socket, numa, none), by local rank");
  mine.push_back("--bind-to=" + it->second);
}

// torchrun's --nnodes N, or N:N; an elastic MIN:MAX is --min-hosts MIN
// --max-hosts MAX (a launch from one dlaunch; per-node mode refuses it).
void fixed_nnodes(const std::vector<std::string>& raw, size_t& i, std::vector<std::string>& mine) {
  const std::string typed = raw[i].substr(0, raw[i].find('='));
  const std::string v = value_after(raw, i, typed);
  const size_t colon = v.find(':');
  if (colon != std::string::npos && v.substr(0, colon) != v.substr(colon + 1)) {
    mine.push_back("--min-hosts=" + v.substr(0, colon));
    mine.push_back("--max-hosts=" + v.substr(colon + 1));
    return;
  }
  mine.push_back("--nnodes=" + v.substr(0, colon));
}

using Translate = void (*)(const std::vector<std::string>& raw, size_t& i, std::vector<std::string>& mine);

// One spelling of another launcher's. A name of two letters or more is
// matched as --NAME and -NAME (mpirun's single dash), one of one letter as
// -NAME only.
struct Habit {
  const char* name;     // without dashes, '-' between words: "allow-run-as-root"
  const char* becomes;  // dlaunch's words for it ("--np", "--map-by=node"); "" when `translate` writes them
  bool takes_value;     // it takes a value (the next word, or =VALUE)
  Translate translate;  // nullptr: `becomes`, with the value as typed
  bool dlaunch_option;  // the name is dlaunch's own option too (not offered again by completion)
};

// Every habit dlaunch reads; docs/dlaunch.md, "Coming from mpirun / srun /
// torchrun", has a row for each.
const Habit kHabits[] = {
    // mpirun (OpenMPI)
    {"allow-run-as-root", "", false, dropped, false},  // dlaunch runs as root without it
    {"mca", "", true, mca, false},
    {"gmca", "", true, mca, false},
    {"rf", "--rankfile", true, nullptr, false},
    {"wd", "--wdir", true, nullptr, false},
    {"bynode", "--map-by=node", false, nullptr, false},
    {"byslot", "--map-by=slot", false, nullptr, false},
    {"pernode", "--npernode=1", false, nullptr, false},
    // mpiexec.hydra (MPICH, Intel MPI)
    {"genv", "", true, genv, false},
    {"genvall", "--export-all", false, nullptr, false},
    {"prepend-rank", "--tag-output", false, nullptr, false},
    {"hosts", "--host", true, nullptr, false},
    // srun
    {"ntasks", "--np", true, nullptr, false},
    {"label", "--tag-output", false, nullptr, false},
    {"l", "--tag-output", false, nullptr, false},
    {"cpu-bind", "", true, srun_cpu_bind, false},
    // torchrun
    {"nnodes", "", true, fixed_nnodes, true},
};

const Habit* find_habit(const std::string& name) {
  for (const auto& h : kHabits)
    if (name == h.name) return &h;
  return nullptr;
}

// The option name of the word `typed` (its part before '='), or "" for a
// word that is no long option: a short one (-n4, -vx) or no option at all.
std::string long_name(const std::string& typed, const IsLongOption& is_long) {
  if (typed.size() < 2 || typed[0] != '-' || typed == "--") return "";
  if (typed[1] == '-') {
    std::string name = typed.substr(2);
    std::replace(name.begin(), name.end(), '_', '-');  // torchrun's --nproc_per_node: no dlaunch option has a '_'
    return name;
  }
  const std::string name = typed.substr(1);
  if (name.size() == 1) return find_habit(name) ? name : "";
  if (find_habit(name) || (is_long && is_long(name))) return name;
  return "";
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep) out.emplace_back();
    else out.back().push_back(c);
  }
  return out;
}

// How mpirun's --map-by objects place ranks here: the placement they are,
// or "" for a refusal (`why`).
struct MapObject {
  const char* object;
  const char* placement;
  const char* why;
};
const char* const kRoundRobin =
    ": mpirun deals each host's ranks round-robin over its %s, which dlaunch does not; write --map-by ppr:N:socket "
    "(N ranks on each socket, pinned to it) or --map-by slot --bind-to socket (a host's ranks in blocks over its "
    "sockets), or --bind-to numa";
const MapObject kMapObjects[] = {
    {"slot", "slot", ""},        {"core", "slot", ""},          {"hwthread", "slot", ""},
    {"node", "node", ""},        {"socket", "", "sockets"},    {"package", "", "sockets"},
    {"numa", "", "NUMA nodes"},  {"l1cache", "", "L1 caches"}, {"l2cache", "", "L2 caches"},
    {"l3cache", "", "L3 caches"}, {"board", "", "boards"},
};

std::string map_by_takes() {
  return "dlaunch's --map-by takes slot, core or hwthread (each host's slots in turn), node (round-robin over the "
         "hosts), ppr:N:node or ppr:N:socket, with the modifiers :PE=N and :OVERSUBSCRIBE";
}

// One :MODIFIER of --map-by SPEC (as typed) into `m`.
void map_by_modifier(const std::string& spec, const std::string& modifier, MapByMeaning& m) {
  const std::string mod = lower(modifier);
  if (mod == "oversubscribe") { m.oversubscribe = true; return; }
  if (mod == "nooversubscribe") return;  // dlaunch's default
  if (mod.rfind("pe=", 0) == 0) {
    const std::string n = mod.substr(3);
    if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) < 1)
      throw UsageError("--map-by " + spec + ": :PE= takes a number of cores per rank, 1 or more, got '" +
                       modifier.substr(3) + "'");
    m.cpus_per_rank = std::stoi(n);
    return;
  }
  throw UsageError("--map-by " + spec + ": dlaunch has no :" + modifier + " (" + map_by_takes() + ")");
}
}  // namespace

std::string dlaunch_spelling(const std::string& a, const IsLongOption& is_long) {
  const size_t eq = a.find('=');
  const std::string typed = a.substr(0, eq), rest = eq == std::string::npos ? "" : a.substr(eq);
  const std::string name = long_name(typed, is_long);
  if (name.empty()) return a;
  const Habit* h = find_habit(name);
  if (h && *h->becomes) return h->becomes + rest;
  return "--" + name + rest;
}

bool is_habit(const std::string& name) { return find_habit(name) != nullptr; }

bool translate_habit(const std::string& spelled, const std::vector<std::string>& raw, size_t& i,
                     std::vector<std::string>& mine) {
  if (spelled.rfind("--", 0) != 0) return false;
  const Habit* h = find_habit(spelled.substr(2, spelled.find('=') - 2));
  if (!h || !h->translate) return false;
  h->translate(raw, i, mine);
  return true;
}

MapByMeaning read_map_by(const std::string& spec) {
  const std::vector<std::string> parts = split(spec, ':');
  MapByMeaning m;
  size_t modifiers = 1;
  const std::string object = lower(parts[0]);
  if (object == "ppr") {
    if (parts.size() < 3) return {spec};  // ppr:N: options.cc names what ppr takes
    m.map_by = "ppr:" + parts[1] + ":" + lower(parts[2]);
    modifiers = 3;
  } else {
    const auto* o = std::find_if(std::begin(kMapObjects), std::end(kMapObjects),
                                 [&](const MapObject& x) { return object == x.object; });
    if (o == std::end(kMapObjects))
      throw UsageError("--map-by " + spec + ": " + map_by_takes());
    if (!*o->placement) {
      std::string why = kRoundRobin;
      why.replace(why.find("%s"), 2, o->why);
      throw UsageError("--map-by " + spec + why);
    }
    m.map_by = o->placement;
  }
  for (size_t k = modifiers; k < parts.size(); ++k) map_by_modifier(spec, parts[k], m);
  if (m.cpus_per_rank > 0 && m.map_by.rfind("ppr:", 0) == 0 && m.map_by.find(":node") == std::string::npos)
    throw UsageError("--map-by " + spec + ": :PE=N with ppr:N:socket is not dlaunch's (it pins a rank to a socket or "
                     "to cores by local rank, not to N cores within its socket); write --map-by ppr:N:node:PE=N, or "
                     "--map-by ppr:N:socket alone");
  return m;
}

void check_rank_by(const std::string& rank_by, const std::string& map_by) {
  if (rank_by.empty()) return;
  const std::string word = lower(rank_by);
  const bool by_node = map_by == "node";
  const bool in_order = by_node ? word == "node" : word == "slot" || word == "core" || word == "hwthread";
  if (in_order) return;
  throw UsageError("--rank-by " + rank_by + ": dlaunch numbers ranks in the order --map-by places them (" +
                   (by_node ? "round-robin over the hosts: --rank-by node" : "each host's slots in turn: --rank-by slot") +
                   "); drop --rank-by" +
                   (by_node ? ", or write --map-by slot for ranks numbered along each host's slots"
                            : word == "node" ? ", and write --map-by node for ranks round-robin over the hosts" : ""));
}

const std::vector<OptionSpec>& habit_options() {
  static const std::vector<OptionSpec> table = [] {
    std::vector<OptionSpec> out;
    for (const auto& h : kHabits) {
      if (h.dlaunch_option) continue;
      const std::string name = h.name;
      out.push_back({name, name.size() == 1 ? "-" + name : "", h.takes_value});
    }
    return out;
  }();
  return table;
}

const std::vector<std::pair<std::string, std::string>>& srun_cpu_bind_values() { return kSrunCpuBind; }

}  // namespace dl::launcher
