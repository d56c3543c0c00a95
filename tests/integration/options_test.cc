// Options seen from the ranks: stdin, --dry-run, -x, --wdir, GPU binding,
// CPU binding, inherited identity variables, bad hostfiles and bad command lines.
#include <catch2/catch.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <tuple>

#include "hostfiles/binding.h"
#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
std::map<std::string, std::string> env_of(const std::string& dir, int rank) {
  return parse_env(read_file(dir + "/rank." + std::to_string(rank) + "/stdout"));
}

std::vector<std::string> sorted_lines(const std::string& text) {
  auto ls = lines(text);
  std::sort(ls.begin(), ls.end());
  return ls;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }
}  // namespace

TEST_CASE("stdin goes to rank 0 and rank 1 sees EOF at once", "[integration]") {
  // dlaunch's stdin stays open: the job can only end if rank 1's cat got EOF
  // at once and rank 0's head stopped after the two lines it was sent.
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--tag-output", "/bin/sh", "-c",
            "if [ \"$RANK\" = 0 ]; then head -n 2; else cat; echo eof; fi"};
  s.stdin_data = "a\nb\n";
  s.stdin_hold = true;
  RunResult r = run(s, 10);
  INFO(r.err);
  REQUIRE_FALSE(r.timed_out);
  CHECK(r.code == 0);
  CHECK(sorted_lines(r.out) == std::vector<std::string>{"[0@localhost] a", "[0@localhost] b", "[1@localhost] eof"});
}

TEST_CASE("stdin: two lines piped into dlaunch -n 2 cat reach rank 0", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "/bin/cat"};
  s.stdin_data = "a\nb\n";
  RunResult r = run(s, 10);
  CHECK(r.code == 0);
  CHECK(r.out == "a\nb\n");
}

// A regular file (and /dev/null) on stdin is read on the launcher's loop, a
// chunk per turn, not on a reader thread (launcher/output/stdin_forwarder.h): every
// byte of a file of several chunks arrives, in order, and EOF after it.
TEST_CASE("stdin from a regular file of several 64 KiB chunks reaches rank 0 whole, then EOF", "[integration]") {
  TempDir tmp;
  const std::string file = tmp.path + "/input";
  {
    std::ofstream f(file);
    for (int i = 0; i < 20000; ++i) f << "line " << i << " of the stdin file\n";  // ~540 KB
  }
  RunSpec s;
  s.argv = {"/bin/sh", "-c",
            bin("dlaunch") + " -n 2 /bin/sh -c 'if [ \"$RANK\" = 0 ]; then cmp - \"$0\" && echo same; else cat; echo eof; fi' " +
                file + " < " + file};
  RunResult r = run(s, 20);
  INFO(r.out << r.err);
  REQUIRE_FALSE(r.timed_out);
  CHECK(r.code == 0);
  CHECK(sorted_lines(r.out) == std::vector<std::string>{"eof", "same"});

  RunSpec null;
  null.argv = {bin("dlaunch"), "-n", "1", "/bin/sh", "-c", "cat; echo eof"};  // stdin is /dev/null
  RunResult n = run(null, 10);
  REQUIRE_FALSE(n.timed_out);
  CHECK(n.code == 0);
  CHECK(n.out == "eof\n");
}

TEST_CASE("dlaunch --dry-run prints the rank map for -H and starts nothing", "[integration]") {
  TempDir tmp;
  const std::string flag = tmp.path + "/started";
  RunSpec s;
  s.argv = {bin("dlaunch"), "--dry-run", "-n", "5", "-H", "nodeA:2,nodeB:3", "--gpus-per-node", "2",
            "--gpu-bind", "isolate", "--oversubscribe-gpus", "/bin/sh", "-c", "touch " + flag};
  RunResult r = run(s, 10);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  // One row per rank: slot mapping puts ranks 0-1 on nodeA (node 0), 2-4 on
  // nodeB; GPUs go round by local rank.
  const std::vector<std::tuple<int, std::string, int, int, std::string>> want = {
      {0, "nodeA", 0, 0, "0"}, {1, "nodeA", 0, 1, "1"}, {2, "nodeB", 1, 0, "0"}, {3, "nodeB", 1, 1, "1"},
      {4, "nodeB", 1, 2, "0"}};
  int rows = 0;
  for (const auto& l : lines(r.out)) {
    std::istringstream in(l);
    int rank, node, local;
    std::string host, gpus;
    if (!(in >> rank >> host >> node >> local >> gpus)) continue;
    REQUIRE(rank >= 0);
    REQUIRE(rank < 5);
    CHECK(std::make_tuple(rank, host, node, local, gpus) == want[static_cast<size_t>(rank)]);
    ++rows;
  }
  CHECK(rows == 5);
  CHECK_FALSE(exists(flag));
}

