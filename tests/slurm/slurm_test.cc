// dlaunch under a real Slurm (tests/slurm/slurm_cluster.sh): 4 compute nodes
// of 2 CPUs, the login node h0 running salloc. Each test brings its own
// cluster up (about 2 s) so tests run in parallel; each checks with ps in
// every namespace that nothing of its job is left.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <signal.h>
#include <sys/stat.h>

#include "tests/multihost/multihost_util.h"
#include "tests/slurm/slurm_fixture.h"

using dl::slurm_test::SlurmCluster;
using namespace dl::multihost;
using namespace std::chrono_literals;

namespace {

// Prints one "id RANK host SLURM_PROCID LOCAL_RANK SLURM_LOCALID grandparent" line per rank:
// the grandparent is what started the rank's agent (slurmstepd under srun).
const std::string kShow =
    "sh -c 'echo id $RANK $(hostname) $SLURM_PROCID $LOCAL_RANK $SLURM_LOCALID $(cat /proc/$(cut -d\" \" -f4 /proc/$PPID/stat)/comm)'";

struct Row {
  int rank;
  std::string host, procid, local, slurm_local, grandparent;
};

std::vector<Row> rows_of(const std::string& out) {
  std::vector<Row> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find("id ");  // after --tag-output's "[rank@host] "
    if (at == std::string::npos) continue;
    std::istringstream w(line.substr(at));
    std::string tag;
    Row r;
    if (w >> tag >> r.rank >> r.host >> r.procid >> r.local >> r.slurm_local >> r.grandparent && tag == "id") rows.push_back(r);
  }
  return rows;
}

// 8 ranks, 2 on each compute node, each SLURM_PROCID its RANK; agents on the
// nodes other than `forked_on` started by srun (their parent is slurmstepd).
void check_two_per_node(const std::string& out, const std::string& forked_on = "") {
  const auto rows = rows_of(out);
  REQUIRE(rows.size() == 8);
  std::map<std::string, int> per_host;
  std::set<int> ranks;
  for (const auto& r : rows) {
    INFO("rank " << r.rank << " on " << r.host);
    ++per_host[r.host];
    ranks.insert(r.rank);
    CHECK(r.procid == std::to_string(r.rank));
    CHECK(r.slurm_local == r.local);
    if (r.host != forked_on) CHECK(r.grandparent == "slurmstepd");
  }
  CHECK(ranks.size() == 8);
  CHECK(per_host == std::map<std::string, int>{{"h1", 2}, {"h2", 2}, {"h3", 2}, {"h4", 2}});
}

std::string dlaunch() { return bin("dlaunch"); }

// Nothing of a job left in any namespace: its marker, agents, dlaunch, srun
// steps, and slurmctld knows no running job.
void check_clean(const SlurmCluster& s, const std::string& mark) {
  CHECK(wait_clean(s.cluster(), mark, 15s) == "");
  for (const auto& h : s.cluster().hosts()) {
    INFO("host " << h);
    CHECK(pids_matching(s.cluster(), h, "srun").empty());
  }
  std::string jobs;
  for (int i = 0; i < 100 && !(jobs = s.active_jobs()).empty(); ++i) std::this_thread::sleep_for(100ms);
  CHECK(jobs == "");
}

int count(const std::string& text, const std::string& needle) {
  int c = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++c;
  return c;
}

}  // namespace

TEST_CASE("slurm: salloc -N4 dlaunch -n 8 reads the allocation and starts the agents with srun", "[slurm][cluster]") {
  SlurmCluster s(4);
  const std::string mark = unique_marker();
  auto r = s.run_login("salloc -N4 -K " + dlaunch() + " -v -n 8 --tag-output " + kShow + " " + mark, 60s);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("dlaunch: hosts from the allocation of Slurm job ") != std::string::npos);
  CHECK(r.output.find("SLURM_JOB_NODELIST=h[1-4], SLURM_JOB_CPUS_PER_NODE=2(x4)") != std::string::npos);
  CHECK(r.output.find("dlaunch: agents on other hosts start by --launcher slurm (auto: inside Slurm job ") !=
        std::string::npos);
  check_two_per_node(r.output);
  check_clean(s, mark);
}

