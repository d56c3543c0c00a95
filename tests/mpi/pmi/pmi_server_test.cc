// The PMI server's handler (mpi/pmi/pmi_server.h) without sockets: the
// requests MPICH's PMI-1 and PMI-2 clients send at MPI_Init and MPI_Finalize,
// answered as Hydra's proxy answers them; a fence across two "hosts" (two
// servers, the launcher's relay played by the test); errors for what is not
// served and for garbage.
#include <catch2/catch.hpp>

#include <map>

#include "mpi/pmi/pmi_server.h"

using namespace dl::mpi::pmi;

namespace {

// One host's server and everything it said.
struct Host {
  std::map<int, std::string> out;  // replies by rank
  std::vector<std::pair<uint64_t, std::string>> fences;
  std::vector<std::tuple<int, int, std::string>> aborts;
  std::vector<std::string> warnings;
  std::vector<int> closed;
  PmiServer server;
  Host(std::vector<int> ranks, int node, std::vector<std::vector<int>> all, bool serve = true)
      : server(make_job(std::move(ranks), node, std::move(all), serve),
               PmiServer::Hooks{[this](int r, std::string b) { out[r] += b; },
                                [this](int r) { closed.push_back(r); },
                                [this](uint64_t id, std::string blob) { fences.emplace_back(id, blob); },
                                [this](int r, int s, std::string m) { aborts.emplace_back(r, s, m); },
                                [this](const std::string& l) { warnings.push_back(l); }}) {}
  static PmiJob make_job(std::vector<int> ranks, int node, std::vector<std::vector<int>> all, bool serve) {
    PmiJob j;
    j.map.nspace = "dl-job";
    j.map.world_size = 0;
    for (auto& r : all) j.map.world_size += static_cast<int>(r.size());
    j.map.universe_size = j.map.world_size;
    j.map.node_rank = node;
    for (size_t n = 0; n < all.size(); ++n) j.map.node_hosts.push_back("h" + std::to_string(n));
    j.map.node_ranks = all;
    j.map.node_ranks.at(static_cast<size_t>(node)) = std::move(ranks);
    j.process_mapping = process_mapping(all);
    j.serve = serve;
    return j;
  }
  // Sends `req` as rank `r` and returns (and forgets) what it was answered.
  std::string ask(int r, const std::string& req) {
    out[r].clear();
    server.on_bytes(r, req);
    return out[r];
  }
};

}  // namespace

TEST_CASE("pmi server: MPICH 4.0's PMI-1 start-up, as Hydra answers it", "[mpich][pmi]") {
  Host h({0, 1}, 0, {{0, 1}});
  CHECK(h.ask(0, "cmd=init pmi_version=1 pmi_subversion=1\n") ==
        "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n");
  CHECK(h.ask(0, "cmd=get_maxes\n") == "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n");
  CHECK(h.ask(0, "cmd=get_appnum\n") == "cmd=appnum appnum=0\n");
  CHECK(h.ask(0, "cmd=get_my_kvsname\n") == "cmd=my_kvsname kvsname=dl-job\n");
  CHECK(h.ask(0, "cmd=get_universe_size\n") == "cmd=universe_size size=2\n");
  CHECK(h.ask(0, "cmd=get kvsname=dl-job key=PMI_process_mapping\n") ==
        "cmd=get_result rc=0 msg=success value=(vector,(0,1,2))\n");
  CHECK(h.ask(0, "cmd=put kvsname=dl-job key=bc-0 value=card0\n") == "cmd=put_result rc=0 msg=success\n");
  // Not visible before the fence.
  CHECK(h.ask(0, "cmd=get kvsname=dl-job key=bc-0\n") == "cmd=get_result rc=-1 msg=key_bc-0_not_found\n");
  CHECK(h.ask(1, "cmd=put kvsname=dl-job key=bc-1 value=card1\n") == "cmd=put_result rc=0 msg=success\n");
  // A put in another kvs is refused.
  CHECK(h.ask(1, "cmd=put kvsname=other key=x value=y\n") == "cmd=put_result rc=-1 msg=unknown_kvsname_other\n");
  // The fence: rank 0 waits, rank 1 completes this host's part.
  CHECK(h.ask(0, "cmd=barrier_in\n") == "");
  CHECK(h.fences.empty());
  CHECK(h.ask(1, "cmd=barrier_in\n") == "");
  REQUIRE(h.fences.size() == 1);
  CHECK(h.fences[0].first == (kFenceIdBit | 0));
  CHECK(decode_puts(h.fences[0].second) ==
        std::vector<std::pair<std::string, std::string>>{{"bc-0", "card0"}, {"bc-1", "card1"}});
  h.server.fence_done(h.fences[0].first, h.fences[0].second);
  CHECK(h.out[0] == "cmd=barrier_out\n");
  CHECK(h.out[1] == "cmd=barrier_out\n");
  CHECK(h.ask(1, "cmd=get kvsname=dl-job key=bc-0\n") == "cmd=get_result rc=0 msg=success value=card0\n");
  CHECK(h.ask(0, "cmd=finalize\n") == "cmd=finalize_ack\n");
  CHECK(h.server.fences_done() == 1);
  CHECK(h.warnings.empty());
}