TEST_CASE("dlaunch --dry-run prints the table and --map-by node changes it", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "--dry-run", "--map-by", "node", "-n", "4", "-H", "h1:2,h2:2", "/bin/true"};
  RunResult r = run(s, 10);
  CHECK(r.code == 0);
  std::map<int, std::string> host_of;
  for (const auto& l : lines(r.out)) {
    std::istringstream in(l);
    int rank;
    std::string host;
    if (in >> rank >> host) host_of[rank] = host;
  }
  CHECK(host_of == std::map<int, std::string>{{0, "h1"}, {1, "h2"}, {2, "h1"}, {3, "h2"}});
}

TEST_CASE("dlaunch -x VAR=value and -x VAR reach every rank", "[integration]") {
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "-x", "DL_IT_SET=from-x", "-x", "DL_IT_PASSED", "-x", "DL_IT_OVER=new",
            "--output-filename", tmp.path, "/usr/bin/env"};
  s.set_env = {{"DL_IT_PASSED", "from launcher"}, {"DL_IT_OVER", "old"}};
  RunResult r = run(s, 10);
  REQUIRE(r.code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    auto e = env_of(tmp.path, rank);
    CHECK(e["DL_IT_SET"] == "from-x");
    CHECK(e["DL_IT_PASSED"] == "from launcher");
    CHECK(e["DL_IT_OVER"] == "new");
  }
}

// Environment values are bytes, not text: a Latin-1 value (or any that is
// not UTF-8) passed by -x reaches the ranks unchanged. A JSON writer that
// takes strings for text throws on it, and the job fails as a lost agent.
TEST_CASE("dlaunch -x passes a value that is not UTF-8 unchanged", "[integration]") {
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "-x", "DL_IT_LATIN1", "-x", "DL_IT_SET=\xff\x01end", "--output-filename", tmp.path,
            "/usr/bin/env"};
  s.set_env = {{"DL_IT_LATIN1", "caf\xe9"}};
  RunResult r = run(s, 10);
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    auto e = env_of(tmp.path, rank);
    CHECK(e["DL_IT_LATIN1"] == "caf\xe9");
    CHECK(e["DL_IT_SET"] == "\xff\x01end");
  }
}

TEST_CASE("dlaunch --wdir sets the ranks' working directory and the default is dlaunch's", "[integration]") {
  TempDir a, b;
  const std::string real_a = std::filesystem::canonical(a.path), real_b = std::filesystem::canonical(b.path);
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "/bin/pwd"};
  s.cwd = a.path;
  RunResult r = run(s, 10);
  REQUIRE(r.code == 0);
  CHECK(r.out == real_a + "\n" + real_a + "\n");
  s.argv = {bin("dlaunch"), "-n", "2", "--wdir", b.path, "/bin/pwd"};
  r = run(s, 10);
  REQUIRE(r.code == 0);
  CHECK(r.out == real_b + "\n" + real_b + "\n");
}

// mpirun -wdir and the docs' `--wdir /scratch ./worker`: a relative program
// (or a relative PATH entry) is where the rank's exec finds it, in its working
// directory, not from the agent's own (a remote agent's is $HOME), where the
// rank would be refused as "not found".
TEST_CASE("dlaunch --wdir DIR ./prog: the program is found in DIR, not in dlaunch's directory", "[integration]") {
  TempDir work, elsewhere;
  std::filesystem::create_directory(work.path + "/sub");
  write_file(work.path + "/sub/prog", "#!/bin/sh\necho \"prog $RANK in $(pwd)\"\n", 0755);
  const std::string real = std::filesystem::canonical(work.path).string();
  RunSpec s;
  s.cwd = elsewhere.path;  // holds no sub/prog
  s.argv = {bin("dlaunch"), "-n", "2", "--wdir", work.path, "./sub/prog"};
  RunResult r = run(s, 20);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("prog 0 in " + real + "\n") != std::string::npos);
  CHECK(r.out.find("prog 1 in " + real + "\n") != std::string::npos);
  // A relative --wdir, and a PATH entry "sub" relative to it.
  s.cwd = std::filesystem::path(work.path).parent_path().string();
  s.argv = {bin("dlaunch"), "-n", "1", "--wdir", std::filesystem::path(work.path).filename().string(), "prog"};
  s.set_env = {{"PATH", "sub:/usr/bin:/bin"}};
  r = run(s, 20);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("prog 0 in " + real + "\n") != std::string::npos);
  // Not there either: refused, naming where it was looked for.
  s.cwd = work.path;
  s.set_env = {};
  s.argv = {bin("dlaunch"), "-n", "1", "--wdir", elsewhere.path, "./sub/prog"};
  r = run(s, 20);
  CHECK(r.code == 127);
  CHECK(r.err.find(elsewhere.path + "/./sub/prog: No such file") != std::string::npos);
  // A working directory that is not there, with every rank on this machine:
  // refused before anything starts, naming it (bad_input_test.cc).
  s.argv = {bin("dlaunch"), "-n", "2", "--wdir", work.path + "/gone", "/bin/true"};
  r = run(s, 20);
  CHECK(r.code == 2);
  CHECK(r.err.find("--wdir " + work.path + "/gone: No such file or directory") != std::string::npos);
  // On other hosts (simulated) each agent checks it: exit 126 naming it and
  // the fix, where the rank's chdir could only exit 126 without a word of which.
  const std::string m = new_marker();
  s.argv = {bin("dlaunch"), "--launcher", "sim", "-H", "sim-a-" + m + ",sim-b-" + m, "--gpus-per-node", "0",
            "--wdir", work.path + "/gone", "/bin/true"};
  s.set_env = {{"DLAUNCH_SIM", "1"}};
  r = run(s, 20);
  CHECK(r.code == 126);
  CHECK(r.err.find("cannot change to the working directory " + work.path + "/gone: No such file or directory") !=
        std::string::npos);
  CHECK(r.err.find("pass --wdir") != std::string::npos);
}

