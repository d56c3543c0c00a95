// --gpu-bind seen from real ranks of a real dlaunch and dlaunch-agent, on a
// machine without GPUs: the agent is given GPUs (--gpus-per-node, an
// inherited CUDA_VISIBLE_DEVICES, or a fake KFD tree via DLAUNCH_SYSFS_ROOT),
// and each rank resolves its device the way torch does: the visible list
// from its vendor's variable, indexed by LOCAL_RANK (`cuda:LOCAL_RANK`,
// visible mode) or by 0 (`cuda:0`, isolate mode). The failure these guard
// against is exactly an index past the visible list: "invalid device ordinal".
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
// argv: MODE VARIABLE, MODE being visible (cuda:LOCAL_RANK), isolate (cuda:0) or
// dlaunch (cuda:DLAUNCH_GPUS[0], which also holds with --oversubscribe-gpus). Prints one line per rank:
//   rank=R local=L phys=P own=P1,P2 dlaunch_gpus=D
// where phys is the physical id of the device the idiom picks and own what
// DLAUNCH_GPUS names; exits 3 where torch would raise "invalid device ordinal".
const char* kResolve = R"PY(import os, sys
mode, var = sys.argv[1], sys.argv[2]
rank = os.environ["RANK"]
visible = [x for x in os.environ.get(var, "").split(",") if x]
idx = {"visible": lambda: int(os.environ["LOCAL_RANK"]), "isolate": lambda: 0,
       "dlaunch": lambda: int(os.environ["DLAUNCH_GPUS"].split(",")[0])}[mode]()
if idx >= len(visible):
    print(f"rank={rank} error=invalid device ordinal {idx} of {len(visible)} ({var}={os.environ.get(var)})")
    sys.exit(3)
dl = os.environ.get("DLAUNCH_GPUS", "<unset>")
own = ",".join(visible[int(i)] for i in dl.split(",")) if dl != "<unset>" else "-"
print(f"rank={rank} local={os.environ['LOCAL_RANK']} phys={visible[idx]} own={own} dlaunch_gpus={dl}", flush=True)
)PY";

struct RankLine {
  std::string local, phys, own, dlaunch_gpus;
};

// rank -> its line's fields, from the ranks' output.
std::map<int, RankLine> parse(const std::string& out) {
  std::map<int, RankLine> m;
  for (auto l : lines(out)) {
    l.erase(std::remove(l.begin(), l.end(), '\r'), l.end());  // a pty's line ends
    std::istringstream in(l);
    std::string word;
    std::map<std::string, std::string> kv;
    while (in >> word)
      if (auto eq = word.find('='); eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
    if (!kv.count("rank") || !kv.count("phys")) continue;
    m[std::stoi(kv["rank"])] = RankLine{kv["local"], kv["phys"], kv["own"], kv["dlaunch_gpus"]};
  }
  return m;
}

// A job whose ranks resolve their device as torch does, with GPUs given by `gpu_args`/`env`.
struct Job {
  TempDir tmp;
  RunSpec spec;
  Job(int n, std::vector<std::string> args, const std::string& mode, const std::string& var = "CUDA_VISIBLE_DEVICES") {
    write_file(tmp.path + "/resolve.py", kResolve);
    // No driver tree here, also on a machine that has GPUs: the test's GPUs are the only ones.
    std::filesystem::create_directories(tmp.path + "/root");
    spec.set_env = {{"DLAUNCH_SYSFS_ROOT", tmp.path + "/root"}};
    spec.unset_env = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "DLAUNCH_GPUS"};
    spec.argv = {bin("dlaunch"), "-n", std::to_string(n)};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    for (const std::string& a : {std::string("python3"), tmp.path + "/resolve.py", mode, var}) spec.argv.push_back(a);
  }
  void inherit(const std::string& var, const std::string& value) {
    spec.unset_env.erase(std::remove(spec.unset_env.begin(), spec.unset_env.end(), var), spec.unset_env.end());
    spec.set_env[var] = value;
  }
};

// Every rank resolved a device, each a different one of `gpus`.
void check_distinct(const std::map<int, RankLine>& got, int n, const std::set<std::string>& gpus) {
  REQUIRE(static_cast<int>(got.size()) == n);
  std::set<std::string> seen;
  for (const auto& [rank, l] : got) {
    INFO("rank " << rank << " phys " << l.phys);
    CHECK(gpus.count(l.phys) == 1);
    CHECK(l.own == l.phys);  // DLAUNCH_GPUS names the same device as the idiom
    seen.insert(l.phys);
  }
  CHECK(static_cast<int>(seen.size()) == n);
}
}  // namespace