TEST_CASE("slurm: --launcher-exec wraps srun, and the job token is on no command line", "[slurm][cluster]") {
  SlurmCluster s(4);
  const std::string mark = unique_marker();
  // A wrapper that records the command line it was given, then runs srun with it.
  const std::string wrapper = s.cluster().dir() + "/srun-wrapper-" + mark;
  const std::string argv_file = wrapper + ".argv";
  std::ofstream(wrapper) << "#!/bin/sh\necho \"$@\" >" << argv_file << "\nexec srun \"$@\"\n";
  ::chmod(wrapper.c_str(), 0755);
  auto r = s.run_login("salloc -N4 -K " + dlaunch() + " -n 8 --launcher slurm --launcher-exec '" + wrapper +
                           " --job-name=agents-" + mark + "' sh -c 'echo tok $DLAUNCH_TOKEN'",
                       60s);
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::ifstream in(argv_file);
  const std::string argv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO("srun's command line: " << argv);
  CHECK(argv.find("--job-name=agents-" + mark + " --nodes=4 --ntasks=4 --ntasks-per-node=1") == 0);
  CHECK(argv.find("dlaunch-agent --connect ") != std::string::npos);
  CHECK(argv.find("--node-names h1,h2,h3,h4") != std::string::npos);
  // Every rank saw the one token, and srun's command line did not.
  std::set<std::string> tokens;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("tok ", 0) == 0) tokens.insert(line.substr(4));
  REQUIRE(tokens.size() == 1);
  const std::string token = *tokens.begin();
  CHECK(token.size() >= 32);
  CHECK(argv.find(token) == std::string::npos);
  check_clean(s, mark);
}

TEST_CASE("slurm: sbatch of dlaunch -n 8 runs 2 ranks per node, the batch node's agent forked", "[slurm][cluster]") {
  SlurmCluster s(4);
  const std::string mark = unique_marker();
  const std::string out = s.cluster().dir() + "/sbatch-" + mark + ".out";
  const std::string script = s.cluster().dir() + "/sbatch-" + mark + ".sh";
  std::ofstream(script) << "#!/bin/sh\nexec " << dlaunch() << " -n 8 " << kShow << " " << mark << "\n";
  auto r = s.run_login("sbatch -N4 --wait -o " + out + " " + script + "; echo sbatch=$?; cat " + out, 90s);
  INFO(r.output);
  CHECK(r.output.find("sbatch=0") != std::string::npos);
  // The batch script runs on the first node, h1: its agent is forked there.
  check_two_per_node(r.output, "h1");
  check_clean(s, mark);
}

TEST_CASE("slurm: scancel of a running dlaunch job leaves nothing on any node", "[slurm][cluster]") {
  SlurmCluster s(4);
  const std::string mark = unique_marker();
  auto job = std::async(std::launch::async, [&] {
    return s.run_login("salloc -N4 -K -J dl" + mark + " " + dlaunch() + " -n 8 sleep " + mark, 60s);
  });
  // Every compute node runs its 2 ranks.
  bool running = false;
  for (int i = 0; i < 200 && !running; ++i) {
    running = true;
    for (int k = 1; k <= 4; ++k) running = running && pids_matching(s.cluster(), "h" + std::to_string(k), "sleep " + mark).size() == 2;
    if (!running) std::this_thread::sleep_for(100ms);
  }
  REQUIRE(running);
  auto cancel = s.run_login("scancel -n dl" + mark, 20s);
  CHECK(cancel.status == 0);
  auto r = job.get();
  INFO(r.output);
  CHECK(r.status != 0);
  check_clean(s, mark);
}

TEST_CASE("slurm: a SIGKILLed dlaunch leaves no agent, rank or srun behind", "[slurm][cluster]") {
  SlurmCluster s(4);
  const std::string mark = unique_marker();
  auto job = std::async(std::launch::async, [&] {
    return s.run_login("salloc -N4 -K " + dlaunch() + " -n 8 sleep " + mark, 60s);
  });
  bool running = false;
  for (int i = 0; i < 200 && !running; ++i) {
    running = true;
    for (int k = 1; k <= 4; ++k) running = running && pids_matching(s.cluster(), "h" + std::to_string(k), "sleep " + mark).size() == 2;
    if (!running) std::this_thread::sleep_for(100ms);
  }
  REQUIRE(running);
  const int launcher = launcher_pid(mark);
  REQUIRE(launcher > 0);
  ::kill(launcher, SIGKILL);
  auto r = job.get();
  INFO(r.output);
  check_clean(s, mark);
}