TEST_CASE("pmi server: a fence spans hosts, one contribution per host", "[mpich][pmi]") {
  const std::vector<std::vector<int>> all = {{0, 1}, {2, 3}};
  Host a({0, 1}, 0, all), b({2, 3}, 1, all);
  for (int r : {0, 1}) a.ask(r, "cmd=put kvsname=dl-job key=k" + std::to_string(r) + " value=v" + std::to_string(r) + "\n");
  for (int r : {2, 3}) b.ask(r, "cmd=put kvsname=dl-job key=k" + std::to_string(r) + " value=v" + std::to_string(r) + "\n");
  for (int round = 0; round < 2; ++round) {
    for (int r : {0, 1}) a.ask(r, "cmd=barrier_in\n");
    for (int r : {2, 3}) b.ask(r, "cmd=barrier_in\n");
    REQUIRE(a.fences.size() == 1);
    REQUIRE(b.fences.size() == 1);
    CHECK(a.fences[0].first == b.fences[0].first);  // the k-th fence of every host is the same fence
    CHECK(a.fences[0].first == (kFenceIdBit | static_cast<uint64_t>(round)));
    const std::string all_blobs = a.fences[0].second + b.fences[0].second;  // the relay, node order
    a.server.fence_done(a.fences[0].first, all_blobs);
    b.server.fence_done(b.fences[0].first, all_blobs);
    a.fences.clear(), b.fences.clear();
    for (int r : {0, 1}) CHECK(a.out[r] == "cmd=barrier_out\n");
    for (int r : {2, 3}) CHECK(b.out[r] == "cmd=barrier_out\n");
  }
  // Every host sees every host's puts.
  CHECK(a.ask(0, "cmd=get kvsname=dl-job key=k3\n") == "cmd=get_result rc=0 msg=success value=v3\n");
  CHECK(b.ask(2, "cmd=get kvsname=dl-job key=k1\n") == "cmd=get_result rc=0 msg=success value=v1\n");
  CHECK(b.ask(2, "cmd=get kvsname=dl-job key=PMI_process_mapping\n") ==
        "cmd=get_result rc=0 msg=success value=(vector,(0,2,2))\n");
}

TEST_CASE("pmi server: a failed fence fails the ranks' waits", "[mpich][pmi]") {
  Host h({0, 1}, 0, {{0, 1}, {2}});
  h.ask(0, "cmd=barrier_in\n");
  h.ask(1, encode(2, "kvs-fence", {{"thrid", "0x7f00aa"}}));
  REQUIRE(h.fences.size() == 1);
  h.server.fence_failed(h.fences[0].first, "h1 (ranks 2)");
  CHECK_THAT(h.out[0], Catch::StartsWith("cmd=barrier_failed rc=-1 msg=fence_failed:_h1_(ranks_2)"));
  CHECK_THAT(h.out[1], Catch::Contains("cmd=kvs-fence-response;thrid=0x7f00aa;rc=-1;errmsg=fence failed: h1 (ranks 2);"));
}

