// The Job's side of MPI_Comm_spawn and of PMIx_Publish/PMIx_Lookup. The
// decisions are launcher/spawn_answer.h's and launcher/name_service.h's;
// docs/mpi.md ("Spawning") says what the user sees.
#include "launcher/job.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "hostfiles/placement.h"
#include "launcher/output_sink.h"

namespace dl::launcher {

namespace msg = control::msg;

// Places the children on the rank's host (or refuses at once), makes them
// ranks of the job (fate, output, teardown) and asks the agent to start them.
void Job::on_spawn_request(int node, const msg::SpawnRequest& r) {
  Node& n = nodes_.at(static_cast<size_t>(node));
  if (!phase_.is(Phase::kLaunched)) {
    // Tearing down: start nothing more; the rank is being stopped anyway.
    return server_->send(node, msg::SpawnReply{r.id, std::nullopt, "the job is ending"});
  }
  const auto& entry = plan_.nodes.at(static_cast<size_t>(node));
  SpawnRoom room;
  room.slots = entry.slots;
  room.max_slots = entry.max_slots;
  room.oversubscribe = opts_.oversubscribe;
  room.cpu_slots = entry.origin == hostfiles::kLocalCpusOrigin;
  for (int rank : n.ranks) room.in_use += fate_.done(rank) ? 0 : 1;
  SpawnAnswer a = spawns_->answer(r, n.host, room);
  if (a.reply) {
    server_->send(node, *a.reply);
    // One line says why: the job's verdict, or this line at once when the
    // job failed before (and its verdict names that first failure).
    if (fate_.on_spawn_refused(a.verdict)) teardown(grace_ms());
    else write_fully(2, a.line);
    return;
  }
  log(a.log);
  fate_.add_ranks(static_cast<int>(a.launch->children.size()));
  for (const auto& c : a.launch->children) {
    n.ranks.push_back(c.rank);
    sink_->add_rank(c.rank, n.host, spawns_->tag(c.rank));
  }
  // The spawning rank's peers on other hosts take part in the connect that
  // follows: their PMIx servers must know the children's namespace first.
  msg::SpawnLaunch known = *a.launch;
  known.elsewhere = n.host;
  std::set<int> peers;
  for (int id : spawns_->ids_of(a.launch->parent_nspace, -1)) peers.insert(node_of(id));
  PendingSpawn pending{node, *a.launch, {}};
  for (int p : peers)
    if (p != node && p >= 0 && nodes_.at(static_cast<size_t>(p)).ours() && server_->connected(p)) {
      server_->send(p, known);
      pending.waiting.insert(p);
    }
  if (pending.waiting.empty()) return server_->send(node, *a.launch);
  pending_spawns_[a.launch->nspace] = std::move(pending);
}

int Job::node_of(int rank) const {
  for (const auto& n : nodes_)
    if (std::find(n.ranks.begin(), n.ranks.end(), rank) != n.ranks.end()) return n.index;
  return -1;
}

std::unique_ptr<ConnectRelay> Job::make_connect_relay() {
  ConnectRelay::Hooks hooks;
  hooks.answer = [this](int node, uint64_t id, const std::string& blob, const std::string& error) {
    msg::MpiConnectDone d{id, std::nullopt, std::nullopt};
    if (!blob.empty()) d.blob = blob;
    if (!error.empty()) d.error = error;
    if (server_->connected(node)) server_->send(node, d);
  };
  hooks.timed_out = [this](const std::string& what, const std::vector<int>& missing) {
    std::string hosts;
    for (int n : missing) hosts += (hosts.empty() ? "" : ", ") + nodes_.at(static_cast<size_t>(n)).host;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", opts_.fence_timeout_s);
    if (fate_.on_spawn_refused("MPI " + what + " did not complete within " + secs + " s (--fence-timeout): no request from " +
                               hosts))
      teardown(grace_ms());
  };
  return std::make_unique<ConnectRelay>(io_, std::chrono::milliseconds(static_cast<long>(opts_.fence_timeout_s * 1000)),
                                        std::move(hooks));
}

void Job::on_mpi_names(int node, const control::FromAgent& m) {
  if (!mpi_) throw RemoteError("publish/lookup outside an MPI job");
  if (auto* p = std::get_if<msg::MpiPublish>(&m)) {
    names_->publish(*p);
  } else if (auto* u = std::get_if<msg::MpiUnpublish>(&m)) {
    names_->unpublish(u->keys);
  } else if (auto* k = std::get_if<msg::SpawnKnown>(&m)) {
    // A peer host knows the namespace; the last one lets the children start.
    auto it = pending_spawns_.find(k->nspace);
    if (it == pending_spawns_.end()) return;
    if (k->error) log(nodes_.at(static_cast<size_t>(node)).host + " cannot register " + k->nspace + ": " + *k->error);
    it->second.waiting.erase(node);
    if (!it->second.waiting.empty()) return;
    PendingSpawn p = std::move(it->second);
    pending_spawns_.erase(it);
    if (server_->connected(p.node)) server_->send(p.node, p.launch);
  } else if (auto* c = std::get_if<msg::MpiConnect>(&m)) {
    // The hosts of every process named ("nspace:rank", "nspace:*").
    std::set<int> hosts;
    for (const auto& p : c->procs) {
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
      for (int id : spawns_->ids_of(p.substr(0, colon), r)) hosts.insert(node_of(id));
    }
    hosts.erase(-1);
    if (c->op != "connect" && c->op != "disconnect" && c->op != "fence") throw RemoteError("mpi_connect: unknown op '" + c->op + "'");
    log(ConnectRelay::describe(*c) + ": " + nodes_.at(static_cast<size_t>(node)).host + " joined");
    connects_->join(node, *c, std::vector<int>(hosts.begin(), hosts.end()));
  } else if (auto* d = std::get_if<msg::MpiDmodex>(&m)) {
    // Ask the rank's host for its data; answer with what it says.
    const int holder = node_of(d->rank);
    if (holder < 0 || holder == node || !server_->connected(holder))
      return server_->send(node, msg::MpiDmodexReply{d->id, false, ""});
    const uint64_t k = next_dmodex_++;
    dmodex_[k] = {node, d->id};
    server_->send(holder, msg::MpiDmodexServe{k, d->rank});
  } else if (auto* data = std::get_if<msg::MpiDmodexData>(&m)) {
    auto it = dmodex_.find(data->id);
    if (it == dmodex_.end()) return;
    const auto [asker, id] = it->second;
    dmodex_.erase(it);
    if (server_->connected(asker)) server_->send(asker, msg::MpiDmodexReply{id, data->ok, data->blob});
  } else if (auto* l = std::get_if<msg::MpiLookup>(&m)) {
    names_->lookup(*l, [this, node, id = l->id, who = spawns_->describe(l->rank)](std::vector<msg::PublishedName> names,
                                                                                   std::string error) {
      if (!error.empty()) log(who + "'s PMIx_Lookup failed: " + error);
      msg::MpiLookupReply reply{id, std::move(names), std::nullopt};
      if (!error.empty()) reply.error = error;
      if (server_->connected(node)) server_->send(node, reply);
    });
  }
}

}  // namespace dl::launcher