TEST_CASE("slurm: a node that dies mid-job ends the job, naming it, and nothing is left on the others", "[slurm][cluster]") {
  SlurmCluster s(4);
  const std::string mark = unique_marker();
  auto job = std::async(std::launch::async, [&] {
    return s.run_login("salloc -N4 -K " + dlaunch() + " -n 8 --heartbeat-timeout 3 sleep " + mark, 60s);
  });
  bool running = false;
  for (int i = 0; i < 200 && !running; ++i) {
    running = pids_matching(s.cluster(), "h3", "sleep " + mark).size() == 2 &&
              pids_matching(s.cluster(), "h4", "sleep " + mark).size() == 2;
    if (!running) std::this_thread::sleep_for(100ms);
  }
  REQUIRE(running);
  CHECK(s.script("kill-node", "h3").status == 0);
  auto r = job.get();
  INFO(r.output);
  CHECK(r.status != 0);
  // Its agent went silent (the cable went first): the heartbeat names it.
  CHECK(r.output.find("dlaunch: lost the agent on h3") != std::string::npos);
  check_clean(s, mark);
}

TEST_CASE("slurm: a host whose agent cannot start names itself", "[slurm][cluster]") {
  SlurmCluster s(4);
  const std::string mark = unique_marker();
  auto r = s.run_login("salloc -N4 -K " + dlaunch() + " -n 8 --prefix /nonexistent-" + mark + " true", 60s);
  INFO(r.output);
  CHECK(r.status != 0);
  for (const char* h : {"h1", "h2", "h3", "h4"}) {
    CHECK(r.output.find(std::string("error: ") + h + ": srun ") != std::string::npos);
    CHECK(r.output.find(std::string("slurmstepd-") + h + ": error: execve(): /nonexistent-" + mark) != std::string::npos);
  }
  CHECK(r.output.find("pass --prefix DIR") != std::string::npos);
  check_clean(s, mark);
}

TEST_CASE("slurm: a hostfile naming a host outside the allocation is refused", "[slurm][cluster]") {
  SlurmCluster s(4);
  auto r = s.run_login("salloc -N2 -K " + dlaunch() + " -H h1,h3 true", 30s);
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("-H names 'h3', which is not a host of Slurm job") != std::string::npos);
  CHECK(r.output.find("(its hosts: h1, h2)") != std::string::npos);
}

TEST_CASE("slurm: per-node mode under real srun, ranks' SLURM_PROCID agrees with RANK", "[slurm][cluster]") {
  SlurmCluster s(4);
  const std::string mark = unique_marker();
  // Every node's dlaunch needs the job's one token, from the environment srun passes on.
  auto r = s.run_login("export DLAUNCH_TOKEN=$(" + dlaunch() + " token); salloc -N4 -K srun -N4 --ntasks-per-node=1 " + dlaunch() +
                           " --rdzv env --nproc-per-node 2 --tag-output " + kShow + " " + mark,
                       60s);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto rows = rows_of(r.output);
  REQUIRE(rows.size() == 8);
  std::map<std::string, int> per_host;
  for (const auto& row : rows) {
    ++per_host[row.host];
    CHECK(row.procid == std::to_string(row.rank));
    CHECK(row.slurm_local == row.local);
  }
  CHECK(per_host == std::map<std::string, int>{{"h1", 2}, {"h2", 2}, {"h3", 2}, {"h4", 2}});
  check_clean(s, mark);
}

namespace {
// OpenMPI on the cluster's subnet only (every namespace also has lo), TCP
// between hosts; root allowed.
std::string ompi_env(const SlurmCluster& s) {
  return "export OMPI_MCA_oob_tcp_if_include=" + s.subnet() + " OMPI_MCA_btl_tcp_if_include=" + s.subnet() +
         " OMPI_MCA_btl=tcp,vader,self OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; ";
}
}  // namespace

TEST_CASE("slurm: an MPI program under salloc dlaunch -n 8 (dlaunch's PMIx, agents by srun)", "[slurm][cluster][mpi]") {
  SlurmCluster s(4);
  const std::string mark = unique_marker();
  auto ours = s.run_login(ompi_env(s) + "salloc -N4 -K " + dlaunch() + " -n 8 " + bin("mpi_hello") + " 8 " + mark, 90s);
  INFO(ours.output);
  CHECK(ours.status == 0);
  CHECK(count(ours.output, " ok") == 8);
  CHECK(count(ours.output, " local 2 ok") == 8);  // two ranks per node, as MPI's shared-memory communicator sees them
  check_clean(s, mark);
}