TEST_CASE("pmi server: MPICH's PMI-2 start-up and node attributes", "[mpich][pmi]") {
  Host h({4, 5}, 1, {{0, 1, 2, 3}, {4, 5}});
  // A PMI-2 client opens with a PMI-1 init asking for version 2.
  CHECK(h.ask(4, "cmd=init pmi_version=2 pmi_subversion=0\n") ==
        "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n");
  CHECK(h.ask(4, encode(2, "fullinit", {{"pmirank", "4"}, {"threaded", "FALSE"}})) ==
        encode(2, "fullinit-response", {{"pmi-version", "2"}, {"pmi-subversion", "0"}, {"rank", "4"}, {"size", "6"},
                                         {"appnum", "0"}, {"debugged", "FALSE"}, {"pmiverbose", "FALSE"}, {"rc", "0"}}));
  // A rank claiming another's identity is refused.
  CHECK_THAT(h.ask(5, encode(2, "fullinit", {{"pmirank", "4"}})), Catch::Contains("rc=-1;"));
  CHECK(h.ask(4, encode(2, "job-getid", {{"thrid", "0x1"}})) ==
        encode(2, "job-getid-response", {{"thrid", "0x1"}, {"jobid", "dl-job"}, {"rc", "0"}}));
  CHECK(h.ask(4, encode(2, "info-getjobattr", {{"key", "PMI_process_mapping"}})) ==
        encode(2, "info-getjobattr-response", {{"found", "TRUE"}, {"value", "(vector,(0,1,4),(1,1,2))"}, {"rc", "0"}}));
  CHECK(h.ask(4, encode(2, "info-getjobattr", {{"key", "universeSize"}})) ==
        encode(2, "info-getjobattr-response", {{"found", "TRUE"}, {"value", "6"}, {"rc", "0"}}));
  CHECK(h.ask(4, encode(2, "info-getjobattr", {{"key", "nope"}})) ==
        encode(2, "info-getjobattr-response", {{"found", "FALSE"}, {"rc", "0"}}));
  // A node attribute waited for is answered when another local rank puts it.
  CHECK(h.ask(5, encode(2, "info-getnodeattr", {{"key", "shm"}, {"wait", "TRUE"}, {"thrid", "0x9"}})) == "");
  CHECK(h.ask(4, encode(2, "info-getnodeattr", {{"key", "shm"}, {"wait", "FALSE"}})) ==
        encode(2, "info-getnodeattr-response", {{"found", "FALSE"}, {"rc", "0"}}));
  CHECK(h.ask(4, encode(2, "info-putnodeattr", {{"key", "shm"}, {"value", "/dev/shm/x"}})) ==
        encode(2, "info-putnodeattr-response", {{"rc", "0"}}));
  CHECK(h.out[5] == encode(2, "info-getnodeattr-response",
                           {{"thrid", "0x9"}, {"found", "TRUE"}, {"value", "/dev/shm/x"}, {"rc", "0"}}));
  // kvs-put / fence / get.
  CHECK(h.ask(4, encode(2, "kvs-put", {{"key", "bc-4"}, {"value", "c4"}})) == encode(2, "kvs-put-response", {{"rc", "0"}}));
  h.ask(4, encode(2, "kvs-fence", {}));
  h.ask(5, encode(2, "kvs-fence", {}));
  REQUIRE(h.fences.size() == 1);
  h.server.fence_done(h.fences[0].first, encode_puts({{"bc-0", "c0"}}) + h.fences[0].second);
  CHECK(h.out[4] == encode(2, "kvs-fence-response", {{"rc", "0"}}));
  CHECK(h.ask(5, encode(2, "kvs-get", {{"jobid", "dl-job"}, {"srcid", "-1"}, {"key", "bc-0"}})) ==
        encode(2, "kvs-get-response", {{"found", "TRUE"}, {"value", "c0"}, {"rc", "0"}}));
  CHECK(h.ask(5, encode(2, "kvs-get", {{"key", "zz"}})) == encode(2, "kvs-get-response", {{"found", "FALSE"}, {"rc", "0"}}));
  CHECK(h.ask(5, encode(2, "finalize", {})) == encode(2, "finalize-response", {{"rc", "0"}}));
}

TEST_CASE("pmi server: MPMD app numbers (dlaunch -n 1 a : -n 2 b)", "[mpich][pmi]") {
  Host h({0, 1, 2}, 0, {{0, 1, 2}});
  // (Host builds its job without apps: give it two, as the launch message would.)
  PmiJob j = Host::make_job({0, 1, 2}, 0, {{0, 1, 2}}, true);
  j.map.app_sizes = {1, 2};
  CHECK(dl::mpi::app_of(j.map, 0) == 0);
  CHECK(dl::mpi::app_of(j.map, 1) == 1);
  CHECK(dl::mpi::app_of(j.map, 2) == 1);
  std::string out;
  PmiServer s(j, PmiServer::Hooks{[&](int, std::string b) { out += b; }, [](int) {}, [](uint64_t, std::string) {},
                                  [](int, int, std::string) {}, [](const std::string&) {}});
  s.on_bytes(2, "cmd=get_appnum\n");
  CHECK(out == "cmd=appnum appnum=1\n");
  CHECK(h.ask(2, "cmd=get_appnum\n") == "cmd=appnum appnum=0\n");  // one app
}

TEST_CASE("pmi server: MPI_Abort through PMI-1 and PMI-2 reaches the hook with its code", "[mpich][pmi]") {
  Host h({0, 1}, 0, {{0, 1}});
  h.ask(1, "cmd=abort exitcode=13\n");
  h.ask(0, encode(2, "abort", {{"isworld", "TRUE"}, {"msg", "application called MPI_Abort(MPI_COMM_WORLD, 9) - process 0"}}));
  REQUIRE(h.aborts.size() == 2);
  CHECK(std::get<0>(h.aborts[0]) == 1);
  CHECK(std::get<1>(h.aborts[0]) == 13);
  CHECK(std::get<0>(h.aborts[1]) == 0);
  CHECK(std::get<1>(h.aborts[1]) == 9);
  CHECK_THAT(std::get<2>(h.aborts[1]), Catch::Contains("MPI_Abort(MPI_COMM_WORLD, 9)"));
}

