// The rest of torchrun's contract on the real dlaunch (issue 14), without
// torch (tests/torch runs the real thing): torchelastic's variables and the
// error file, OMP_NUM_THREADS, Slurm's per-task variables rewritten to agree
// with RANK in a hostfile and a per-node launch, torchrun's command line
// (.py under Python, -m, --no-python, --nproc_per_node, --master_addr,
// --version).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "tests/integration/run_command.h"
#include "wire/socket.h"

using namespace dl::it;

namespace {
// The "TAG a b c" lines of an output, split into words (TAG dropped).
std::vector<std::vector<std::string>> tagged(const std::string& out, const std::string& tag) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& l : lines(out)) {
    if (l.rfind(tag + " ", 0) != 0) continue;
    std::vector<std::string> w;
    size_t p = tag.size() + 1;
    while (p <= l.size()) {
      size_t q = l.find(' ', p);
      if (q == std::string::npos) q = l.size();
      w.push_back(l.substr(p, q - p));
      p = q + 1;
    }
    rows.push_back(w);
  }
  return rows;
}

const std::string kToken = "torchrun-contract-test-token-0123456789";

// What srun gives the one task it starts on a node (task k of n).
std::map<std::string, std::string> srun_task_env(int k, int n) {
  return {{"SLURM_JOB_ID", "4242"},     {"SLURM_PROCID", std::to_string(k)}, {"SLURM_NTASKS", std::to_string(n)},
          {"SLURM_LOCALID", "0"},       {"SLURM_NODEID", std::to_string(k)}, {"SLURM_JOB_NODELIST", "localhost"},
          {"SLURM_TASK_PID", "4711"},   {"SLURM_GTIDS", std::to_string(k)},  {"SLURM_NPROCS", std::to_string(n)},
          {"SLURM_STEP_TASKS_PER_NODE", "1(x" + std::to_string(n) + ")"},    {"DLAUNCH_TOKEN", kToken}};
}
// A rank's view of the Slurm variables, next to its own identity.
const char* kShowSlurm =
    "echo \"slurm $RANK $LOCAL_RANK $NODE_RANK $WORLD_SIZE $SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURM_NTASKS "
    "${SLURM_TASK_PID:-unset} ${SLURM_GTIDS:-unset} $SLURM_JOB_ID $SLURM_JOB_NODELIST $SLURM_NPROCS\"";

void check_slurm_rows(const std::vector<std::vector<std::string>>& rows, size_t world) {
  REQUIRE(rows.size() == world);
  std::set<std::string> ranks;
  for (const auto& w : rows) {
    INFO("rank " << w[0]);
    REQUIRE(w.size() == 13);
    ranks.insert(w[0]);
    CHECK(w[4] == w[0]);  // SLURM_PROCID == RANK
    CHECK(w[5] == w[1]);  // SLURM_LOCALID == LOCAL_RANK
    CHECK(w[6] == w[2]);  // SLURM_NODEID == NODE_RANK
    CHECK(w[7] == w[3]);  // SLURM_NTASKS == WORLD_SIZE
    CHECK(w[8] == "unset");  // srun's task pid is no rank's
    CHECK(w[9] == "unset");
    CHECK(w[10] == "4242");  // job-level: as srun set them
    CHECK(w[11] == "localhost");
    CHECK(w[12] == w[3]);  // SLURM_NPROCS, the old name of SLURM_NTASKS
  }
  CHECK(ranks.size() == world);
}
}  // namespace

TEST_CASE("torchrun contract: torchelastic's variables, and an error file per rank that dlaunch removes",
          "[integration][torchrun]") {
  // A Python rank (torch's @record is Python): its error file's directory
  // exists when it starts (agent/python_dir.h).
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "/usr/bin/python3", "-c",
            "import os\ne = os.environ.get\nf = e('TORCHELASTIC_ERROR_FILE', '')\nd = os.path.dirname(f)\n"
            "w = 'yes' if os.path.isdir(d) and os.access(d, os.W_OK) else 'no'\n"
            "print('te', e('RANK'), e('TORCHELASTIC_RUN_ID'), e('DLAUNCH_JOB_ID'), e('TORCHELASTIC_RESTART_COUNT'),\n"
            "      e('TORCHELASTIC_MAX_RESTARTS'), e('TORCHELASTIC_USE_AGENT_STORE', 'unset'), w, f)\n"};
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  auto rows = tagged(r.out, "te");
  REQUIRE(rows.size() == 2);
  std::set<std::string> files;
  for (const auto& w : rows) {
    REQUIRE(w.size() == 8);
    CHECK(w[1].rfind("dl-", 0) == 0);
    CHECK(w[1] == w[2]);  // the run id is the job id
    CHECK(w[3] == "0");
    CHECK(w[4] == "0");
    CHECK(w[5] == "True");   // MASTER_PORT is dlaunch's c10d store: no rank hosts one
    CHECK(w[6] == "yes");    // the directory exists, the rank may write there
    files.insert(w[7]);
  }
  REQUIRE(files.size() == 2);  // one file per rank
  const std::string dir = rows[0][7].substr(0, rows[0][7].rfind('/'));
  CHECK(::access(dir.c_str(), F_OK) != 0);  // gone with the job
}

