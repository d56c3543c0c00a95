// The pure parts of per-node mode: where the nodes meet and who this node
// is (from options or another launcher's environment), and the world's
// placement from the nodes' records.
#include <catch2/catch.hpp>

#include "errors/error.h"
#include "launcher/node_group.h"
#include "launcher/options/options.h"
#include "wire/record.h"

using namespace dl::launcher;

namespace {
RunOptions parse(std::vector<std::string> args) {
  bool help = false;
  return parse_run_options(args, &help);
}
}  // namespace

TEST_CASE("rdzv target: tcp:// with --nnodes and --node-rank", "[launcher][per-node]") {
  auto o = parse({"--nnodes", "4", "--node-rank", "2", "--rdzv", "tcp://head:29400", "--nproc-per-node", "8", "./app"});
  CHECK(o.per_node == 8);
  auto t = rdzv_target(o, {});
  CHECK((t.host == "head" && t.port == 29400 && t.nnodes == 4 && t.node_rank == 2 && t.id == "default"));
  CHECK(rdzv_target(o, {{"SLURM_JOB_ID", "17"}, {"SLURM_STEP_ID", "3"}}).id == "17.3");
  o.rdzv_id = "mine";
  CHECK(rdzv_target(o, {{"SLURM_JOB_ID", "17"}}).id == "mine");
  auto v6 = parse({"--nnodes", "2", "--node-rank", "0", "--rdzv", "tcp://[fd00::1]:5000", "./app"});
  CHECK(rdzv_target(v6, {}).host == "fd00::1");
}