TEST_CASE("pmi server: what is not served is an error that names it", "[mpich][pmi]") {
  Host h({0}, 0, {{0}});
  CHECK_THAT(h.ask(0, "mcmd=spawn\nnprocs=1\nexecname=./a\nendcmd\n"), Catch::StartsWith("cmd=spawn_result rc=-1"));
  CHECK_THAT(h.ask(0, "cmd=publish_name service=s port=p\n"), Catch::StartsWith("cmd=publish_result rc=-1"));
  CHECK_THAT(h.ask(0, "cmd=lookup_name service=s\n"), Catch::StartsWith("cmd=lookup_result rc=-1"));
  CHECK_THAT(h.ask(0, "cmd=get_ranks2hosts\n"), Catch::StartsWith("cmd=get_ranks2hosts_result rc=-1"));
  CHECK_THAT(h.ask(0, encode(2, "spawn", {{"ncmds", "1"}})), Catch::Contains("cmd=spawn-response;rc=-1;errmsg="));
  std::string all;
  for (auto& w : h.warnings) all += w + "\n";
  CHECK_THAT(all, Catch::Contains("MPI_Comm_spawn") && Catch::Contains("'get_ranks2hosts'") &&
                      Catch::Contains("MPI_Publish_name"));
}

TEST_CASE("pmi server: garbage is answered with an error, never a crash", "[mpich][pmi]") {
  Host h({0, 1}, 0, {{0, 1}});
  CHECK_THAT(h.ask(0, "cmd=put kvsname\n"), Catch::StartsWith("cmd=error rc=-1 msg=expected_key=value"));
  // The connection goes on after a bad line.
  CHECK(h.ask(0, "cmd=get_appnum\n") == "cmd=appnum appnum=0\n");
  // A stream that is neither wire is answered once, then closed.
  CHECK_THAT(h.ask(1, "GET / HTTP/1.1\r\n"), Catch::Contains("rc=-1"));
  CHECK(h.closed == std::vector<int>{1});
  CHECK(h.ask(1, "cmd=get_appnum\n") == "");  // nothing more is read from it
  // A second barrier_in from a rank already in the fence.
  h.ask(0, "cmd=barrier_in\n");
  CHECK_THAT(h.ask(0, "cmd=barrier_in\n"), Catch::StartsWith("cmd=barrier_out rc=-1"));
  // A fence result for no fence, or a truncated one, is named, not trusted.
  h.server.fence_done(kFenceIdBit | 7, "");
  CHECK_THAT(h.warnings.back(), Catch::Contains("unexpected fence 7"));
  h.ask(1, "");  // (rank 1's socket is closed)
  REQUIRE(h.fences.size() == 0);  // rank 1 never joined: this host has not contributed
  Host g({0}, 0, {{0}});
  g.ask(0, "cmd=barrier_in\n");
  REQUIRE(g.fences.size() == 1);
  g.server.fence_done(g.fences[0].first, std::string("\0\0\0\x09" "ab", 6));
  CHECK_THAT(g.out[0], Catch::StartsWith("cmd=barrier_failed rc=-1"));
  CHECK_THAT(g.warnings.back(), Catch::Contains("truncated"));
}

TEST_CASE("pmi server: --mpi pmix refuses a PMI client with a message, not a singleton", "[mpich][pmi]") {
  Host h({0}, 0, {{0}}, /*serve=*/false);
  CHECK(h.ask(0, "cmd=init pmi_version=1 pmi_subversion=1\n") ==
        "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n");
  CHECK(h.closed.empty());  // MPICH answers with an abort: it must not get SIGPIPE
  CHECK(h.ask(0, "cmd=abort exitcode=-1\n") == "");
  REQUIRE(h.aborts.size() == 1);  // the job's verdict, exit code 1
  CHECK(std::get<1>(h.aborts[0]) == 1);
  CHECK(h.ask(0, "cmd=get_maxes\n") == "");  // anything else: closed
  CHECK(h.closed == std::vector<int>{0});
  REQUIRE(h.warnings.size() == 1);
  CHECK_THAT(h.warnings[0], Catch::Contains("speaks PMI") && Catch::Contains("--mpi pmix") &&
                                Catch::Contains("--mpi pmi or --mpi auto"));
}
