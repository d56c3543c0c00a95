#include "launcher/mpi/spawn_answer.h"

#include <catch2/catch.hpp>

#include "launcher/mpi/name_service.h"

using namespace dl::launcher;
namespace msg = dl::control::msg;

namespace {
msg::SpawnRequest pool_request(uint64_t id, int rank, int np) {
  msg::SpawnRequest r;
  r.id = id;
  r.rank = rank;
  msg::SpawnApp app{{"python3", "-m", "mpi4py.futures.server"}, np};
  app.env = dl::control::EnvVars{{"OMPI_PARENT_PORT", "p1"}};
  app.wdir = "/w";
  r.apps = {app, msg::SpawnApp{{"./b"}, 1}};
  return r;
}
}  // namespace

TEST_CASE("spawn answer: no free slot is refused at once, naming the rank, programs and slots", "[launcher][spawn]") {
  SpawnBook book("dl-x", 2);
  SpawnAnswer a = book.answer(pool_request(7, 1, 3), "node9", SpawnRoom{2, 0, 2, false});
  REQUIRE(a.reply);
  CHECK_FALSE(a.launch);
  CHECK(a.reply->id == 7);
  CHECK_FALSE(a.reply->nspace);
  REQUIRE(a.reply->error);
  CHECK(*a.reply->error == "dlaunch cannot start 4 processes: node9 has 0 free slots (2 slots, 2 in use); give it more "
                           "slots (a hostfile line 'host slots=N', -H host:N) or pass --oversubscribe");
  CHECK(a.line == "dlaunch: rank 1 on node9 called MPI_Comm_spawn (3 x python3 -m mpi4py.futures.server, 1 x ./b): "
                  "node9 has 0 free slots (2 slots, 2 in use); give it more slots (a hostfile line 'host slots=N', -H "
                  "host:N) or pass --oversubscribe; the call returns an error (MPI_ERR_SPAWN) and the job ends "
                  "(docs/mpi.md, \"Spawning\")\n");
  CHECK(a.verdict.rfind("rank 1 on node9 called MPI_Comm_spawn (3 x python3", 0) == 0);
  CHECK(book.ids() == 2);  // nothing was placed
  // max_slots holds even with --oversubscribe.
  SpawnAnswer capped = book.answer(pool_request(8, 0, 3), "node9", SpawnRoom{2, 4, 1, true});
  REQUIRE(capped.reply);
  CHECK(capped.reply->error->find("max_slots 4 even with --oversubscribe") != std::string::npos);
}

// No hostfile: the slots are the CPUs, and the fix named first is --oversubscribe.
TEST_CASE("spawn answer: beyond the CPUs of a host without a hostfile names --oversubscribe", "[launcher][spawn]") {
  SpawnBook book("dl-x", 1);
  SpawnRoom cpus{2, 0, 1, false, true};
  SpawnAnswer a = book.answer(pool_request(1, 0, 2), "localhost", cpus);  // 3 processes, 1 free slot
  REQUIRE(a.reply);
  CHECK(*a.reply->error == "dlaunch cannot start 3 processes: localhost has 1 free slot (2 slots, 1 in use; one slot "
                           "per CPU dlaunch may use); pass --oversubscribe to start more processes than CPUs, or give "
                           "it slots (-H localhost:N)");
  // What fits on the free CPUs starts.
  msg::SpawnRequest one = pool_request(2, 0, 1);
  one.apps.pop_back();
  SpawnAnswer b = book.answer(one, "localhost", cpus);
  CHECK_FALSE(b.reply);
  REQUIRE(b.launch);
  CHECK(b.launch->children.size() == 1);
}

