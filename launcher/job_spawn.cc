// The Job's side of MPI_Comm_spawn and of PMIx_Publish/PMIx_Lookup. The
// decisions are launcher/spawn_answer.h's and launcher/name_service.h's;
// docs/mpi.md ("Spawning") says what the user sees.
#include "launcher/job.h"

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
  for (int rank : n.ranks) room.in_use += fate_.done(rank) ? 0 : 1;
  SpawnAnswer a = spawns_->answer(r, n.host, room);
  if (a.reply) {
    if (!a.line.empty()) write_fully(2, a.line);
    server_->send(node, *a.reply);
    if (!a.verdict.empty() && fate_.on_spawn_refused(a.verdict)) teardown(grace_ms());
    return;
  }
  log(a.log);
  fate_.add_ranks(static_cast<int>(a.launch->children.size()));
  for (const auto& c : a.launch->children) {
    n.ranks.push_back(c.rank);
    sink_->add_rank(c.rank, n.host, spawns_->tag(c.rank));
  }
  server_->send(node, *a.launch);
}

void Job::on_mpi_names(int node, const control::FromAgent& m) {
  if (!mpi_) throw RemoteError("publish/lookup outside an MPI job");
  if (auto* p = std::get_if<msg::MpiPublish>(&m)) {
    for (const auto& name : p->names) log("published '" + name.key + "' (" + name.nspace + ":" + std::to_string(name.rank) + ")");
    names_->publish(*p);
  } else if (auto* u = std::get_if<msg::MpiUnpublish>(&m)) {
    names_->unpublish(u->keys);
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
