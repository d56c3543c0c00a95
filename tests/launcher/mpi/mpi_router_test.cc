// The launcher's MPI router on its own: typed MPI messages in from "agents",
// and what it sends to which node, what it does to the job's fate, through
// a fake JobPort. No sockets, no agents.
#include "launcher/mpi/mpi_router.h"

#include <catch2/catch.hpp>

#include "errors/error.h"
#include "launcher/fate.h"

using namespace dl::launcher;
namespace control = dl::control;
namespace msg = dl::control::msg;

namespace {

// Two hosts: node 0 runs ranks 0 and 1, node 1 ranks 2 and 3.
struct FakeJob : MpiRouter::JobPort {
  std::vector<std::vector<int>> ranks{{0, 1}, {2, 3}};
  std::vector<bool> up{true, true};
  bool mpi = true, running = true;
  Fate verdicts{4};
  int teardowns = 0;
  std::vector<std::pair<int, control::MpiDown>> sent;  // (node, message), in order
  std::vector<std::string> logged, said;
  std::vector<std::tuple<int, int, std::string>> added;  // (node, rank, tag)

  bool connected(int node) const override { return up.at(static_cast<size_t>(node)); }
  void send(int node, const control::MpiDown& m) override { sent.emplace_back(node, m); }
  int node_of(int rank) const override {
    for (size_t n = 0; n < ranks.size(); ++n)
      for (int r : ranks[n])
        if (r == rank) return static_cast<int>(n);
    return -1;
  }
  std::string host(int node) const override { return "node" + std::to_string(node); }
  bool serves_mpi() const override { return mpi; }
  bool launched() const override { return running; }
  SpawnRoom room(int) const override { return SpawnRoom{8, 0, 2, false}; }
  void add_rank(int node, int rank, const std::string& tag) override {
    ranks.at(static_cast<size_t>(node)).push_back(rank);
    added.emplace_back(node, rank, tag);
  }
  Fate& fate() override { return verdicts; }
  void teardown() override { ++teardowns; }
  void log(const std::string& line) override { logged.push_back(line); }
  void say(const std::string& line) override { said.push_back(line); }

  // The one message sent, to `node`, as M.
  template <class M> M only_to(int node) {
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].first == node);
    REQUIRE(std::holds_alternative<M>(sent[0].second));
    M m = std::get<M>(sent[0].second);
    sent.clear();
    return m;
  }
};

struct Fixture {
  boost::asio::io_context io;
  FakeJob* job = new FakeJob;
  MpiRouter router{io, "dl-t", 4, std::chrono::milliseconds(5000), std::unique_ptr<MpiRouter::JobPort>(job)};
};

msg::SpawnRequest spawn(uint64_t id, int rank, int np) {
  return msg::SpawnRequest{id, rank, {msg::SpawnApp{{"./worker"}, np}}};
}

}  // namespace

TEST_CASE("mpi router: MPI_Abort of a rank ends the job once, and a foreign rank's is refused", "[launcher][mpi]") {
  Fixture f;
  f.router.receive(1, msg::MpiAbort{2, 7, "bad input"});
  CHECK(f.job->teardowns == 1);
  CHECK(f.job->verdicts.failed());
  CHECK(f.job->verdicts.verdict().find("rank 2") != std::string::npos);
  CHECK(f.job->sent.empty());
  CHECK_THROWS_AS(f.router.receive(0, msg::MpiAbort{2, 7, ""}), dl::RemoteError);
  CHECK_THROWS_AS(f.router.receive(0, msg::MpiRefused{3, "PMIx"}), dl::RemoteError);
}

TEST_CASE("mpi router: a spawn on one host is launched there and its children become ranks", "[launcher][mpi]") {
  Fixture f;
  f.job->ranks = {{0, 1, 2, 3}, {}};
  f.router.receive(0, spawn(5, 1, 2));
  auto l = f.job->only_to<msg::SpawnLaunch>(0);
  CHECK(l.id == 5);
  CHECK(l.nspace == "dl-t.spawn1");
  CHECK_FALSE(l.elsewhere);
  REQUIRE(l.children.size() == 2);
  CHECK(f.job->added == std::vector<std::tuple<int, int, std::string>>{{0, 4, "spawn1:0"}, {0, 5, "spawn1:1"}});
  CHECK(f.router.describe(5) == "spawn1:1 (spawned by rank 1)");
  CHECK(f.job->teardowns == 0);
}

TEST_CASE("mpi router: a spawn waits until the parent's other hosts know the namespace", "[launcher][mpi]") {
  Fixture f;
  f.router.receive(0, spawn(9, 0, 1));
  // node 1 holds the parent's peers: told first, with `elsewhere`.
  auto known = f.job->only_to<msg::SpawnLaunch>(1);
  CHECK(known.elsewhere == std::optional<std::string>("node0"));
  f.router.receive(1, msg::SpawnKnown{known.nspace, std::nullopt});
  auto l = f.job->only_to<msg::SpawnLaunch>(0);
  CHECK(l.id == 9);
  CHECK_FALSE(l.elsewhere);
  // A second answer for the same namespace sends nothing more.
  f.router.receive(1, msg::SpawnKnown{known.nspace, std::nullopt});
  CHECK(f.job->sent.empty());
}