TEST_CASE("gpu-bind visible (default): cuda:LOCAL_RANK is a valid, distinct GPU on every rank of 4",
          "[integration][gpu]") {
  Job j(4, {"--gpus-per-node", "4"}, "visible");
  RunResult r = run(j.spec, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto got = parse(r.out);
  check_distinct(got, 4, {"0", "1", "2", "3"});
  for (const auto& [rank, l] : got) {
    CHECK(l.phys == std::to_string(rank));
    CHECK(l.dlaunch_gpus == l.local);
  }
}

TEST_CASE("gpu-bind isolate: cuda:0 is a valid, distinct GPU on every rank of 4", "[integration][gpu]") {
  Job j(4, {"--gpus-per-node", "4", "--gpu-bind", "isolate"}, "isolate");
  RunResult r = run(j.spec, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto got = parse(r.out);
  check_distinct(got, 4, {"0", "1", "2", "3"});
  for (const auto& [rank, l] : got) {
    CHECK(l.local == std::to_string(rank));  // LOCAL_RANK stays the true local rank
    CHECK(l.dlaunch_gpus == "0");
  }
}

TEST_CASE("gpu-bind: the GPUs inherited in CUDA_VISIBLE_DEVICES keep their order in both modes", "[integration][gpu]") {
  for (const std::string mode : {"visible", "isolate"}) {
    INFO("--gpu-bind " << mode);
    Job j(4, {"--gpu-bind", mode}, mode);
    j.inherit("CUDA_VISIBLE_DEVICES", "6,4,7,5");
    RunResult r = run(j.spec, 30);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    const auto got = parse(r.out);
    check_distinct(got, 4, {"4", "5", "6", "7"});
    const char* want[] = {"6", "4", "7", "5"};  // local rank L gets the L-th inherited GPU
    for (const auto& [rank, l] : got) CHECK(l.phys == want[rank]);
  }
}

TEST_CASE("gpu-bind visible: --gpus-per-rank 2 gives local rank L devices 2L and 2L+1", "[integration][gpu]") {
  Job j(2, {"--gpus-per-node", "4", "--gpus-per-rank", "2"}, "visible");
  RunResult r = run(j.spec, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto got = parse(r.out);
  REQUIRE(got.size() == 2);
  CHECK(got.at(0).dlaunch_gpus == "0,1");
  CHECK(got.at(1).dlaunch_gpus == "2,3");
  CHECK(got.at(1).own == "2,3");
}

TEST_CASE("gpu-bind isolate: 5 ranks on 4 GPUs fail before anything starts, naming the host and the fixes",
          "[integration][gpu]") {
  for (const std::string mode : {"isolate"}) {
    INFO("--gpu-bind " << mode);
    Job j(5, {"--gpus-per-node", "4", "--gpu-bind", mode}, mode);
    const std::string flag = j.tmp.path + "/started";
    // A rank that ran would leave this file: none may.
    j.spec.argv.resize(j.spec.argv.size() - 4);
    for (const char* a : {"/bin/sh", "-c"}) j.spec.argv.push_back(a);
    j.spec.argv.push_back("touch " + flag);
    RunResult r = run(j.spec, 30);
    INFO(r.out << r.err);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("--gpu-bind " + mode + ": host localhost has 4 GPUs, but its 5 ranks"));
    CHECK_THAT(r.err, Catch::Contains("run at most 4 ranks on localhost") && Catch::Contains("--gpu-bind none") &&
                          Catch::Contains("--oversubscribe-gpus") && Catch::Contains("--gpus-per-rank"));
    CHECK(::access(flag.c_str(), F_OK) != 0);
  }
}

TEST_CASE("gpu-bind visible: a CPU job of 3 ranks on a host of 1 GPU runs, with a warning naming --nproc-per-node",
          "[integration][gpu]") {
  TempDir tmp;
  std::filesystem::create_directories(tmp.path + "/root");
  RunSpec s;
  s.set_env = {{"DLAUNCH_SYSFS_ROOT", tmp.path + "/root"}};
  s.unset_env = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "DLAUNCH_GPUS"};
  s.argv = {bin("dlaunch"), "--nproc-per-node", "3", "--gpus-per-node", "1", "/bin/sh", "-c", "echo ran"};
  RunResult r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "ran\nran\nran\n");
  CHECK_THAT(r.err, Catch::Contains("--gpu-bind visible: host localhost has 1 GPU for 3 ranks x 1") &&
                        Catch::Contains("run at most 1 on localhost (--nproc-per-node)"));
  s.argv.insert(s.argv.begin() + 1, "--oversubscribe-gpus");  // meant: no warning
  r = run(s, 30);
  CHECK(r.code == 0);
  CHECK(r.err.find("warning") == std::string::npos);
}