TEST_CASE("dlaunch --gpus-per-node 2 on 4 ranks binds GPUs 0,1,0,1", "[integration]") {
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "4", "--gpus-per-node", "2", "--gpu-bind", "isolate", "--oversubscribe-gpus",
            "--output-filename", tmp.path, "/usr/bin/env"};
  s.unset_env = {"CUDA_VISIBLE_DEVICES"};
  REQUIRE(run(s, 10).code == 0);
  const char* want[] = {"0", "1", "0", "1"};
  for (int rank = 0; rank < 4; ++rank) CHECK(env_of(tmp.path, rank)["CUDA_VISIBLE_DEVICES"] == want[rank]);
}

TEST_CASE("a fake nvidia-smi listing 4 GPUs and --gpus-per-rank 2", "[integration]") {
  TempDir tmp;
  const std::string bindir = tmp.path + "/bin", out = tmp.path + "/out";
  std::filesystem::create_directory(bindir);
  write_file(bindir + "/nvidia-smi",
             "#!/bin/sh\n[ \"$1\" = -L ] || exit 9\n"
             "for i in 0 1 2 3; do echo \"GPU $i: Fake GPU (UUID: GPU-$i)\"; done\n",
             0755);
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "4", "--gpus-per-rank", "2", "--gpu-bind", "isolate", "--oversubscribe-gpus",
            "--output-filename", out, "/usr/bin/env"};
  s.unset_env = {"CUDA_VISIBLE_DEVICES"};
  s.set_env = {{"PATH", bindir + ":" + std::string(std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin")},
               {"DLAUNCH_SYSFS_ROOT", tmp.path}};  // no driver tree: nvidia-smi it is, also on a GPU machine
  RunResult r = run(s, 10);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const char* want[] = {"0,1", "2,3", "0,1", "2,3"};
  for (int rank = 0; rank < 4; ++rank) CHECK(env_of(out, rank)["CUDA_VISIBLE_DEVICES"] == want[rank]);
}

TEST_CASE("CUDA_VISIBLE_DEVICES given to dlaunch is split among the ranks", "[integration]") {
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "3", "--gpu-bind", "isolate", "--output-filename", tmp.path, "/usr/bin/env"};
  s.set_env = {{"CUDA_VISIBLE_DEVICES", "4,5,6"}};
  REQUIRE(run(s, 10).code == 0);
  const char* want[] = {"4", "5", "6"};
  for (int rank = 0; rank < 3; ++rank) CHECK(env_of(tmp.path, rank)["CUDA_VISIBLE_DEVICES"] == want[rank]);
}

TEST_CASE("dlaunch --no-gpu-bind leaves CUDA_VISIBLE_DEVICES unset", "[integration]") {
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--gpus-per-node", "2", "--no-gpu-bind", "--output-filename", tmp.path,
            "/usr/bin/env"};
  s.unset_env = {"CUDA_VISIBLE_DEVICES"};
  REQUIRE(run(s, 10).code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    auto e = env_of(tmp.path, rank);
    CHECK(e.count("RANK") == 1);
    CHECK(e.count("CUDA_VISIBLE_DEVICES") == 0);
  }
}

TEST_CASE("inherited identity variables are replaced or removed, with one warning", "[integration]") {
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--output-filename", tmp.path, "/usr/bin/env"};
  s.set_env = {{"RANK", "7"}, {"OMPI_COMM_WORLD_RANK", "7"}, {"PMIX_NAMESPACE", "x"}, {"PMI_FD", "5"}};
  RunResult r = run(s, 10);
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    auto e = env_of(tmp.path, rank);
    CHECK(e["RANK"] == std::to_string(rank));
    CHECK(e["OMPI_COMM_WORLD_RANK"] == std::to_string(rank));
    CHECK(e["PMIX_NAMESPACE"] != "x");  // removed, or dlaunch's own PMIx namespace (--mpi auto)
    CHECK(e["PMI_FD"] != "5");  // removed, or the socket of dlaunch's own PMI server (--mpi auto)
  }
  auto ls = lines(r.err);
  REQUIRE(ls.size() == 1);
  CHECK(ls[0].find("warning") != std::string::npos);
  for (const char* v : {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_NAMESPACE", "PMI_FD"}) CHECK(ls[0].find(v) != std::string::npos);
}

TEST_CASE("a container's PMIx tuning (PMIX_MCA_*) reaches the ranks without a warning", "[integration]") {
  // NVIDIA's PyTorch images set PMIX_MCA_gds=hash for every process; it is
  // configuration, not an outer launcher's identity to strip and warn about.
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--output-filename", tmp.path, "/usr/bin/env"};
  s.set_env = {{"PMIX_MCA_gds", "hash"}, {"PMIX_MCA_psec", "native"}};
  RunResult r = run(s, 10);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("warning") == std::string::npos);
  for (int rank = 0; rank < 2; ++rank) {
    auto e = env_of(tmp.path, rank);
    CHECK(e["PMIX_MCA_gds"] == "hash");
    CHECK(e["PMIX_MCA_psec"] == "native");
  }
}