// The anchor: the same program under Slurm's own PMIx plugin, on the same
// cluster (the program and the cluster are right). Seen once under heavy
// load: two ranks of OpenMPI 4.1 segfaulting in MPI_Init under srun
// --mpi=pmix; --kill-on-bad-exit ends the step then instead of hanging.
TEST_CASE("slurm: the same MPI program under srun --mpi=pmix -n 8 (the anchor)", "[slurm][cluster][mpi]") {
  SlurmCluster s(4);
  const std::string mark = unique_marker();
  const std::string cmd =
      ompi_env(s) + "salloc -N4 -K srun --mpi=pmix --kill-on-bad-exit=1 -n 8 " + bin("mpi_hello") + " 8 " + mark;
  auto theirs = s.run_login(cmd, 90s);
  if (theirs.status != 0) {
    // The anchor is Slurm's and OpenMPI's code, not ours: a rank of OpenMPI
    // 4.1 segfaulting in MPI_Init under load (seen twice) is said, and the
    // anchor runs once more; a wrong program or cluster fails both times.
    WARN("the anchor failed once (status " << theirs.status << "), run again:\n" << theirs.output);
    check_clean(s, mark);
    theirs = s.run_login(cmd, 90s);
  }
  INFO(theirs.output);
  CHECK(theirs.status == 0);
  CHECK(count(theirs.output, " ok") == 8);
  check_clean(s, mark);
}

// --spares under Slurm: an allocation of 5 nodes, 4 run the ranks and h5
// waits. h3's agent is killed mid-job: the agents' srun step goes on without
// it (--kill-on-bad-exit=0 --no-kill for a job that may lose a host), h5
// takes h3's seat and the second attempt runs the same world of 8.
TEST_CASE("slurm: --spares 1 in an allocation of 5 nodes - h3's agent killed, the spare h5 takes its seat and the "
          "job ends with the same world",
          "[slurm][cluster][spares]") {
  SlurmCluster s(5);
  const std::string mark = unique_marker();
  auto job = std::async(std::launch::async, [&] {
    return s.run_login("salloc -N5 --no-kill -K " + dlaunch() +
                           " -n 8 --spares 1 --kill-grace 1 --tag-output sh -c 'if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; "
                           "then exec sleep " + mark + "; fi; echo id $RANK $(hostname) $NODE_RANK $WORLD_SIZE'",
                       90s);
  });
  bool running = false;
  for (int i = 0; i < 300 && !running; ++i) {
    running = true;
    for (const char* h : {"h1", "h2", "h3", "h4"}) running = running && pids_matching(s.cluster(), h, "sleep " + mark).size() == 2;
    if (!running) std::this_thread::sleep_for(100ms);
  }
  REQUIRE(running);
  CHECK(pids_matching(s.cluster(), "h5", "sleep " + mark).empty());  // the spare holds no ranks
  const auto agents = pids_matching(s.cluster(), "h3", "dlaunch-agent");
  REQUIRE(!agents.empty());
  for (int pid : agents) ::kill(pid, SIGKILL);
  auto r = job.get();
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("dlaunch: attempt 2 of 2: h3 lost (") != std::string::npos);
  CHECK(r.output.find("its ranks 4-5 moved to spare h5; no spare left; 8 ranks running again") != std::string::npos);
  std::map<int, std::string> where;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find("id ");
    if (at == std::string::npos) continue;
    std::istringstream w(line.substr(at));
    std::string tag, host;
    int rank = -1, node = -1, world = -1;
    if (!(w >> tag >> rank >> host >> node >> world) || tag != "id") continue;
    INFO("rank " << rank);
    CHECK(world == 8);
    CHECK(node == rank / 2);  // NODE_RANK as before: h5 runs node rank 2
    where[rank] = host;
  }
  CHECK(where == std::map<int, std::string>{{0, "h1"}, {1, "h1"}, {2, "h2"}, {3, "h2"},
                                            {4, "h5"}, {5, "h5"}, {6, "h4"}, {7, "h4"}});
  check_clean(s, mark);
}
