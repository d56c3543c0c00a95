#include "rendezvous/bootstrap.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/env_names.h"
#include "errors/error.h"
#include "hostfiles/hostlist.h"
#include "rendezvous/file_store.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_server.h"

extern char** environ;

namespace dl::rdzv {

namespace {

struct Source {
  const char* name;
  const char *rank, *size, *local_rank, *local_size, *node_rank;
};

// The reading order (docs/rendezvous.md); PMIx comes last, below.
constexpr Source kSources[] = {
    {"dlaunch", env::kDlRank, env::kDlWorldSize, env::kDlLocalRank, env::kDlLocalWorldSize, env::kDlNodeRank},
    {"torchrun", env::kRank, env::kWorldSize, env::kLocalRank, env::kLocalWorldSize, env::kGroupRank},
    {"OpenMPI", env::kOmpiRank, env::kOmpiSize, env::kOmpiLocalRank, env::kOmpiLocalSize, nullptr},
    {"PMI", env::kPmiRank, env::kPmiSize, env::kMpiLocalRankId, env::kMpiLocalNRanks, nullptr},
    {"Slurm", env::kSlurmProcId, env::kSlurmNTasks, env::kSlurmLocalId, nullptr, env::kSlurmNodeId},
};
// Read by the bootstrap only, so not in control/env_names.h.
constexpr const char* kPmixRank = "PMIX_RANK";
constexpr const char* kPmixNamespace = "PMIX_NAMESPACE";
constexpr const char* kSlurmJobNodelist = "SLURM_JOB_NODELIST";
constexpr const char* kSlurmNodelist = "SLURM_NODELIST";

const std::string* find(const Environment& env, const char* name) {
  if (!name) return nullptr;
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

int number(const Environment& env, const char* name, const char* source, int fallback) {
  const std::string* v = find(env, name);
  if (!v) return fallback;
  int n = 0;
  bool ok = !v->empty() && v->size() < 10;
  for (char c : *v) ok = ok && c >= '0' && c <= '9', n = n * 10 + (c - '0');
  if (!ok) throw UsageError(std::string(name) + "='" + *v + "' is not a non-negative number (set by " + source + ")");
  return n;
}

std::string looked_for() {
  std::string out;
  for (const auto& s : kSources) out += std::string(s.rank) + "+" + s.size + " (" + s.name + "), ";
  return out + kPmixRank + "+" + kPmixNamespace + " (PMIx)";
}

void fill_master(const Environment& env, Identity& id) {
  if (auto* a = find(env, env::kMasterAddr)) id.master_addr = *a;
  id.master_port = number(env, env::kMasterPort, "the environment", id.master_port);
}

std::string token_from(const Environment& env) {
  auto* t = find(env, env::kDlToken);
  return t && !t->empty() ? *t : std::string(kUnauthenticatedToken);
}

// True when host names one of this machine's addresses (binding to it works).
bool is_own_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), "0", &hints, &res) != 0) return false;
  bool own = false;
  for (addrinfo* ai = res; ai && !own; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    own = ::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return own;
}

std::unique_ptr<Store> tcp_store(const std::string& host, uint16_t port, int rank, bool may_host, Millis timeout,
                                 const std::string& token) {
  std::unique_ptr<BackgroundStoreServer> server;
  if (rank == 0 && may_host && is_own_address(host)) {
    try {
      server = std::make_unique<BackgroundStoreServer>(host.find(':') != std::string::npos ? "::" : "0.0.0.0",
                                                       port, token);
    } catch (const IoError&) {
      // The port is taken: presumably a store (dlaunch store) already serves it.
    }
  }
  auto store = std::make_unique<TcpStore>(host, port, token, timeout);
  if (server) store->own_server(std::shared_ptr<BackgroundStoreServer>(std::move(server)));
  store->set_timeout(timeout);
  return store;
}

}  // namespace

Environment process_environment() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string_view::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