TEST_CASE("dlaunch bench on host buffers: every collective right on 3 local ranks", "[integration]") {
  for (std::string op : {"all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all", "reduce"}) {
    INFO(op);
    RunSpec s;
    s.argv = {bin("dlaunch"), "-n", "3", bin("dlaunch"), "bench", "--op", op, "-b", "8", "-e", "1M", "-f", "32",
              "--iters", "2", "--warmup", "1", "--root", "2"};
    RunResult r = run(s, 60);
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("3 ranks") != std::string::npos);
    CHECK(r.out.find("host buffers") != std::string::npos);
    CHECK(r.out.find("Out of bounds values : 0 OK") != std::string::npos);
  }
}

TEST_CASE("dlaunch bench --device cuda: a DLAUNCH_NCCL_LIBRARY that does not load is named, never passed over",
          "[integration]") {
  // The user chose that file: another NCCL found elsewhere (this machine's
  // CUDA toolkit has one) must not be used in its place.
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "1", bin("dlaunch"), "bench", "--device", "cuda"};
  s.set_env = {{"DLAUNCH_NCCL_LIBRARY", "/nonexistent/libnccl.so.2"}};
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  CHECK(r.code == 2);
  if (r.err.find("built without NCCL") != std::string::npos || r.err.find("CUDA runtime (libcudart") != std::string::npos)
    return;  // no NCCL backend or no CUDA runtime here: it never gets as far as NCCL
  CHECK(r.err.find("DLAUNCH_NCCL_LIBRARY=/nonexistent/libnccl.so.2 does not load") != std::string::npos);
}

TEST_CASE("output files: --help says --output-filename leaves the console empty, and it does", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "--help"};
  RunResult r = run(s, 10);
  CHECK(r.code == 0);
  std::string words;  // the help as one line, each run of blanks one space: the table wraps its text
  for (char c : r.out) {
    const bool blank = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!blank) words += c;
    else if (!words.empty() && words.back() != ' ') words += ' ';
  }
  CHECK(words.find("--output-filename arg write DIR/rank.N/{stdout,stderr} instead of the console (OpenMPI writes both)") !=
        std::string::npos);
  TempDir tmp;
  s.argv = {bin("dlaunch"), "-n", "1", "--output-filename", tmp.path + "/out", "/bin/echo", "to the file"};
  r = run(s, 30);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.empty());
  CHECK(read_file(tmp.path + "/out/rank.0/stdout") == "to the file\n");
}

TEST_CASE("dlaunch token --help and dlaunch help token print its use, and other arguments are refused", "[integration]") {
  for (std::vector<std::string> argv : {std::vector<std::string>{bin("dlaunch"), "token", "--help"},
                                        std::vector<std::string>{bin("dlaunch"), "help", "token"}}) {
    RunSpec s;
    s.argv = argv;
    RunResult r = run(s, 10);
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.rfind("usage: dlaunch token\n", 0) == 0);
    CHECK(r.out.find("export DLAUNCH_TOKEN=$(dlaunch token)") != std::string::npos);
  }
  RunSpec s;
  s.argv = {bin("dlaunch"), "token", "extra"};
  RunResult r = run(s, 10);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("dlaunch token takes no arguments (`dlaunch help token` says what it does)") != std::string::npos);
  s.argv = {bin("dlaunch"), "token"};
  r = run(s, 10);
  CHECK(r.code == 0);
  CHECK(r.out.size() == 65);  // 64 hex digits and a newline
}

TEST_CASE("dlaunch bench --help and dlaunch help bench print its options, outside a job too", "[integration]") {
  for (std::vector<std::string> argv : {std::vector<std::string>{bin("dlaunch"), "bench", "--help"},
                                        std::vector<std::string>{bin("dlaunch"), "help", "bench"}}) {
    RunSpec s;
    s.argv = argv;
    RunResult r = run(s, 10);
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    for (const char* opt : {"usage: dlaunch -n N", "--op OP", "--device cpu|cuda", "--json", "Exit 0 when every element"})
      CHECK(r.out.find(opt) != std::string::npos);
  }
}