TEST_CASE("gpu-bind: --oversubscribe-gpus lets 5 ranks share 4 GPUs round-robin", "[integration][gpu]") {
  // cuda:LOCAL_RANK cannot work for local rank 4 (there is no device 4): DLAUNCH_GPUS says which device is its.
  Job j(5, {"--gpus-per-node", "4", "--oversubscribe-gpus"}, "dlaunch");
  RunResult r = run(j.spec, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto got = parse(r.out);
  REQUIRE(got.size() == 5);
  for (int rank = 0; rank < 4; ++rank) CHECK(got.at(rank).own == std::to_string(rank));
  CHECK(got.at(4).dlaunch_gpus == "0");
  CHECK(got.at(4).own == "0");
}

TEST_CASE("gpu-bind none (and --no-gpu-bind) leaves CUDA_VISIBLE_DEVICES as inherited", "[integration][gpu]") {
  for (const std::string opt : {"--gpu-bind=none", "--no-gpu-bind"}) {
    INFO(opt);
    Job j(3, {opt}, "isolate");
    j.inherit("CUDA_VISIBLE_DEVICES", "2,3");
    RunResult r = run(j.spec, 30);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);  // 3 ranks on 2 GPUs is no error when nothing is bound
    const auto got = parse(r.out);
    REQUIRE(got.size() == 3);
    for (const auto& [rank, l] : got) {
      CHECK(l.phys == "2");  // every rank sees the inherited list, untouched
      CHECK(l.dlaunch_gpus == "<unset>");
    }
  }
}

TEST_CASE("gpu-bind: a host without GPUs sets nothing and is no error", "[integration][gpu]") {
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "3", "--output-filename", tmp.path, "/usr/bin/env"};
  s.set_env = {{"DLAUNCH_SYSFS_ROOT", tmp.path}};
  s.unset_env = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"};
  s.set_env["PATH"] = "/usr/bin:/bin";  // no nvidia-smi
  RunResult r = run(s, 30);
  INFO("dlaunch's stdout:\n" << r.out << "dlaunch's stderr:\n" << r.err);
  REQUIRE(r.code == 0);
  for (int rank = 0; rank < 3; ++rank) {
    const std::string dir = tmp.path + "/rank." + std::to_string(rank);
    const std::string out = read_file(dir + "/stdout");
    INFO("rank " << rank << "'s stdout file (" << out.size() << " bytes):\n"
                 << out << "its stderr file:\n" << read_file(dir + "/stderr"));
    auto e = parse_env(out);
    CHECK(e.count("RANK") == 1);
    CHECK(e.count("CUDA_VISIBLE_DEVICES") == 0);
    CHECK(e.count("DLAUNCH_GPUS") == 0);
  }
}

TEST_CASE("gpu-bind: an AMD host (fake KFD tree of 8 GPUs) gets ROCR_VISIBLE_DEVICES, not CUDA's",
          "[integration][gpu]") {
  Job j(8, {}, "visible", "ROCR_VISIBLE_DEVICES");
  const std::string nodes = j.tmp.path + "/root/sys/class/kfd/kfd/topology/nodes/";
  std::filesystem::create_directories(nodes + "0");
  write_file(nodes + "0/properties", "cpu_cores_count 64\nsimd_count 0\n");  // the CPU node
  for (int i = 1; i <= 8; ++i) {
    std::filesystem::create_directories(nodes + std::to_string(i));
    write_file(nodes + std::to_string(i) + "/properties", "cpu_cores_count 0\nsimd_count 304\n");
  }
  // The rank also prints whether CUDA_VISIBLE_DEVICES was set.
  j.spec.argv = {bin("dlaunch"), "-n", "8", "--report-bindings", "/bin/sh", "-c",
                 "python3 " + j.tmp.path +
                     "/resolve.py visible ROCR_VISIBLE_DEVICES; echo cvd=${CUDA_VISIBLE_DEVICES-unset}"};
  RunResult r = run(j.spec, 60);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  check_distinct(parse(r.out), 8, {"0", "1", "2", "3", "4", "5", "6", "7"});
  auto ls = lines(r.out);
  CHECK(std::count_if(ls.begin(), ls.end(), [](std::string l) { return l.rfind("cvd=unset", 0) == 0; }) == 8);
  CHECK_THAT(r.err, Catch::Contains("dlaunch: rank 5 on localhost: GPUs 5 (physical 5) of "
                                    "ROCR_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"));
}