Identity identity_from_env(const Environment& env, const std::function<PmixJobInfo()>& pmix) {
  Identity id;
  for (const auto& s : kSources) {
    bool has_rank = find(env, s.rank) != nullptr, has_size = find(env, s.size) != nullptr;
    if (!has_rank && !has_size) continue;
    if (!has_rank || !has_size)
      throw UsageError(std::string(s.name) + " variables are incomplete: " + (has_rank ? s.rank : s.size) +
                       " is set but " + (has_rank ? s.size : s.rank) + " is not");
    id.source = s.name;
    id.rank = number(env, s.rank, s.name, -1);
    id.world_size = number(env, s.size, s.name, -1);
    id.local_rank = number(env, s.local_rank, s.name, -1);
    id.local_world_size = number(env, s.local_size, s.name, -1);
    id.node_rank = number(env, s.node_rank, s.name, -1);
    if (id.source == "Slurm") {
      auto* nodes = find(env, kSlurmJobNodelist);
      if (!nodes) nodes = find(env, kSlurmNodelist);
      if (nodes) id.master_addr = hostfiles::expand_hostlist(*nodes, kSlurmJobNodelist).front();
      id.master_port = 29500;  // torch's default
    }
    fill_master(env, id);
    if (id.rank >= id.world_size)
      throw UsageError(std::string(s.rank) + "=" + std::to_string(id.rank) + " is not below " + s.size + "=" +
                       std::to_string(id.world_size));
    return id;
  }
  if (find(env, kPmixRank) && find(env, kPmixNamespace)) {
    PmixJobInfo p = pmix();
    id = {p.rank, p.world_size, p.local_rank, p.local_world_size, p.node_rank, "", 0, "PMIx"};
    fill_master(env, id);
    return id;
  }
  throw UsageError("no rank identity in the environment; looked for " + looked_for() +
                   ". Start the program with dlaunch, torchrun, mpirun or srun, or set RANK, WORLD_SIZE, "
                   "MASTER_ADDR and MASTER_PORT");
}

std::unique_ptr<Store> connect_store(std::string_view url, int rank, int world_size, Millis timeout) {
  return connect_store(url, rank, world_size, timeout, process_environment());
}

std::unique_ptr<Store> connect_store(std::string_view url, int rank, int world_size, Millis timeout,
                                     const Environment& env) {
  if (url.rfind("tcp://", 0) == 0) {
    auto [host, port] = wire::split_host_port(url.substr(6), "store url " + std::string(url));
    return tcp_store(host, port, rank, true, timeout, token_from(env));
  }
  if (url.rfind("file://", 0) == 0) {
    std::string path(url.substr(7));
    if (path.empty() || path[0] != '/')
      throw UsageError("store url " + std::string(url) + ": expected file:///absolute/path");
    auto store = std::make_unique<FileStore>(path);
    store->set_timeout(timeout);
    return store;
  }
  if (url != "env://")
    throw UsageError("store url '" + std::string(url) + "': expected tcp://host:port, file:///path or env://");
  if (auto* door = find(env, env::kDlStoreDoor)) {
    auto store = std::make_unique<TcpStore>(StoreDoorPath{*door}, token_from(env), timeout);
    store->set_timeout(timeout);
    return store;
  }
  if (auto* addr = find(env, env::kDlStoreAddr)) {
    auto [host, port] = wire::split_host_port(*addr, env::kDlStoreAddr);
    return tcp_store(host, port, rank, false, timeout, token_from(env));
  }
  auto* host = find(env, env::kMasterAddr);
  if (!host || !find(env, env::kMasterPort))
    throw UsageError("env:// needs DLAUNCH_STORE_ADDR (set by dlaunch) or MASTER_ADDR and MASTER_PORT "
                     "(set by torchrun, or by hand)");
  int port = number(env, env::kMasterPort, "the environment", 0);
  if (port > 65535)
    throw UsageError(std::string(env::kMasterPort) + "=" + std::to_string(port) + " is not a port number");
  return tcp_store(*host, static_cast<uint16_t>(port), rank, true, timeout, token_from(env));
}

}  // namespace dl::rdzv