TEST_CASE("dlaunch bench --device cuda where CUDA cannot run: every rank says why, exit 2, no hang", "[integration]") {
  // No GPU here (nor in CI): the NCCL backend is not built, or its libraries
  // do not load, or the runtime sees no device. Each rank refuses before
  // joining the others, so the job ends at once.
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", bin("dlaunch"), "bench", "--device", "cuda"};
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == 2);
  CHECK(r.err.find("dlaunch bench: error: --device cuda: nccl: ") != std::string::npos);
  // What to do: build with NCCL, load the library, or look at the device.
  CHECK((r.err.find("DLAUNCH_NCCL") != std::string::npos || r.err.find("CUDA_VISIBLE_DEVICES") != std::string::npos ||
         r.err.find("LD_LIBRARY_PATH") != std::string::npos));
  RunSpec bad;
  bad.argv = {bin("dlaunch"), "-n", "1", bin("dlaunch"), "bench", "--device", "gpu"};
  r = run(bad, 30);
  CHECK(r.code == 2);
  CHECK(r.err.find("dlaunch bench: error: --device: expected cpu or cuda, got 'gpu'") != std::string::npos);
}

TEST_CASE("a bad hostfile: exit 2, file:line in the message, nothing started", "[integration]") {
  TempDir tmp;
  const std::string hosts = tmp.path + "/hosts", flag = tmp.path + "/started";
  write_file(hosts, "# two hosts\nlocalhost slots=2\nlocalhost slots=four\n");
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--hostfile", hosts, "/bin/sh", "-c", "touch " + flag};
  RunResult r = run(s, 10);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find(hosts + ":3") != std::string::npos);
  CHECK(r.err.find("four") != std::string::npos);
  CHECK(lines(r.err).size() == 1);
  CHECK_FALSE(exists(flag));
}

TEST_CASE("more ranks than the hostfile's slots: exit 2, nothing started", "[integration]") {
  TempDir tmp;
  const std::string hosts = tmp.path + "/hosts", flag = tmp.path + "/started";
  write_file(hosts, "localhost slots=2\n");
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "3", "--hostfile", hosts, "/bin/sh", "-c", "touch " + flag};
  RunResult r = run(s, 10);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find("oversubscribe") != std::string::npos);
  CHECK_FALSE(exists(flag));
}

TEST_CASE("a localhost hostfile runs the job through it", "[integration]") {
  TempDir tmp;
  const std::string hosts = tmp.path + "/hosts";
  write_file(hosts, "localhost slots=3\n");
  RunSpec s;
  s.argv = {bin("dlaunch"), "--hostfile", hosts, "/bin/sh", "-c", "echo $RANK/$WORLD_SIZE/$LOCAL_RANK"};
  RunResult r = run(s, 10);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(sorted_lines(r.out) == std::vector<std::string>{"0/3/0", "1/3/1", "2/3/2"});
}

TEST_CASE("usage errors exit 2 with a hint", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--tag-outptu", "/bin/true"};
  RunResult r = run(s, 10);
  CHECK(r.code == 2);
  CHECK(r.err.find("--tag-output") != std::string::npos);
  s.argv = {bin("dlaunch"), "-n", "0", "/bin/true"};
  r = run(s, 10);
  CHECK(r.code == 2);
  s.argv = {bin("dlaunch"), "-n", "2"};
  r = run(s, 10);
  CHECK(r.code == 2);
  CHECK(r.err.find("no program") != std::string::npos);
}

TEST_CASE("program arguments that look like options stay the program's", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "1", "/bin/echo", "--lr", "3", "-n", "9"};
  RunResult r = run(s, 10);
  CHECK(r.code == 0);
  CHECK(r.out == "--lr 3 -n 9\n");
}

namespace {
// "Cpus_allowed_list:\t0-3" of a /proc/PID/status text, as a CPU list.
std::vector<int> allowed_in(const std::string& status_text) {
  for (const auto& l : lines(status_text))
    if (l.rfind("Cpus_allowed_list:", 0) == 0) return dl::hostfiles::parse_cpu_list(l.substr(l.find(':') + 1));
  return {};
}
// Physical cores this test may use, counted by distinct sibling lists: a
// different route from the agent's (package, core id) grouping.
int usable_cores() {
  std::set<std::string> sibling_sets;
  for (int c : allowed_in(read_file("/proc/self/status")))
    sibling_sets.insert(read_file("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list"));
  return static_cast<int>(sibling_sets.size());
}
}  // namespace

TEST_CASE("dlaunch --bind-to core pins each local rank to cores of its own", "[integration]") {
  const std::vector<int> mine = allowed_in(read_file("/proc/self/status"));
  const int cores = usable_cores();
  REQUIRE(cores >= 1);
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", std::to_string(cores), "--bind-to", "core", "--output-filename", tmp.path,
            "/bin/cat", "/proc/self/status"};
  RunResult r = run(s);
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::vector<int> all;
  for (int rank = 0; rank < cores; ++rank) {
    const auto cpus = allowed_in(read_file(tmp.path + "/rank." + std::to_string(rank) + "/stdout"));
    INFO("rank " << rank);
    CHECK(!cpus.empty());
    if (cores > 1) CHECK(cpus.size() < mine.size());  // really narrowed
    all.insert(all.end(), cpus.begin(), cpus.end());
  }
  std::sort(all.begin(), all.end());
  CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());  // no CPU shared by two ranks
  CHECK(all == mine);                                               // and together they cover the host
}