TEST_CASE("torchrun contract: a failed rank's error file (torch's format) is on the verdict line",
          "[integration][torchrun]") {
  TempDir tmp;
  // What torch's @record writes, written by hand: this test needs no torch.
  write_file(tmp.path + "/fail.py",
             "import json, os, sys\n"
             "if os.environ['RANK'] == '1':\n"
             "    tb = 'Traceback (most recent call last):\\n  File \"/work/train.py\", line 42, in main\\n'\n"
             "    msg = {'message': 'KeyError: \\'lr\\'', 'extraInfo': {'py_callstack': tb, 'timestamp': '1'}}\n"
             "    with open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w') as f:\n"
             "        json.dump({'message': msg}, f)\n"
             "    sys.exit(3)\n");
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", tmp.path + "/fail.py"};
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  CHECK(r.code == 3);
  CHECK(r.err.find("rank 1 on ") != std::string::npos);
  CHECK(r.err.find("exited with code 3: KeyError: 'lr' (at /work/train.py:42)") != std::string::npos);

  SECTION("a rank that fails without writing one: the line is as before") {
    RunSpec t;
    t.argv = {bin("dlaunch"), "-n", "2", "/bin/sh", "-c", "[ $RANK = 1 ] && exit 5; exit 0"};
    RunResult q = run(t, 30);
    INFO(q.err);
    CHECK(q.code == 5);
    CHECK(q.err.find("exited with code 5\n") != std::string::npos);
  }
}

TEST_CASE("torchrun contract: OMP_NUM_THREADS=1 for ranks sharing a host, unless the user set it",
          "[integration][torchrun]") {
  const std::string show = "echo \"omp $RANK ${OMP_NUM_THREADS:-unset}\"";
  SECTION("nothing set: 1, with one line on stderr where someone watches (-v here; a terminal too)") {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "2", "-v", "/bin/sh", "-c", show};
    s.unset_env = {"OMP_NUM_THREADS"};
    RunResult r = run(s, 30);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    auto rows = tagged(r.out, "omp");
    REQUIRE(rows.size() == 2);
    for (const auto& w : rows) CHECK(w[1] == "1");
    size_t said = 0;
    for (const auto& l : lines(r.err)) said += l.find("setting OMP_NUM_THREADS=1") != std::string::npos;
    CHECK(said == 1);
  }
  SECTION("nothing set, stderr a pipe, no -v: 1, and a job that went well says nothing") {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "2", "/bin/sh", "-c", show};
    s.unset_env = {"OMP_NUM_THREADS"};
    RunResult r = run(s, 30);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    for (const auto& w : tagged(r.out, "omp")) CHECK(w[1] == "1");
    CHECK(r.err.empty());
  }
  SECTION("on a terminal: the line, as torchrun's") {
    // script(1) gives dlaunch a pseudo-terminal for its stdout and stderr.
    RunSpec s;
    s.argv = {"/usr/bin/script", "-qec", bin("dlaunch") + " -n 2 /bin/sh -c 'echo omp $RANK $OMP_NUM_THREADS'",
              "/dev/null"};
    s.unset_env = {"OMP_NUM_THREADS"};
    RunResult r = run(s, 30);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("setting OMP_NUM_THREADS=1") != std::string::npos);
    CHECK(r.out.find("omp 1 1") != std::string::npos);
  }
  SECTION("set in dlaunch's environment: untouched") {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "2", "/bin/sh", "-c", show};
    s.set_env = {{"OMP_NUM_THREADS", "3"}};
    RunResult r = run(s, 30);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    for (const auto& w : tagged(r.out, "omp")) CHECK(w[1] == "3");
    CHECK(r.err.find("OMP_NUM_THREADS") == std::string::npos);
  }
  SECTION("given with -x: the user's value") {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "2", "-x", "OMP_NUM_THREADS=5", "/bin/sh", "-c", show};
    s.unset_env = {"OMP_NUM_THREADS"};
    RunResult r = run(s, 30);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    for (const auto& w : tagged(r.out, "omp")) CHECK(w[1] == "5");
    CHECK(r.err.find("OMP_NUM_THREADS") == std::string::npos);
  }
  SECTION("one rank: all the host's threads") {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "1", "/bin/sh", "-c", show};
    s.unset_env = {"OMP_NUM_THREADS"};
    RunResult r = run(s, 30);
    REQUIRE(r.code == 0);
    auto rows = tagged(r.out, "omp");
    REQUIRE(rows.size() == 1);
    CHECK(rows[0][1] == "unset");
  }
}