TEST_CASE("rdzv target: --rdzv env reads Slurm's, mpirun's and PMI's variables", "[launcher][per-node]") {
  auto o = parse({"--rdzv", "env", "--nproc-per-node", "4", "./app"});
  auto t = rdzv_target(o, {{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"},
                           {"SLURM_JOB_NODELIST", "gpu[07-10]"}, {"SLURM_JOB_ID", "99"}});
  CHECK((t.host == "gpu07" && t.port == 29400 && t.nnodes == 4 && t.node_rank == 2 && t.source == "Slurm" && t.id == "99"));
  t = rdzv_target(o, {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "3"}, {"MASTER_ADDR", "n0"}});
  CHECK((t.host == "n0" && t.nnodes == 3 && t.node_rank == 1 && t.source == "OpenMPI"));
  o.rdzv_port = 6000;
  CHECK(rdzv_target(o, {{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MASTER_ADDR", "h"}}).port == 6000);
}

TEST_CASE("rdzv target: contradictions and gaps are refused", "[launcher][per-node]") {
  auto o = parse({"--rdzv", "env", "./app"});
  CHECK_THROWS_WITH(rdzv_target(o, {}), Catch::Contains("SLURM_PROCID"));
  CHECK_THROWS_WITH(rdzv_target(o, {{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}), Catch::Contains("set MASTER_ADDR"));
  CHECK_THROWS_WITH(rdzv_target(o, {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                                    {"SLURM_JOB_NODELIST", "a"}}),
                    Catch::Contains("needs one per node (srun --ntasks-per-node=1"));
  CHECK_THROWS_WITH(rdzv_target(o, {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"MASTER_ADDR", "a"}}),
                    Catch::Contains("needs one per node"));
  auto four = parse({"--rdzv", "env", "--nnodes", "4", "./app"});
  CHECK_THROWS_WITH(rdzv_target(four, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "a"}}),
                    Catch::Contains("--nnodes 4 contradicts Slurm"));
  CHECK_THROWS_WITH(parse({"--nnodes", "2", "./app"}), Catch::Contains("need --rdzv"));
  CHECK_THROWS_WITH(parse({"--nnodes", "2", "--node-rank", "2", "--rdzv", "tcp://h:1", "./app"}),
                    Catch::Contains("--node-rank must be in 0..1"));
  CHECK_THROWS_WITH(parse({"--rdzv", "tcp://h:1", "--node-rank", "0", "./app"}), Catch::Contains("needs --nnodes"));
  CHECK_THROWS_WITH(parse({"--rdzv", "udp://h:1", "--nnodes", "1", "--node-rank", "0", "./app"}),
                    Catch::Contains("tcp://HOST:PORT or env"));
  // The address is checked where the options are parsed, before any node waits for this one.
  CHECK_THROWS_WITH(parse({"--rdzv", "tcp://h", "--nnodes", "2", "--node-rank", "0", "./app"}),
                    Catch::Contains("--rdzv: expected host:port"));
  CHECK_THROWS_WITH(parse({"--rdzv", "env", "-n", "8", "./app"}), Catch::Contains("--nproc-per-node P, not -n"));
  CHECK_THROWS_WITH(parse({"--rdzv", "env", "--hostfile", "h", "./app"}), Catch::Contains("drop --hostfile"));
  CHECK_THROWS_AS(rdzv_target(parse({"--nnodes", "1", "--node-rank", "0", "--rdzv", "tcp://nohost", "./app"}), {}),
                  dl::UsageError);
}

TEST_CASE("world placement: node K's ranks follow node K-1's, local ranks dense", "[launcher][per-node]") {
  std::vector<NodeRecord> nodes(3);
  nodes[0].host = "a", nodes[0].nproc = 2;
  nodes[1].host = "b", nodes[1].nproc = 3;
  nodes[2].host = "c", nodes[2].nproc = 1;
  auto p = world_placement(nodes);
  REQUIRE(p.ranks.size() == 6);
  CHECK(p.local_size == std::vector<int>{2, 3, 1});
  CHECK(p.nodes[1].host == "b");
  CHECK((p.ranks[2].node == 1 && p.ranks[2].local_rank == 0 && p.ranks[4].local_rank == 2 && p.ranks[5].node == 2));
  for (size_t r = 0; r < p.ranks.size(); ++r) CHECK(p.ranks[r].rank == static_cast<int>(r));
}

TEST_CASE("node records survive the store as JSON", "[launcher][per-node]") {
  NodeRecord r{3, "node07", "10.0.0.7", 8, 0, 4242, "m1/b1/net:7"};
  NodeRecord back = node_record_from_json(to_json(r));
  CHECK((back.node_rank == 3 && back.host == "node07" && back.addr == "10.0.0.7" && back.nproc == 8 && back.pid == 4242));
  CHECK(back.machine == "m1/b1/net:7");
  // A node of an older dlaunch says nothing of its machine.
  CHECK_FALSE(node_record_from_json(R"({"node_rank":1,"host":"h","addr":"a","nproc":1,"master_port":0,"pid":2})").machine);
}

TEST_CASE("per-node: a node record that is not one is refused naming the field", "[launcher][per-node]") {
  CHECK_THROWS_MATCHES(node_record_from_json(R"({"node_rank":1,"host":"h","addr":"a","master_port":0,"pid":2})"),
                       dl::wire::RecordError,
                       Catch::Message("the rendezvous' node record: field 'nproc' is missing"));
  CHECK_THROWS_MATCHES(
      node_record_from_json(R"({"node_rank":"1","host":"h","addr":"a","nproc":1,"master_port":0,"pid":2})"),
      dl::wire::RecordError,
      Catch::Message("the rendezvous' node record: field 'node_rank' is a string, expected an integer"));
  CHECK_THROWS_MATCHES(node_record_from_json("garbage"), dl::wire::RecordError,
                       Catch::Message("the rendezvous' node record is not valid JSON"));
}

TEST_CASE("per-node: a failure record carries its code and verdict and an unreadable one is still a failure",
          "[launcher][per-node]") {
  const FailedRecord f = failed_record_from_json(to_json(FailedRecord{124, "node rank 3 did not arrive"}));
  CHECK(f.code == 124);
  CHECK(f.verdict == "node rank 3 did not arrive");
  const FailedRecord bad = failed_record_from_json(R"({"code":2})");
  CHECK(bad.code == 1);
  CHECK(bad.verdict == "another node failed, and the rendezvous' failure record: field 'verdict' is missing");
}

TEST_CASE("per-node: node ranks on one machine are named with what it costs, machines of their own say nothing",
          "[launcher][per-node]") {
  std::vector<NodeRecord> nodes = {{0, "gpu1", "a", 4, 0, 1, "m1"}, {1, "gpu2", "b", 4, 0, 2, "m2"},
                                   {2, "gpu1", "a", 4, 0, 3, "m1"}, {3, "old", "c", 4, 0, 4, ""}};
  const std::string w = same_machine_warning(nodes);
  CHECK(w == "dlaunch: warning: node ranks 0 and 2 run on one machine (gpu1): their ranks share LOCAL_RANK values, so "
             "`cuda:LOCAL_RANK` puts two ranks on one GPU; run one dlaunch per machine, with --nproc-per-node for all "
             "of its ranks\n");
  nodes[2].machine = "m3";
  CHECK(same_machine_warning(nodes).empty());
}

TEST_CASE("per-node: the store's schema, key by key, under the rendezvous' id", "[launcher][per-node]") {
  // Nodes of one job may run different builds' keys only if these stay as they are.
  const RdzvKeys k("17.3");
  CHECK(k.nnodes() == "dlaunch/rdzv/17.3/nnodes");
  CHECK(k.node(2) == "dlaunch/rdzv/17.3/node/2");
  CHECK(k.nodes(2) == std::vector<std::string>{"dlaunch/rdzv/17.3/node/0", "dlaunch/rdzv/17.3/node/1"});
  CHECK(k.arrived() == "dlaunch/rdzv/17.3/arrived");
  CHECK(k.job_id() == "dlaunch/rdzv/17.3/job_id");
  CHECK(k.failed(0) == "dlaunch/rdzv/17.3/failed");
  CHECK(k.failed(2) == "dlaunch/rdzv/17.3/failed/2");
  CHECK(k.ready(1, 3) == "dlaunch/rdzv/17.3/restart/1/ready/3");
  CHECK(k.ready_all(1, 2) ==
        std::vector<std::string>{"dlaunch/rdzv/17.3/restart/1/ready/0", "dlaunch/rdzv/17.3/restart/1/ready/1"});
  CHECK(k.restart_port(1) == "dlaunch/rdzv/17.3/restart/1/port");
  CHECK(k.abandon(4) == "dlaunch/rdzv/17.3/restart/4/abandon");
  CHECK(k.heartbeat(0) == "dlaunch/rdzv/17.3/hb/0");
  CHECK(k.done() == "dlaunch/rdzv/17.3/done");
  CHECK(RdzvKeys("a").node(0) != RdzvKeys("b").node(0));
}