TEST_CASE("dlaunch --bind-to core with more ranks than cores: exit 2 naming the host and the fix, nothing runs",
          "[integration]") {
  const int cores = usable_cores();
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", std::to_string(cores + 1), "--bind-to", "core", "/bin/sh", "-c",
            "touch \"$0/ran.$RANK\"", tmp.path};
  RunResult r = run(s);
  INFO(r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find("--bind-to core: localhost has " + std::to_string(cores) + " usable cores") != std::string::npos);
  CHECK(r.err.find("--bind-to numa or none") != std::string::npos);
  CHECK(std::filesystem::is_empty(tmp.path));
}

TEST_CASE("dlaunch --bind-to numa gives each rank its NUMA node's CPUs, and without --bind-to nothing is narrowed",
          "[integration]") {
  const std::vector<int> mine = allowed_in(read_file("/proc/self/status"));
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--bind-to", "numa", "--output-filename", tmp.path + "/numa", "/bin/cat",
            "/proc/self/status"};
  RunResult r = run(s);
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    const auto cpus = allowed_in(read_file(tmp.path + "/numa/rank." + std::to_string(rank) + "/stdout"));
    // Ranks 0 and 1 of 2 go to the first and the last node.
    const std::string node_dir = "/sys/devices/system/node/";
    std::vector<std::string> nodes;
    for (const auto& e : std::filesystem::directory_iterator(node_dir))
      if (e.path().filename().string().rfind("node", 0) == 0 && std::isdigit(e.path().filename().string().back()))
        nodes.push_back(e.path().filename().string());
    std::sort(nodes.begin(), nodes.end(), [](const std::string& a, const std::string& b) {
      return std::stoi(a.substr(4)) < std::stoi(b.substr(4));
    });
    REQUIRE(!nodes.empty());
    auto node_cpus = dl::hostfiles::parse_cpu_list(read_file(node_dir + (rank == 0 ? nodes.front() : nodes.back()) + "/cpulist"));
    std::vector<int> expect;
    std::set_intersection(node_cpus.begin(), node_cpus.end(), mine.begin(), mine.end(), std::back_inserter(expect));
    INFO("rank " << rank);
    CHECK(cpus == expect);
  }
  RunSpec plain = s;
  plain.argv = {bin("dlaunch"), "-n", "2", "--output-filename", tmp.path + "/plain", "/bin/cat", "/proc/self/status"};
  RunResult p = run(plain);
  REQUIRE(p.code == 0);
  for (int rank = 0; rank < 2; ++rank)
    CHECK(allowed_in(read_file(tmp.path + "/plain/rank." + std::to_string(rank) + "/stdout")) == mine);
}

TEST_CASE("dlaunch --dry-run with --bind-to core shows each local rank's CPUs, and refuses too few cores", "[integration]") {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof set, &set) == 0);
  const int cpus = CPU_COUNT(&set);
  RunSpec s;
  s.argv = {bin("dlaunch"), "--dry-run", "-n", "1", "--bind-to", "core", "true"};
  RunResult r = run(s);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("cpus") != std::string::npos);
  // Rank 0's row ends with its CPU list: the threads of this machine's first usable core.
  std::istringstream rows(r.out);
  std::string header, row;
  std::getline(rows, header);
  std::getline(rows, row);
  const std::string last = row.substr(row.find_last_of(' ') + 1);
  REQUIRE_FALSE(last.empty());
  CHECK_NOTHROW(dl::hostfiles::parse_cpu_list(last));
  CHECK_FALSE(dl::hostfiles::parse_cpu_list(last).empty());
  // More ranks than cores is refused before anything starts, as the launch would.
  s.argv = {bin("dlaunch"), "--dry-run", "-n", std::to_string(cpus + 1), "--bind-to", "core", "true"};
  r = run(s);
  CHECK(r.code == 2);
  CHECK(r.err.find("--bind-to core: localhost has") != std::string::npos);
}