TEST_CASE("spawn answer: children on free slots get ids after the job's, names and a namespace", "[launcher][spawn]") {
  SpawnBook book("dl-x", 2);
  SpawnAnswer a = book.answer(pool_request(3, 1, 2), "node9", SpawnRoom{6, 0, 2, false});
  REQUIRE(a.launch);
  CHECK_FALSE(a.reply);
  const msg::SpawnLaunch& l = *a.launch;
  CHECK(l.id == 3);
  CHECK(l.nspace == "dl-x.spawn1");
  CHECK(l.parent_nspace == "dl-x");
  CHECK(l.parent_rank == 1);
  CHECK(l.app_sizes == std::vector<int>{2, 1});
  REQUIRE(l.children.size() == 3);
  CHECK(l.children[0].rank == 2);
  CHECK(l.children[2].rank == 4);
  CHECK(l.children[0].env.at("OMPI_PARENT_PORT") == "p1");
  CHECK(l.children[0].wdir == std::optional<std::string>("/w"));
  CHECK(l.children[2].argv == std::vector<std::string>{"./b"});
  CHECK(book.tag(2) == "spawn1:0");
  CHECK(book.tag(4) == "spawn1:2");
  CHECK(book.tag(1) == "1");
  CHECK(book.describe(3) == "spawn1:1 (spawned by rank 1)");
  CHECK(book.pmix_name(4) == std::make_pair(std::string("dl-x.spawn1"), 2));
  CHECK(a.log == "rank 1 on node9 called MPI_Comm_spawn (2 x python3 -m mpi4py.futures.server, 1 x ./b): started "
                 "spawn1:0..spawn1:2 on node9 (namespace dl-x.spawn1)");
  // A child spawns in turn (over-subscribing): its children name it, and
  // their parent is its own namespace and rank.
  msg::SpawnRequest r;
  r.id = 0, r.rank = 3, r.apps = {msg::SpawnApp{{"./c"}, 1}};
  SpawnAnswer b = book.answer(r, "node9", SpawnRoom{6, 0, 6, true});
  REQUIRE(b.launch);
  CHECK(b.launch->nspace == "dl-x.spawn2");
  CHECK(b.launch->parent_nspace == "dl-x.spawn1");
  CHECK(b.launch->parent_rank == 1);
  CHECK(book.describe(5) == "spawn2:0 (spawned by spawn1:1 (spawned by rank 1))");
  CHECK(book.ids() == 6);
}

TEST_CASE("name service: a waiting lookup is answered when the key is published, first-read names go", "[launcher][spawn]") {
  boost::asio::io_context io;
  NameService ns(io, std::chrono::milliseconds(5000));
  std::vector<std::string> got;
  std::string err;
  auto answer = [&](std::vector<msg::PublishedName> names, std::string error) {
    for (auto& n : names) got.push_back(n.key + "=" + n.value + "@" + n.nspace + ":" + std::to_string(n.rank));
    err = error;
  };
  ns.lookup(msg::MpiLookup{1, 0, {"port:accept"}, false, 0}, answer);
  CHECK(err == "not published: 'port:accept'");
  ns.lookup(msg::MpiLookup{2, 0, {"port:accept"}, true, 0}, answer);
  CHECK(ns.waiting() == 1);
  CHECK(got.empty());
  ns.publish(msg::MpiPublish{{msg::PublishedName{"port:accept", "members", "dl-x.spawn1", 0}}, true});
  CHECK(ns.waiting() == 0);
  CHECK(got == std::vector<std::string>{"port:accept=members@dl-x.spawn1:0"});
  CHECK(err.empty());
  // Read once: gone.
  ns.lookup(msg::MpiLookup{3, 0, {"port:accept"}, false, 0}, answer);
  CHECK(err == "not published: 'port:accept'");
  // Kept names stay; unpublish removes them.
  ns.publish(msg::MpiPublish{{msg::PublishedName{"svc", "v", "dl-x", 1}}, false});
  got.clear();
  ns.lookup(msg::MpiLookup{4, 0, {"svc"}, false, 0}, answer);
  ns.lookup(msg::MpiLookup{5, 0, {"svc"}, false, 0}, answer);
  CHECK(got.size() == 2);
  ns.unpublish({"svc"});
  ns.lookup(msg::MpiLookup{6, 0, {"svc"}, false, 0}, answer);
  CHECK(err == "not published: 'svc'");
}

TEST_CASE("name service: a waiting lookup times out naming the missing keys", "[launcher][spawn]") {
  boost::asio::io_context io;
  NameService ns(io, std::chrono::milliseconds(5000));
  std::string err = "unanswered";
  ns.lookup(msg::MpiLookup{1, 0, {"a", "b"}, true, 50}, [&](auto, std::string e) { err = e; });
  ns.publish(msg::MpiPublish{{msg::PublishedName{"a", "1", "dl-x", 0}}, false});
  CHECK(err == "unanswered");
  io.run_for(std::chrono::seconds(5));
  CHECK(err == "timed out waiting for 'b' to be published");
  CHECK(ns.waiting() == 0);
}