TEST_CASE("torchrun contract: inside Slurm, a hostfile launch's ranks see SLURM_* that agree with RANK",
          "[integration][torchrun][slurm]") {
  TempDir tmp;
  write_file(tmp.path + "/hosts", "localhost slots=3\n");
  RunSpec s;
  s.argv = {bin("dlaunch"), "--hostfile", tmp.path + "/hosts", "/bin/sh", "-c", kShowSlurm};
  s.set_env = srun_task_env(0, 1);  // sbatch's script, or one srun task, running dlaunch
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  check_slurm_rows(tagged(r.out, "slurm"), 3);
  CHECK(r.err.find("SLURM_") == std::string::npos);  // rewritten on purpose: no warning
}

TEST_CASE("torchrun contract: srun ... dlaunch --rdzv env, each rank's SLURM_* agree with its RANK",
          "[integration][torchrun][slurm][per-node]") {
  const int port = dl::wire::free_tcp_port(true);
  auto node = [&](int k) {
    RunSpec s;
    s.argv = {bin("dlaunch"), "--rdzv", "env", "--rdzv-port", std::to_string(port), "--nproc_per_node", "2",
              "/bin/sh", "-c", kShowSlurm};
    s.set_env = srun_task_env(k, 2);
    s.unset_env = {"RANK", "WORLD_SIZE", "DLAUNCH_RANK", "DLAUNCH_WORLD_SIZE"};
    return s;
  };
  Child c1 = start(node(1));
  Child c0 = start(node(0));
  // The port argument, unique to this test (a marker of words such as
  // "--rdzv env" also matched the test binary whose argument is this test's name).
  const std::string marker = std::string("--rdzv-port") + '\0' + std::to_string(port) + '\0';
  ChildGuard g0{c0, marker}, g1{c1, marker};
  RunResult r0 = wait(c0, 30), r1 = wait(c1, 30);
  INFO(r0.out << r0.err << "---\n" << r1.out << r1.err);
  REQUIRE(r0.code == 0);
  REQUIRE(r1.code == 0);
  auto rows = tagged(r0.out + r1.out, "slurm");
  check_slurm_rows(rows, 4);
  for (const auto& w : rows) CHECK(w[3] == "4");
}

TEST_CASE("torchrun contract: torchrun's per-node command line (--nnodes, --node_rank, --master_addr/port)",
          "[integration][torchrun][per-node]") {
  const int port = dl::wire::free_tcp_port(true);
  auto node = [&](int k) {
    RunSpec s;
    s.argv = {bin("dlaunch"), "--nnodes=2", "--node_rank=" + std::to_string(k), "--master_addr", "127.0.0.1",
              "--master_port", std::to_string(port), "--rdzv_backend", "static", "--nproc_per_node", "2",
              "/bin/sh", "-c", "echo \"id $RANK $WORLD_SIZE $NODE_RANK\""};
    s.set_env = {{"DLAUNCH_TOKEN", kToken}};
    return s;
  };
  Child c1 = start(node(1));
  Child c0 = start(node(0));
  const std::string marker = std::string("--master_port") + '\0' + std::to_string(port) + '\0';
  ChildGuard g0{c0, marker}, g1{c1, marker};
  RunResult r0 = wait(c0, 30), r1 = wait(c1, 30);
  INFO(r0.out << r0.err << "---\n" << r1.out << r1.err);
  REQUIRE(r0.code == 0);
  REQUIRE(r1.code == 0);
  std::set<std::string> seen;
  for (const auto& w : tagged(r0.out + r1.out, "id")) {
    REQUIRE(w.size() == 3);
    CHECK(w[1] == "4");
    seen.insert(w[0] + "@" + w[2]);
  }
  CHECK(seen == std::set<std::string>{"0@0", "1@0", "2@1", "3@1"});
}

