// What a rank of this server is given: libpmix's variables as predicted
// before libpmix runs (predicted_rank_env, checked against the real ones by
// env_mismatches), the server's URIs pointed at the front door, and
// OpenMPI's own settings (ompi_env). docs/mpi.md, "Cost for non-MPI
// programs".
#include <sched.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "errors/error.h"
#include "mpi/pmix/server_module.h"

namespace dl::mpi::pmix {
namespace {
// libpmix's MCA variable for its data store ("gds"), read at PMIx_server_init.
constexpr const char* kGdsVar = "PMIX_MCA_gds";
}  // namespace

std::string shm_dir(const JobMap& map) {
  if (!map.shm_dir.empty()) return map.shm_dir;
  // Named for the job's temp dir (dlaunch-<pid>-<random>), never for the
  // job's namespace: every user can list /dev/shm.
  const std::string base = std::filesystem::path(map.tmpdir).filename().string();
  const size_t dash = base.rfind('-');
  return "/dev/shm/dlaunch-" + std::to_string(::getpid()) + "-" + (dash == std::string::npos ? base : base.substr(dash + 1));
}

std::vector<std::pair<std::string, std::string>> ompi_env(const JobMap& map) {
  std::vector<std::pair<std::string, std::string>> env = {
      {"OMPI_MCA_schizo", "^orte"}, {"OMPI_MCA_orte_tmpdir_base", map.tmpdir}};
  // register_job makes it when /dev/shm exists; a rank's environment is
  // written before that (predicted_rank_env), so the same test decides here.
  if (std::filesystem::is_directory("/dev/shm"))
    env.emplace_back("OMPI_MCA_btl_vader_backing_directory", shm_dir(map));
  // mpirun does the same when it oversubscribes: busy-polling ranks that
  // outnumber the cpus starve each other.
  cpu_set_t cpus;
  long ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : sysconf(_SC_NPROCESSORS_ONLN);
  if (static_cast<long>(map.node_ranks[map.node_rank].size()) > ncpu && !getenv("OMPI_MCA_mpi_yield_when_idle"))
    env.emplace_back("OMPI_MCA_mpi_yield_when_idle", "1");
  return env;
}

void select_hash_store() { ::setenv(kGdsVar, "hash", 1); }

std::string server_nspace() { return "pmix-server." + std::to_string(::getpid()); }

namespace {
// The URI variables libpmix 4.2's setup_fork writes, one per protocol version
// a client may speak; all hold the same address.
constexpr const char* kUriVars[] = {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
                                    "PMIX_SERVER_URI21", "PMIX_SERVER_URI2"};
bool is_uri_var(const std::string& name) {
  for (const char* v : kUriVars)
    if (name == v) return true;
  return false;
}

// The version of the libpmix headers dl_pmix was compiled against, as
// "4.2.2": a rank's environment is written before libpmix is loaded (the
// agent loads it on its PMIx thread, pmix_loader.h), and asking the library
// (PMIx_Get_version) made the first rank wait for that. Clients read only
// the numbers (major, minor, release); env_mismatches compares this with
// the loaded library's when the server starts.
std::string library_version() {
  return std::to_string(PMIX_VERSION_MAJOR) + "." + std::to_string(PMIX_VERSION_MINOR) + "." +
         std::to_string(PMIX_VERSION_RELEASE);
}

// "4.2.2" out of "4.2.2rc2": what a client reads of PMIX_VERSION.
std::string version_numbers(const std::string& v) {
  size_t end = 0;
  while (end < v.size() && (std::isdigit(static_cast<unsigned char>(v[end])) || v[end] == '.')) ++end;
  while (end > 0 && v[end - 1] == '.') --end;
  return v.substr(0, end);
}
}  // namespace

uint16_t uri_port(const std::string& uri) {
  const std::string tag = ";tcp4://127.0.0.1:";
  auto at = uri.find(tag);
  if (at == std::string::npos) return 0;
  try {
    long port = std::stol(uri.substr(at + tag.size()));
    return port > 0 && port < 65536 ? static_cast<uint16_t>(port) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

void point_uris_at(std::vector<std::pair<std::string, std::string>>& env, uint16_t port) {
  const std::string uri = server_nspace() + ".0;tcp4://127.0.0.1:" + std::to_string(port);
  for (auto& [k, v] : env)
    if (is_uri_var(k)) v = uri;
}

std::vector<std::pair<std::string, std::string>> predicted_rank_env(const JobMap& map, int global_rank,
                                                                    uint16_t port) {
  validate_served(map);
  if (global_rank < 0 || global_rank >= map.world_size || !is_local(map, global_rank))
    throw UsageError("pmix: rank " + std::to_string(global_rank) + " is not on host " +
                     map.node_hosts[map.node_rank]);
  const std::string pmix_dir = map.tmpdir + "/pmix";
  std::vector<std::pair<std::string, std::string>> env = {
      {"PMIX_NAMESPACE", map.nspace},
      {"PMIX_RANK", std::to_string(global_rank)},
      {"PMIX_SERVER_TMPDIR", pmix_dir},
      {"PMIX_SYSTEM_TMPDIR", pmix_dir},
      {"PMIX_VERSION", library_version()},
      {"PMIX_SECURITY_MODE", "native"},
      {"PMIX_BFROP_BUFFER_TYPE", "PMIX_BFROP_BUFFER_NON_DESC"},
      {"PMIX_GDS_MODULE", "hash"},
      {"PMIX_HOSTNAME", map.node_hosts[map.node_rank]},
  };
  for (const char* v : kUriVars) env.emplace_back(v, "");
  point_uris_at(env, port);
  for (auto& kv : ompi_env(map)) env.push_back(kv);
  return env;
}

std::vector<std::string> env_mismatches(const std::vector<std::pair<std::string, std::string>>& predicted,
                                        const std::vector<std::pair<std::string, std::string>>& real) {
  auto strip = [](const std::string& name, const std::string& value) {
    if (name == "PMIX_VERSION") return version_numbers(value);
    return is_uri_var(name) ? value.substr(0, value.find(';')) : value;
  };
  std::map<std::string, std::string> p(predicted.begin(), predicted.end()), r(real.begin(), real.end());
  std::vector<std::string> out;
  for (auto& [k, v] : r) {
    auto it = p.find(k);
    if (it == p.end()) out.push_back(k + ": predicted nothing, libpmix '" + v + "'");
    else if (strip(k, it->second) != strip(k, v))
      out.push_back(k + ": predicted '" + it->second + "', libpmix '" + v + "'");
  }
  for (auto& [k, v] : p)
    if (!r.count(k)) out.push_back(k + ": predicted '" + v + "', libpmix nothing");
  return out;
}

}  // namespace dl::mpi::pmix