TEST_CASE("gpu-bind: --report-bindings prints one line per rank before the ranks run", "[integration][gpu]") {
  Job j(2, {"--gpus-per-node", "4", "--gpu-bind", "isolate", "--report-bindings"}, "isolate");
  j.inherit("CUDA_VISIBLE_DEVICES", "9,8,7,6");  // --gpus-per-node wins: 0..3
  RunResult r = run(j.spec, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  auto ls = lines(r.err);
  std::vector<std::string> report;
  for (const auto& l : ls)
    if (l.rfind("dlaunch: rank ", 0) == 0) report.push_back(l);
  CHECK(report == std::vector<std::string>{
                      "dlaunch: rank 0 on localhost: GPUs 0 (physical 0) of CUDA_VISIBLE_DEVICES=0; CPUs not bound (--bind-to none)",
                      "dlaunch: rank 1 on localhost: GPUs 0 (physical 1) of CUDA_VISIBLE_DEVICES=1; CPUs not bound (--bind-to none)"});
}

TEST_CASE("gpu-bind: --dry-run shows each rank's visible list, DLAUNCH_GPUS and physical GPUs", "[integration][gpu]") {
  TempDir tmp;
  RunSpec s;
  s.unset_env = {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"};
  s.set_env = {{"DLAUNCH_SYSFS_ROOT", tmp.path}};
  s.argv = {bin("dlaunch"), "--dry-run", "-n", "4", "-H", "nodeA:2,nodeB:2", "--gpus-per-node", "2", "./train"};
  RunResult r = run(s, 10);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  std::map<int, std::vector<std::string>> rows;
  for (const auto& l : lines(r.out)) {
    std::istringstream in(l);
    int rank;
    if (!(in >> rank)) continue;
    std::string w;
    while (in >> w) rows[rank].push_back(w);
  }
  REQUIRE(rows.size() == 4);
  // host node local visible DLAUNCH_GPUS physical
  CHECK(rows[0] == std::vector<std::string>{"nodeA", "0", "0", "0,1", "0", "0"});
  CHECK(rows[3] == std::vector<std::string>{"nodeB", "1", "1", "0,1", "1", "1"});
  CHECK_THAT(r.out, Catch::Contains("visible is CUDA_VISIBLE_DEVICES (nvidia, --gpu-bind visible)"));
  s.argv = {bin("dlaunch"), "--dry-run", "-n", "3", "-H", "nodeA:3", "--gpus-per-node", "2", "--gpu-bind", "isolate",
            "./train"};
  r = run(s, 10);
  CHECK(r.code == 2);  // the launch would be refused: so is the dry run
  CHECK_THAT(r.err, Catch::Contains("host nodeA has 2 GPUs, but its 3 ranks"));
}

TEST_CASE("gpu-bind: bad values and contradictions are usage errors (exit 2)", "[integration][gpu]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--gpu-bind", "spread"}, "--gpu-bind takes visible, isolate or none, got 'spread'"},
      {{"--gpu-vendor", "matrox"}, "--gpu-vendor takes nvidia, amd or intel, got 'matrox'"},
      {{"--gpu-bind", "isolate", "--no-gpu-bind"}, "--no-gpu-bind contradicts --gpu-bind isolate"},
  };
  for (const auto& [args, want] : cases) {
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "1"};
    s.argv.insert(s.argv.end(), args.begin(), args.end());
    s.argv.push_back("/bin/true");
    RunResult r = run(s, 10);
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains(want));
  }
}