TEST_CASE("mpi router: a spawn while the job ends, or without room, is answered with an error", "[launcher][mpi]") {
  Fixture f;
  f.job->running = false;
  f.router.receive(0, spawn(1, 0, 1));
  auto r = f.job->only_to<msg::SpawnReply>(0);
  CHECK(r.id == 1);
  CHECK(r.error == std::optional<std::string>("the job is ending"));
  CHECK(f.job->teardowns == 0);

  f.job->running = true;
  f.router.receive(1, spawn(2, 3, 100));  // 8 slots, 2 in use
  auto full = f.job->only_to<msg::SpawnReply>(1);
  CHECK(full.id == 2);
  REQUIRE(full.error);
  CHECK(full.error->find("node1 has 6 free slots") != std::string::npos);
  CHECK(f.job->teardowns == 1);  // the first failure: the job's verdict
}

TEST_CASE("mpi router: a spawned rank's data is fetched from its host for the asking one", "[launcher][mpi]") {
  Fixture f;
  f.router.receive(1, msg::MpiDmodex{40, 1});
  auto serve = f.job->only_to<msg::MpiDmodexServe>(0);
  CHECK(serve.rank == 1);
  f.router.receive(0, msg::MpiDmodexData{serve.id, true, "abcd"});
  auto reply = f.job->only_to<msg::MpiDmodexReply>(1);
  CHECK(reply.id == 40);
  CHECK(reply.ok);
  CHECK(reply.blob == "abcd");
  // Its own rank, an unknown one, or a host gone: answered "no" at once.
  f.router.receive(0, msg::MpiDmodex{41, 0});
  CHECK_FALSE(f.job->only_to<msg::MpiDmodexReply>(0).ok);
  f.router.receive(0, msg::MpiDmodex{42, 99});
  CHECK(f.job->only_to<msg::MpiDmodexReply>(0).id == 42);
  f.job->up[0] = false;
  f.router.receive(1, msg::MpiDmodex{43, 1});
  CHECK_FALSE(f.job->only_to<msg::MpiDmodexReply>(1).ok);
}

TEST_CASE("mpi router: a name published on one host is looked up from another", "[launcher][mpi]") {
  Fixture f;
  f.router.receive(0, msg::MpiPublish{{msg::PublishedName{"svc", "port-1", "dl-t", 0}}, false});
  CHECK(f.job->sent.empty());
  f.router.receive(1, msg::MpiLookup{3, 2, {"svc"}, false, 0});
  auto reply = f.job->only_to<msg::MpiLookupReply>(1);
  CHECK(reply.id == 3);
  REQUIRE(reply.names.size() == 1);
  CHECK(reply.names[0].value == "port-1");
  f.router.receive(0, msg::MpiUnpublish{{"svc"}});
  f.router.receive(1, msg::MpiLookup{4, 2, {"svc"}, false, 0});
  CHECK(f.job->only_to<msg::MpiLookupReply>(1).error);
}

TEST_CASE("mpi router: a connect across hosts is answered on both once both asked", "[launcher][mpi]") {
  Fixture f;
  msg::MpiConnect c{7, "connect", {"dl-t:*"}, std::string("aa")};
  f.router.receive(0, c);
  CHECK(f.job->sent.empty());
  c.id = 8, c.blob = "bb";
  f.router.receive(1, c);
  REQUIRE(f.job->sent.size() == 2);
  std::map<int, msg::MpiConnectDone> done;
  for (auto& [node, m] : f.job->sent) done[node] = std::get<msg::MpiConnectDone>(m);
  CHECK(done.at(0).id == 7);
  CHECK(done.at(1).id == 8);
  CHECK(done.at(0).blob == std::optional<std::string>("aabb"));
  CHECK_FALSE(done.at(1).error);
  CHECK_THROWS_AS(f.router.receive(0, msg::MpiConnect{9, "connect", {"no-colon"}, std::nullopt}), dl::RemoteError);
  CHECK_THROWS_AS(f.router.receive(0, msg::MpiConnect{9, "merge", {"dl-t:0"}, std::nullopt}), dl::RemoteError);
}

TEST_CASE("mpi router: name service traffic outside an MPI job is refused", "[launcher][mpi]") {
  Fixture f;
  f.job->mpi = false;
  CHECK_THROWS_AS(f.router.receive(0, msg::MpiPublish{}), dl::RemoteError);
  CHECK_THROWS_AS(f.router.receive(0, msg::MpiLookup{1, 0, {"k"}, false, 0}), dl::RemoteError);
  CHECK(f.job->sent.empty());
}

TEST_CASE("mpi router: a connect a host never joins fails the job naming that host", "[launcher][mpi]") {
  boost::asio::io_context io;
  auto* job = new FakeJob;
  MpiRouter router{io, "dl-t", 4, std::chrono::milliseconds(20), std::unique_ptr<MpiRouter::JobPort>(job)};
  router.receive(0, msg::MpiConnect{7, "connect", {"dl-t:*"}, std::nullopt});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (job->teardowns == 0) {
    if (std::chrono::steady_clock::now() > deadline) FAIL("timed out after 10 s waiting for the connect's expiry");
    io.run_one_for(std::chrono::milliseconds(50));
  }
  CHECK(job->teardowns == 1);
  CHECK(job->verdicts.verdict().find("MPI connect of dl-t:* did not complete within 0.02 s (--fence-timeout): no "
                                     "request from node1") != std::string::npos);
  // The host that asked is answered with the error.
  REQUIRE(job->sent.size() == 1);
  CHECK(job->sent[0].first == 0);
  CHECK(std::get<msg::MpiConnectDone>(job->sent[0].second).error);
}
