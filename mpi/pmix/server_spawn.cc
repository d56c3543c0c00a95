// MPI_Comm_spawn (PMIx_Spawn): the rank's request goes to the launcher
// (spawn_request), which places the children and sends spawn_launch to
// their host (registered here, started by MpiHooks::start_children) and to
// every other host of the job (the namespace made known), then answers the
// rank (spawn_reply). docs/mpi.md, "Spawning".
#include <cstring>

#include "errors/error.h"
#include "mpi/pmix/server_module.h"

namespace dl::mpi::pmix {
namespace {

namespace msg = control::msg;

// One program of a PMIx_Spawn as the launcher's SpawnApp.
msg::SpawnApp spawn_app(const pmix_app_t& a) {
  msg::SpawnApp app;
  if (a.cmd != nullptr) app.argv.emplace_back(a.cmd);
  // argv[0] repeats the command, as in exec's argv.
  for (size_t k = 1; a.argv != nullptr && a.argv[0] != nullptr && a.argv[k] != nullptr; ++k)
    app.argv.emplace_back(a.argv[k]);
  app.np = a.maxprocs;
  control::EnvVars env;
  for (char** e = a.env; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  if (!env.empty()) app.env = std::move(env);
  if (a.cwd != nullptr) app.wdir = std::string(a.cwd);
  for (size_t k = 0; k < a.ninfo; ++k)
    if (PMIX_CHECK_KEY(&a.info[k], PMIX_WDIR) && a.info[k].value.type == PMIX_STRING)
      app.wdir = std::string(a.info[k].value.data.string);
  return app;
}

}  // namespace

// The spawning rank waits until spawn_reply (or this host's spawn_launch)
// answers; without a send hook it is refused at once.
pmix_status_t on_spawn(const pmix_proc_t* proc, const pmix_info_t[], size_t, const pmix_app_t apps[], size_t napps,
                       pmix_spawn_cbfunc_t cbfunc, void* cbdata) {
  std::vector<msg::SpawnApp> wanted;
  for (size_t a = 0; a < napps; ++a) wanted.push_back(spawn_app(apps[a]));
  pmix_status_t rc = PMIX_ERR_NOT_SUPPORTED;
  with_state(proc, [&](ServerState& s, int rank) {
    if (!s.hooks.send) return;
    const uint64_t id = owe(s, &ServerState::next_spawn, &ServerState::spawns, PendingSpawn{cbfunc, cbdata});
    post_send(s, msg::SpawnRequest{id, rank, std::move(wanted)});
    rc = PMIX_SUCCESS;
  });
  return rc;
}

void PmixServer::answer(const msg::SpawnReply& m) {
  PendingSpawn p = take(state_.get(), &ServerState::spawns, m.id);
  if (!p.fn) return;
  pmix_nspace_t ns;
  PMIX_LOAD_NSPACE(ns, m.nspace.value_or("").c_str());
  p.fn(m.error.value_or("").empty() ? PMIX_SUCCESS : PMIX_ERR_NOT_SUPPORTED, ns, p.cbdata);
}

// The children's namespace registered, then started here (and the rank's
// call completed) or made known (spawn_known).
void PmixServer::answer(const msg::SpawnLaunch& m) {
  std::vector<EnvList> envs;
  std::string error;
  try {
    envs = start_spawn(m);
  } catch (const Error& e) {
    error = e.what();
  }
  finish_spawn_launch(state_->hooks, m, envs, error);
  if (m.elsewhere) return;
  msg::SpawnReply done{m.id, std::nullopt, std::nullopt};
  if (error.empty()) done.nspace = m.nspace;
  else done.error = error;
  answer(done);
}

std::vector<EnvList> PmixServer::start_spawn(const msg::SpawnLaunch& m) {
  // The children's map: all of them on one host, this one or (elsewhere)
  // that one first, then this one, where none of them runs.
  JobMap children;
  children.node_hosts = {map_.node_hosts[map_.node_rank]};
  children.universe_size = map_.universe_size;
  children.nspace = m.nspace;
  children.world_size = static_cast<int>(m.children.size());
  children.node_rank = 0;
  children.node_ranks.resize(1);
  for (int k = 0; k < children.world_size; ++k) children.node_ranks[0].push_back(k);
  if (m.elsewhere) {
    children.node_hosts.insert(children.node_hosts.begin(), *m.elsewhere);
    children.node_ranks.emplace_back();
    children.node_rank = 1;
  }
  if (children.universe_size < children.world_size) children.universe_size = children.world_size;
  children.app_sizes = m.app_sizes.size() > 1 ? m.app_sizes : std::vector<int>{};
  children.tmpdir = tmpdir_;
  children.parent_nspace = m.parent_nspace;
  children.parent_rank = m.parent_rank;
  if (m.children.empty()) throw UsageError("a spawn without processes");
  register_spawn(children, m.children.front().rank);
  std::vector<EnvList> envs;
  if (m.elsewhere) return envs;
  for (int k = 0; k < children.world_size; ++k) {
    envs.push_back(spawn_env(children, k));
    // Children reach the server through the door, as the job's ranks do.
    if (door_port_ != 0) point_uris_at(envs.back(), door_port_);
  }
  return envs;
}

void PmixServer::register_spawn(const JobMap& children, int first_id) {
  validate_served(children);
  if (!running_ || !registered_) throw UsageError("pmix: register_spawn needs a running server with a job");
  if (children.tmpdir != tmpdir_) throw UsageError("pmix: the children's tmpdir is not the server's");
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->id_base.count(children.nspace)) throw UsageError("pmix: namespace " + children.nspace + " is served already");
    state_->id_base[children.nspace] = first_id;
    state_->ns_size[children.nspace] = children.world_size;
    state_->ns_local[children.nspace] = !children.node_ranks[children.node_rank].empty();
  }
  spawned_local_ += static_cast<int>(children.node_ranks[children.node_rank].size());
  register_nspace(children);
}

EnvList PmixServer::spawn_env(const JobMap& children, int rank) {
  if (!running_ || !registered_) throw UsageError("pmix: spawn_env needs a running server with a job");
  auto out = setup_fork(children.nspace, rank);
  out.emplace_back("PMIX_HOSTNAME", children.node_hosts[children.node_rank]);
  // The job's OpenMPI settings; the children count towards oversubscription.
  JobMap all = map_;
  for (int k = 0; k < spawned_local_; ++k) all.node_ranks[all.node_rank].push_back(all.world_size + k);
  for (auto& kv : ompi_env(all)) out.push_back(kv);
  return out;
}

}  // namespace dl::mpi::pmix