TEST_CASE("dlaunch -x with a PREFIX pattern and --env-file reach the ranks, a bad env file stops dlaunch first", "[integration]") {
  TempDir d;
  const std::string file = d.path + "/env";
  {
    std::ofstream f(file);
    f << "# for every rank\nDLTEST_FROM_FILE=file value\nDLTEST_BOTH=file\n";
  }
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--env-file", file, "-x", "DLTEST_PAT_*", "-x", "DLTEST_BOTH=cmdline",
            "sh", "-c", "echo \"$RANK|$DLTEST_FROM_FILE|$DLTEST_BOTH|$DLTEST_PAT_A|$DLTEST_PAT_B|${DLTEST_OTHER-unset}\""};
  s.set_env = {{"DLTEST_PAT_A", "a"}, {"DLTEST_PAT_B", "b"}};
  s.unset_env = {"DLTEST_OTHER"};
  RunResult r = run(s);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("0|file value|cmdline|a|b|unset") != std::string::npos);
  CHECK(r.out.find("1|file value|cmdline|a|b|unset") != std::string::npos);
  {
    std::ofstream f(file);
    f << "OK=1\nnot a variable\n";
  }
  const std::string mark = new_marker();
  s.argv = {bin("dlaunch"), "-n", "1", "--env-file", file, "sleep", mark};
  r = run(s);
  CHECK(r.code == 2);
  CHECK(r.err.find(file + ":2: expected NAME=value") != std::string::npos);
  CHECK(marked(mark).empty());
}

TEST_CASE("habits: --mca reaches every rank as OMPI_MCA_, --role as ROLE_NAME, MPIEXEC_TIMEOUT ends the job",
          "[integration][habits]") {
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "--allow-run-as-root", "--ntasks", "2", "-mca", "btl", "tcp,self", "--mca",
            "pml", "ob1", "--role", "trainer", "--gpus-per-node", "0", "--output-filename", tmp.path, "/usr/bin/env"};
  RunResult r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    auto e = parse_env(read_file(tmp.path + "/rank." + std::to_string(rank) + "/stdout"));
    INFO("rank " << rank);
    CHECK(e["OMPI_MCA_btl"] == "tcp,self");
    CHECK(e["OMPI_MCA_pml"] == "ob1");
    CHECK(e["ROLE_NAME"] == "trainer");
  }
  CHECK_FALSE(std::filesystem::exists(tmp.path + "/rank.2"));  // --ntasks 2: two ranks

  RunSpec slow;
  slow.argv = {bin("dlaunch"), "-n", "1", "--gpus-per-node", "0", "--stack-timeout", "0", "/bin/sleep", "30"};
  slow.set_env = {{"MPIEXEC_TIMEOUT", "1"}};
  RunResult t = run(slow, 20);
  INFO(t.err);
  CHECK_FALSE(t.timed_out);
  CHECK(t.code != 0);
  CHECK(t.seconds < 15);
  CHECK(t.err.find("ran past MPIEXEC_TIMEOUT 1 s") != std::string::npos);
}

TEST_CASE("habits: mpirun's -display-map prints the rank map, then runs the job", "[integration][habits]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-display-map", "-n", "2", "--gpus-per-node", "0", "/bin/echo", "ran"};
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto out = lines(r.out);
  REQUIRE(out.size() >= 5);
  CHECK(out[0].rfind("rank", 0) == 0);  // the table's head, before any rank's line
  CHECK(std::count(out.begin(), out.end(), "ran") == 2);
}

TEST_CASE("habits: --rankfile places each rank on its host and pins it to its slot, a bad slot names the rank",
          "[integration][habits]") {
  const std::vector<int> mine = allowed_in(read_file("/proc/self/status"));
  REQUIRE(!mine.empty());
  const int first = mine.front(), last = mine.back();
  TempDir tmp;
  const std::string rf = tmp.path + "/ranks";
  write_file(rf, "# one line per rank\nrank 1=localhost slot=" + std::to_string(first) + "\nrank 0=localhost slot=" +
                     std::to_string(last) + "\nrank 2=localhost\n");
  RunSpec s;
  s.argv = {bin("dlaunch"), "--rankfile", rf, "--output-filename", tmp.path + "/out", "/bin/cat", "/proc/self/status"};
  RunResult r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(allowed_in(read_file(tmp.path + "/out/rank.0/stdout")) == std::vector<int>{last});
  CHECK(allowed_in(read_file(tmp.path + "/out/rank.1/stdout")) == std::vector<int>{first});
  CHECK(allowed_in(read_file(tmp.path + "/out/rank.2/stdout")) == mine);  // no slot: not pinned
  CHECK_FALSE(std::filesystem::exists(tmp.path + "/out/rank.3"));   // -n is the rankfile's count
  // --dry-run shows the same CPUs, each rank's slot as this machine resolves it.
  RunSpec dry;
  dry.argv = {bin("dlaunch"), "--rankfile", rf, "--dry-run", "/bin/true"};
  RunResult d = run(dry, 30);
  INFO(d.out << d.err);
  REQUIRE(d.code == 0);
  const auto rows = lines(d.out);
  REQUIRE(rows.size() >= 4);
  auto last_word = [](const std::string& l) { return l.substr(l.find_last_of(' ') + 1); };
  CHECK(last_word(rows[1]) == std::to_string(last));   // rank 0
  CHECK(last_word(rows[2]) == std::to_string(first));  // rank 1
  CHECK(last_word(rows[3]) == "-");                    // rank 2: not pinned

  write_file(rf, "rank 0=localhost slot=4000\n");
  const std::string flag = tmp.path + "/started";
  RunSpec bad;
  bad.argv = {bin("dlaunch"), "--rankfile", rf, "/usr/bin/touch", flag};
  RunResult b = run(bad, 30);
  INFO(b.err);
  CHECK(b.code == 2);
  CHECK(b.err.find(rf + " (rank 0): slot=4000: CPU 4000 is not one") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(flag));
}

