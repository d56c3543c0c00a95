#include "launcher/mpi/mpi_router.h"

#include <cstdio>
#include <vector>

#include "errors/error.h"
#include "launcher/fate.h"

namespace dl::launcher {

namespace msg = control::msg;

MpiRouter::MpiRouter(boost::asio::io_context& io, std::string job_nspace, int world_size,
                     std::chrono::milliseconds timeout, std::unique_ptr<JobPort> port)
    : port_(std::move(port)),
      timeout_(timeout),
      spawns_(std::move(job_nspace), world_size),
      names_(io, timeout),
      connects_(io, timeout, connect_hooks()) {}

MpiRouter::~MpiRouter() = default;

void MpiRouter::receive(int node, const control::MpiUp& m) {
  std::visit(control::Visitor{
                 [&](const msg::MpiAbort& a) {
                   own(node, a.rank);
                   if (port_->fate().on_mpi_abort(a.rank, port_->host(node), a.status, a.message, describe(a.rank)))
                     port_->teardown();
                 },
                 [&](const msg::MpiRefused& r) {
                   own(node, r.rank);
                   if (port_->fate().on_mpi_refused(r.rank, port_->host(node), r.wire))
                     port_->teardown();
                 },
                 [&](const msg::SpawnRequest& r) {
                   own(node, r.rank);
                   spawn_request(node, r);
                 },
                 [&](const auto& other) {
                   if (!port_->serves_mpi()) throw RemoteError("publish/lookup outside an MPI job");
                   using M = std::decay_t<decltype(other)>;
                   if constexpr (std::is_same_v<M, msg::MpiPublish>) names_.publish(other);
                   else if constexpr (std::is_same_v<M, msg::MpiUnpublish>) names_.unpublish(other.keys);
                   else if constexpr (std::is_same_v<M, msg::MpiLookup>) lookup(node, other);
                   else if constexpr (std::is_same_v<M, msg::MpiConnect>) connect(node, other);
                   else if constexpr (std::is_same_v<M, msg::MpiDmodex>) dmodex(node, other);
                   else if constexpr (std::is_same_v<M, msg::MpiDmodexData>) dmodex_data(other);
                   else if constexpr (std::is_same_v<M, msg::SpawnKnown>) spawn_known(node, other);
                   else static_assert(sizeof(M) == 0, "an MpiUp message without a route");
                 },
             },
             m);
}

void MpiRouter::own(int node, int rank) const {
  if (port_->node_of(rank) != node) throw RemoteError("MPI message for a foreign rank");
}

void MpiRouter::send_if_connected(int node, const control::MpiDown& m) {
  if (port_->connected(node)) port_->send(node, m);
}

// Places the children on the rank's host (or refuses at once), makes them
// ranks of the job (fate, output, teardown) and asks the agent to start them.
void MpiRouter::spawn_request(int node, const msg::SpawnRequest& r) {
  // Ending: start nothing more; the rank is being stopped anyway.
  if (!port_->launched()) return port_->send(node, msg::SpawnReply{r.id, std::nullopt, "the job is ending"});
  SpawnAnswer a = spawns_.answer(r, port_->host(node), port_->room(node));
  if (a.reply) {
    port_->send(node, *a.reply);
    // One line says why: the job's verdict, or this line at once when the
    // job failed before (and its verdict names that first failure).
    if (port_->fate().on_spawn_refused(a.verdict)) port_->teardown();
    else port_->say(a.line);
    return;
  }
  port_->log(a.log);
  port_->fate().add_ranks(static_cast<int>(a.launch->children.size()));
  for (const auto& c : a.launch->children) port_->add_rank(node, c.rank, spawns_.tag(c.rank));
  tell_peers(node, *a.launch);
}

// The spawning rank's peers on other hosts take part in the connect that
// follows: their PMIx servers must know the children's namespace first.
// The children's host gets its spawn_launch once every peer answered.
void MpiRouter::tell_peers(int node, const msg::SpawnLaunch& launch) {
  msg::SpawnLaunch known = launch;
  known.elsewhere = port_->host(node);
  std::set<int> peers;
  for (int id : spawns_.ids_of(launch.parent_nspace, -1)) peers.insert(port_->node_of(id));
  PendingSpawn pending{node, launch, {}};
  for (int p : peers)
    if (p != node && p >= 0 && port_->connected(p)) {
      port_->send(p, known);
      pending.waiting.insert(p);
    }
  if (pending.waiting.empty()) return port_->send(node, launch);
  pending_spawns_[launch.nspace] = std::move(pending);
}

// A peer host knows the namespace; the last one lets the children start.
void MpiRouter::spawn_known(int node, const msg::SpawnKnown& k) {
  auto it = pending_spawns_.find(k.nspace);
  if (it == pending_spawns_.end()) return;
  if (k.error) port_->log(port_->host(node) + " cannot register " + k.nspace + ": " + *k.error);
  it->second.waiting.erase(node);
  if (!it->second.waiting.empty()) return;
  PendingSpawn p = std::move(it->second);
  pending_spawns_.erase(it);
  send_if_connected(p.node, p.launch);
}

// The hosts of every process named ("nspace:rank", "nspace:*") join one set.
void MpiRouter::connect(int node, const msg::MpiConnect& c) {
  std::set<int> hosts;
  for (const auto& p : c.procs) {
    const auto colon = p.rfind(':');
    if (colon == std::string::npos) throw RemoteError("mpi_connect: bad process name '" + p + "'");
    const std::string rank = p.substr(colon + 1);
    int r = -1;
    if (rank != "*") {
      try {
        r = std::stoi(rank);
      } catch (const std::exception&) {
        throw RemoteError("mpi_connect: bad process name '" + p + "'");
      }
    }
    for (int id : spawns_.ids_of(p.substr(0, colon), r)) hosts.insert(port_->node_of(id));
  }
  hosts.erase(-1);
  c.connect_op();  // throws for an op this launcher does not know
  port_->log(ConnectRelay::describe(c) + ": " + port_->host(node) + " joined");
  connects_.join(node, c, std::vector<int>(hosts.begin(), hosts.end()));
}

ConnectRelay::Hooks MpiRouter::connect_hooks() {
  ConnectRelay::Hooks hooks;
  hooks.answer = [this](int node, uint64_t id, const std::string& blob, const std::string& error) {
    msg::MpiConnectDone d{id, std::nullopt, std::nullopt};
    if (!blob.empty()) d.blob = blob;
    if (!error.empty()) d.error = error;
    send_if_connected(node, d);
  };
  hooks.timed_out = [this](const std::string& what, const std::vector<int>& missing) {
    std::string hosts;
    for (int n : missing) hosts += (hosts.empty() ? "" : ", ") + port_->host(n);
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", static_cast<double>(timeout_.count()) / 1000);
    if (port_->fate().on_spawn_refused("MPI " + what + " did not complete within " + secs +
                                       " s (--fence-timeout): no request from " + hosts))
      port_->teardown();
  };
  return hooks;
}

// Asks the rank's host for its data; answers with what it says.
void MpiRouter::dmodex(int node, const msg::MpiDmodex& d) {
  const int holder = port_->node_of(d.rank);
  if (holder < 0 || holder == node || !port_->connected(holder))
    return port_->send(node, msg::MpiDmodexReply{d.id, false, ""});
  const uint64_t k = next_dmodex_++;
  dmodex_[k] = {node, d.id};
  port_->send(holder, msg::MpiDmodexServe{k, d.rank});
}

void MpiRouter::dmodex_data(const msg::MpiDmodexData& d) {
  auto it = dmodex_.find(d.id);
  if (it == dmodex_.end()) return;
  const auto [asker, id] = it->second;
  dmodex_.erase(it);
  send_if_connected(asker, msg::MpiDmodexReply{id, d.ok, d.blob});
}

void MpiRouter::lookup(int node, const msg::MpiLookup& l) {
  names_.lookup(l, [this, node, id = l.id, who = describe(l.rank)](std::vector<msg::PublishedName> names,
                                                                   std::string error) {
    if (!error.empty()) port_->log(who + "'s PMIx_Lookup failed: " + error);
    msg::MpiLookupReply reply{id, std::move(names), std::nullopt};
    if (!error.empty()) reply.error = error;
    send_if_connected(node, reply);
  });
}

}  // namespace dl::launcher