TEST_CASE("torchrun contract: a .py program runs under Python, -m runs a module, --no-python runs it as it is",
          "[integration][torchrun]") {
  TempDir tmp;
  // Neither executable nor with a #! line: only an interpreter can run it.
  write_file(tmp.path + "/hello.py", "import os, sys\nprint('py', os.environ['RANK'], *sys.argv[1:])\n", 0644);
  write_file(tmp.path + "/hellomod.py", "import os\nprint('mod', os.environ['RANK'], __name__)\n", 0644);
  SECTION(".py") {
    RunSpec s;
    s.argv = {bin("dlaunch"), "--nproc_per_node", "2", tmp.path + "/hello.py", "--lr", "3"};
    RunResult r = run(s, 30);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    auto rows = tagged(r.out, "py");
    REQUIRE(rows.size() == 2);
    for (const auto& w : rows) CHECK((w.size() == 3 && w[1] == "--lr" && w[2] == "3"));
  }
  SECTION("$PYTHON picks the interpreter") {
    write_file(tmp.path + "/fakepy", "#!/bin/sh\necho \"fake $RANK $*\"\n", 0755);
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "1", tmp.path + "/hello.py"};
    s.set_env = {{"PYTHON", tmp.path + "/fakepy"}};
    RunResult r = run(s, 30);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("fake 0 " + tmp.path + "/hello.py") != std::string::npos);
  }
  SECTION("-m") {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "2", "--wdir", tmp.path, "-m", "hellomod"};
    RunResult r = run(s, 30);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    auto rows = tagged(r.out, "mod");
    REQUIRE(rows.size() == 2);
    for (const auto& w : rows) CHECK(w[1] == "__main__");
  }
  SECTION("--no-python: exec'd as it is, so a non-executable script cannot run (126)") {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "1", "--no-python", tmp.path + "/hello.py"};
    RunResult r = run(s, 30);
    INFO(r.out << r.err);
    CHECK(r.code == 126);
  }
}

TEST_CASE("torchrun contract: --version", "[integration][torchrun]") {
  RunSpec v;
  v.argv = {bin("dlaunch"), "--version"};
  RunResult a = run(v, 10);
  RunSpec w;
  w.argv = {bin("dlaunch"), "version"};
  RunResult b = run(w, 10);
  CHECK(a.code == 0);
  CHECK(a.out.rfind("dlaunch ", 0) == 0);
  CHECK(a.out == b.out);
}

// torchrun's --master-port on one node is the MASTER_PORT its ranks see:
// here the port of the store dlaunch serves, and with --torch-store rank0
// the one rank 0 is to listen on. A port in use is refused naming the option.
TEST_CASE("torchrun contract: --master-port P on one node is the ranks' MASTER_PORT", "[integration][torchrun]") {
  const int port = dl::wire::free_tcp_port(true);
  for (const char* store : {"served", "rank0"}) {
    RunSpec s;
    s.argv = {bin("dlaunch"), "--master-port", std::to_string(port), "--torch-store", store, "-n", "2",
              "/bin/sh", "-c", "echo port=$MASTER_PORT"};
    RunResult r = run(s, 60);
    INFO(store << ": " << r.out << r.err);
    CHECK(r.code == 0);
    const auto ls = lines(r.out);
    CHECK(std::count(ls.begin(), ls.end(), "port=" + std::to_string(port)) == 2);
  }
  // Held by a listener of ours: the served store cannot listen there.
  const int held = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(held, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(held, 4) == 0);
  REQUIRE(::getsockname(held, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const int taken = ntohs(a.sin_port);
  RunSpec s;
  s.argv = {bin("dlaunch"), "--master-port", std::to_string(taken), "-n", "1", "/bin/true"};
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--master-port " + std::to_string(taken)) && Catch::Contains("choose a free port"));
  ::close(held);
}
