#include "launcher/mpi/spawn_answer.h"

namespace dl::launcher {

namespace msg = control::msg;

namespace {
// "3 x python3 -m mpi4py.futures.server, 1 x ./b": what the rank asked for.
std::string describe_apps(const msg::SpawnRequest& r) {
  std::string out;
  for (const auto& app : r.apps) {
    std::string cmd;
    for (const auto& w : app.argv) cmd += (cmd.empty() ? "" : " ") + w;
    out += (out.empty() ? "" : ", ") + std::to_string(app.np) + " x " + (cmd.empty() ? "(no program)" : cmd);
  }
  return out.empty() ? "no programs" : out;
}

std::string plural(int n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : word.back() == 's' ? "es" : "s");
}

// Why `room` cannot take `wanted` more processes, or "" when it can.
std::string no_room(int wanted, const SpawnRoom& room, const std::string& host) {
  const int free = std::max(0, room.slots - room.in_use);
  if (wanted <= free) return "";
  if (room.oversubscribe && (room.max_slots == 0 || room.in_use + wanted <= room.max_slots)) return "";
  const std::string have = host + " has " + plural(free, "free slot") + " (" + plural(room.slots, "slot") + ", " +
                           std::to_string(room.in_use) + " in use";
  if (room.oversubscribe)
    return have + ", max_slots " + std::to_string(room.max_slots) + " even with --oversubscribe)";
  if (room.cpu_slots)
    return have + "; one slot per CPU dlaunch may use); pass --oversubscribe to start more processes than CPUs, "
                  "or give it slots (-H " + host + ":N)";
  return have + "); give it more slots (a hostfile line 'host slots=N', -H host:N) or pass --oversubscribe";
}
}  // namespace

SpawnBook::SpawnBook(std::string job_nspace, int world_size)
    : job_nspace_(std::move(job_nspace)), world_size_(world_size), next_id_(world_size) {}

SpawnAnswer SpawnBook::answer(const msg::SpawnRequest& request, const std::string& host, const SpawnRoom& room) {
  SpawnAnswer a;
  int wanted = 0;
  bool bad = request.apps.empty();
  for (const auto& app : request.apps) {
    wanted += app.np;
    bad = bad || app.np < 1 || app.argv.empty();
  }
  const std::string who = describe(request.rank) + " on " + host + " called MPI_Comm_spawn (" + describe_apps(request) + ")";
  std::string why = bad ? "every program needs a command and at least 1 process" : no_room(wanted, room, host);
  if (!why.empty()) {
    a.reply = msg::SpawnReply{request.id, std::nullopt, "dlaunch cannot start " + plural(wanted, "process") + ": " + why};
    a.verdict = who + ", which dlaunch could not start: " + why;
    a.line = "dlaunch: " + who + ": " + why +
             "; the call returns an error (MPI_ERR_SPAWN) and the job ends (docs/mpi.md, \"Spawning\")\n";
    return a;
  }
  const int k = ++spawns_;
  const auto [parent_ns, parent_rank] = pmix_name(request.rank);
  msg::SpawnLaunch l;
  l.id = request.id;
  l.nspace = job_nspace_ + ".spawn" + std::to_string(k);
  l.parent_nspace = parent_ns;
  l.parent_rank = parent_rank;
  const int first = next_id_;
  for (const auto& app : request.apps) {
    l.app_sizes.push_back(app.np);
    for (int i = 0; i < app.np; ++i) {
      msg::RankSpec c;
      c.rank = next_id_;
      c.argv = app.argv;
      c.env = app.env.value_or(control::EnvVars{});
      c.wdir = app.wdir;
      const int in_ns = next_id_ - first;
      children_[next_id_++] = Child{k, in_ns, request.rank, l.nspace};
      l.children.push_back(std::move(c));
    }
  }
  a.log = who + ": started " + tag(first) + (wanted > 1 ? ".." + tag(next_id_ - 1) : "") + " on " + host +
          " (namespace " + l.nspace + ")";
  a.launch = std::move(l);
  return a;
}

std::string SpawnBook::describe(int id) const {
  auto it = children_.find(id);
  if (it == children_.end()) return "rank " + std::to_string(id);
  return tag(id) + " (spawned by " + describe(it->second.parent) + ")";
}

std::string SpawnBook::tag(int id) const {
  auto it = children_.find(id);
  if (it == children_.end()) return std::to_string(id);
  return "spawn" + std::to_string(it->second.spawn) + ":" + std::to_string(it->second.rank);
}

std::vector<int> SpawnBook::ids_of(const std::string& nspace, int rank) const {
  std::vector<int> out;
  if (nspace == job_nspace_) {
    for (int r = 0; r < world_size_; ++r)
      if (rank < 0 || rank == r) out.push_back(r);
    return out;
  }
  for (const auto& [id, c] : children_)
    if (c.nspace == nspace && (rank < 0 || rank == c.rank)) out.push_back(id);
  return out;
}

std::pair<std::string, int> SpawnBook::pmix_name(int id) const {
  auto it = children_.find(id);
  if (it == children_.end()) return {job_nspace_, id};
  return {it->second.nspace, it->second.rank};
}

}  // namespace dl::launcher