TEST_CASE("habits: --bind-to hwthread gives each rank a hardware thread of its own, --bind-to socket its socket",
          "[integration][habits]") {
  const std::vector<int> mine = allowed_in(read_file("/proc/self/status"));
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", std::to_string(mine.size()), "--bind-to", "hwthread", "--output-filename",
            tmp.path + "/t", "/bin/cat", "/proc/self/status"};
  RunResult r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::vector<int> all;
  for (size_t rank = 0; rank < mine.size(); ++rank) {
    const auto cpus = allowed_in(read_file(tmp.path + "/t/rank." + std::to_string(rank) + "/stdout"));
    CHECK(cpus.size() == 1);
    all.insert(all.end(), cpus.begin(), cpus.end());
  }
  std::sort(all.begin(), all.end());
  CHECK(all == mine);
  // One rank per socket of this machine, each all the CPUs of its socket.
  RunSpec sock;
  sock.argv = {bin("dlaunch"), "--map-by", "ppr:1:socket", "--output-filename", tmp.path + "/s", "/bin/cat",
               "/proc/self/status"};
  RunResult q = run(sock, 30);
  INFO(q.err);
  REQUIRE(q.code == 0);
  std::set<int> seen;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path + "/s")) {
    const auto cpus = allowed_in(read_file(e.path().string() + "/stdout"));
    CHECK(!cpus.empty());
    seen.insert(cpus.begin(), cpus.end());
  }
  CHECK(std::vector<int>(seen.begin(), seen.end()) == mine);  // the sockets together cover the host
}

TEST_CASE("habits: --merge-stderr-to-stdout sends every rank's stderr to dlaunch's stdout", "[integration][habits]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--merge-stderr-to-stdout", "/bin/sh", "-c", "echo out-$RANK; echo err-$RANK >&2"};
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(sorted_lines(r.out) == std::vector<std::string>{"err-0", "err-1", "out-0", "out-1"});
  CHECK(r.err.find("err-") == std::string::npos);
}

TEST_CASE("dlaunch doctor with no hosts checks this machine, as a job with no hosts runs here", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "doctor", "--quick"};
  s.unset_env = {"SLURM_JOB_NODELIST", "SLURM_NODELIST", "PBS_NODEFILE", "LSB_DJOB_HOSTFILE", "LSB_MCPU_HOSTS"};
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("dlaunch doctor: no --hostfile or -H: checking this machine") != std::string::npos);
  CHECK(r.out.find("localhost") != std::string::npos);
  CHECK(r.out.find("healthy: 1 of 1 hosts passed") != std::string::npos);
}

TEST_CASE("habits: mpirun's single-dash long options and --map-by core run the job as mpirun's would",
          "[integration][habits]") {
  // Each of these was -t ag-output, -r eport-bindings or "unknown option".
  RunSpec s;
  s.argv = {bin("dlaunch"), "-np=2", "-tag-output", "-merge-stderr-to-stdout", "-map-by", "core", "-rank-by", "core",
            "-report-bindings", "--gpus-per-node", "0", "/bin/sh", "-c", "echo out-$RANK; echo err-$RANK >&2"};
  RunResult r = run(s, 30);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(sorted_lines(r.out) == std::vector<std::string>{"[0@localhost] err-0", "[0@localhost] out-0",
                                                        "[1@localhost] err-1", "[1@localhost] out-1"});
  CHECK(r.err.find("rank 0 on localhost") != std::string::npos);  // -report-bindings' line
  // What does not map onto dlaunch's placement is refused before anything runs, naming what to write.
  const std::string mark = new_marker();
  s.argv = {bin("dlaunch"), "-np", "2", "-map-by", "socket", "sleep", mark};
  r = run(s, 30);
  CHECK(r.code == 2);
  CHECK(r.err.find("--map-by ppr:N:socket") != std::string::npos);
  CHECK(marked(mark).empty());
}

TEST_CASE("the launch shell's variables reach a local job's ranks without -x, and nothing warns", "[integration]") {
  TempDir tmp;
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "2", "--gpus-per-node", "0", "--output-filename", tmp.path, "/usr/bin/env"};
  s.set_env = {{"STEPS", "60"}, {"NCCL_SOCKET_IFNAME", "eth0"}, {"GLOO_SOCKET_IFNAME", "eth0"}};
  RunResult r = run(s, 30);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("not sent") == std::string::npos);
  for (int rank = 0; rank < 2; ++rank) {
    auto e = env_of(tmp.path, rank);
    CHECK(e["STEPS"] == "60");
    CHECK(e["NCCL_SOCKET_IFNAME"] == "eth0");
  }
}
