// Bad input refused before anything starts (docs/dlaunch.md, "What dlaunch
// refuses"): exit 2, one "dlaunch: error:" line naming the option or file and
// what to do, and no rank ran (each would have created a marker file).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
struct Refusal {
  std::vector<std::string> options;          // before the program
  std::string want;                          // a part of the error line
  std::map<std::string, std::string> env{};  // added to dlaunch's environment
  bool program = true;                       // false: the options name the programs (--app)
};

// Runs `dlaunch OPTIONS sh -c 'touch MARKER'` (through `sh -c 'LIMITS; exec
// dlaunch ...'` when `limits` is not empty) and checks the refusal.
void check_refused(const Refusal& r, const TempDir& tmp, const std::string& limits = "", long uid = -1) {
  const std::string marker = tmp.path + "/ran";
  std::vector<std::string> argv = {bin("dlaunch")};
  argv.insert(argv.end(), r.options.begin(), r.options.end());
  if (r.program) argv.insert(argv.end(), {"/bin/sh", "-c", "touch " + marker});
  RunSpec s;
  s.argv = argv;
  if (!limits.empty()) {
    s.argv = {"/bin/bash", "-c", limits + "; exec \"$@\"", "bash"};
    s.argv.insert(s.argv.end(), argv.begin(), argv.end());
  }
  s.set_env = r.env;
  s.unset_env = {"DLAUNCH_TOKEN"};
  if (uid >= 0) s.uid = s.gid = uid, s.set_env["HOME"] = tmp.path;
  RunResult res = run(s, 20);
  std::string shown;
  for (const auto& a : r.options) shown += a + " ";
  INFO("dlaunch " << shown << "\n" << res.err);
  CHECK_FALSE(res.timed_out);
  CHECK(res.code == 2);
  CHECK(res.err.rfind("dlaunch: error: ", 0) == 0);
  CHECK(res.err.find(r.want) != std::string::npos);
  CHECK(lines(res.err).size() == 1);
  CHECK(::access(marker.c_str(), F_OK) != 0);
}

// The marker's directory writable by anyone, so that a rank run as another
// user could have created it.
void open_to_all(const TempDir& tmp) { ::chmod(tmp.path.c_str(), 01777); }
}  // namespace

TEST_CASE("bad input: nan, inf and huge durations are refused with the option's bound", "[integration]") {
  TempDir tmp;
  const std::string job = "a number above 0 and at most 31622400 (366 days), or 0 (no timeout)";
  const std::string wait = "a number above 0 and at most 1000000 (11.6 days)";
  for (const Refusal& r : std::vector<Refusal>{
           {{"--timeout", "nan"}, "--timeout takes seconds: " + job + ", got 'nan'"},
           {{"--timeout", "inf"}, "--timeout takes seconds: " + job + ", got 'inf'"},
           {{"--timeout", "1e10"}, "--timeout takes seconds: " + job + ", got '1e10'"},
           {{"--agent-timeout", "nan"}, "--agent-timeout takes seconds: " + wait + ", got 'nan'"},
           {{"--heartbeat-timeout", "nan"}, "--heartbeat-timeout takes seconds: " + wait + ", got 'nan'"},
           {{"--heartbeat-timeout", "inf"}, "--heartbeat-timeout takes seconds: " + wait + ", got 'inf'"},
           {{"--kill-grace", "1e300"}, "--kill-grace takes seconds: " + wait},
           {{"--stack-timeout", "-inf"}, "--stack-timeout takes seconds: " + wait},
           {{"--fence-timeout", "nan"}, "--fence-timeout takes seconds: " + wait},
           {{"--ssh-timeout", "inf"}, "--ssh-timeout takes seconds: " + wait},
           {{"--rdzv", "tcp://127.0.0.1:1", "--nnodes", "2", "--node-rank", "0", "--rdzv-timeout", "nan"},
            "--rdzv-timeout takes seconds: " + wait + ", got 'nan'"},
           {{}, "--timeout takes seconds", {{"DLAUNCH_TIMEOUT", "inf"}}},
       })
    check_refused(r, tmp);
}

TEST_CASE("bad input: a hostfile, env file, config, app or ssh config that is no regular file is refused at once",
          "[integration]") {
  TempDir tmp;
  const std::string fifo = tmp.path + "/fifo", big = tmp.path + "/big";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  write_file(big, std::string((1 << 20) + 1, '#'));
  const std::string dev = ": is a character device, not a regular file";
  for (const Refusal& r : std::vector<Refusal>{
           {{"--hostfile", "/dev/zero"}, "hostfile /dev/zero" + dev + "; give a file of host lines"},
           {{"--hostfile", fifo}, "hostfile " + fifo + ": is a FIFO (named pipe), not a regular file"},
           {{"--hostfile", tmp.path}, "hostfile " + tmp.path + ": is a directory, not a regular file"},
           {{"--hostfile", big}, "hostfile " + big + ": is 1048577 bytes, more than the 1 MiB dlaunch reads"},
           {{"--env-file", tmp.path}, "--env-file " + tmp.path + ": is a directory, not a regular file"},
           {{"--env-file", "/dev/zero"}, "--env-file /dev/zero" + dev + "; give a file of NAME=value lines"},
           {{"--app", "/dev/zero"}, "--app /dev/zero" + dev, {}, false},
           {{"--ssh-config", fifo}, "--ssh-config " + fifo + ": is a FIFO"},
           {{}, "user config " + tmp.path + ": is a directory, not a regular file; fix or unset DLAUNCH_CONFIG",
            {{"DLAUNCH_CONFIG", tmp.path}}},
           {{}, "user config /dev/zero" + dev + "; fix or unset DLAUNCH_CONFIG", {{"DLAUNCH_CONFIG", "/dev/zero"}}},
           {{}, "user config " + fifo + ": is a FIFO", {{"DLAUNCH_CONFIG", fifo}}},
           {{}, "user config " + tmp.path + "/none: cannot read it (No such file or directory); fix or unset "
                "DLAUNCH_CONFIG", {{"DLAUNCH_CONFIG", tmp.path + "/none"}}},
       })
    check_refused(r, tmp);
  // The default user config, found through XDG_CONFIG_HOME, as a FIFO.
  TempDir xdg;
  REQUIRE(::mkdir((xdg.path + "/dlaunch").c_str(), 0700) == 0);
  REQUIRE(::mkfifo((xdg.path + "/dlaunch/config").c_str(), 0600) == 0);
  check_refused({{}, "user config " + xdg.path + "/dlaunch/config: is a FIFO (named pipe), not a regular file; fix or "
                     "remove it", {{"XDG_CONFIG_HOME", xdg.path}}}, tmp);
}

TEST_CASE("bad input: -x names, --stdin, --npernode, --gpus-per-node and -H that the job cannot use", "[integration]") {
  TempDir tmp;
  const std::string rule = "expected VAR, VAR=value or 'PREFIX*', VAR of letters, digits and _ not starting with a digit";
  for (const Refusal& r : std::vector<Refusal>{
           {{"-x", "=foo"}, "-x: " + rule + ", got '=foo'"},
           {{"-x", "A B=1"}, "-x: " + rule + ", got 'A B=1'"},
           {{"-x", "1BAD=2"}, "-x: " + rule + ", got '1BAD=2'"},
           {{"-n", "1", "/bin/true", ":", "-n", "1", "-x", "1BAD=2"}, "app context 2: -x: " + rule},
           {{"--stdin", "5", "-n", "2"}, "--stdin 5: the job has ranks 0 to 1; give one of them, or none"},
           {{"--stdin", "3", "-H", "localhost:2"}, "--stdin 3: the job has ranks 0 to 1"},
           {{"--npernode", "0"}, "--npernode needs at least 1 rank per node, got 0"},
           {{"--gpus-per-node", "-1"}, "--gpus-per-node takes a number of GPUs, 0 or more"},
           {{"-H", ""}, "-H: expected a comma-separated list of hosts such as 'node1:2,node2:2', got ''"},
       })
    check_refused(r, tmp);
}

TEST_CASE("bad input: --control-addr, --local-ranks-filter, --wdir and --log-dir that the job cannot use",
          "[integration]") {
  TempDir tmp;
  const std::string open = tmp.path + "/open", file = tmp.path + "/file";
  REQUIRE(::mkdir(open.c_str(), 0777) == 0);
  REQUIRE(::chmod(open.c_str(), 0777) == 0);
  write_file(file, "");
  for (const Refusal& r : std::vector<Refusal>{
           {{"--control-addr", "x;y", "-H", "node1.invalid", "-n", "1"},
            "--control-addr 'x;y': expected an IP address of this host"},
           {{"--control-addr", "999.1.1.1", "-n", "1"}, "--control-addr '999.1.1.1': expected an IP address"},
           {{"--control-addr", "203.0.113.9", "-n", "1"}, "--control-addr 203.0.113.9: not an address of this host"},
           {{"--local-ranks-filter", "99", "-n", "1"},
            "--local-ranks-filter 99: rank 99 is not in the job, which has ranks 0 to 0"},
           {{"--local-ranks-filter", "0,2", "-H", "localhost:2"}, "--local-ranks-filter 0,2: rank 2 is not in the job"},
           {{"--wdir", tmp.path + "/gone", "-n", "1"},
            "--wdir " + tmp.path + "/gone: No such file or directory (every rank runs on this machine)"},
           {{"--wdir", file, "-H", "localhost:2"}, "--wdir " + file + ": not a directory"},
           {{"-n", "1", "/bin/true", ":", "-n", "1", "--wdir", tmp.path + "/gone"}, "--wdir " + tmp.path + "/gone"},
           {{"--log-dir", open, "-n", "1"}, "--log-dir: " + open + " is writable by every user"},
       })
    check_refused(r, tmp);
  // --dry-run refuses a missing --wdir as the run would.
  RunSpec s;
  s.argv = {bin("dlaunch"), "--dry-run", "--wdir", tmp.path + "/gone", "-n", "1", "/bin/true"};
  RunResult res = run(s, 20);
  CHECK(res.code == 2);
  CHECK(res.err.find("--wdir " + tmp.path + "/gone: No such file") != std::string::npos);
  // --log-dir alone, a directory of this user's: the job runs, nothing is
  // written there, and -v says so.
  s.argv = {bin("dlaunch"), "-v", "--log-dir", tmp.path + "/logs", "-n", "1", "/bin/true"};
  res = run(s, 20);
  INFO(res.err);
  CHECK(res.code == 0);
  CHECK(res.err.find("--log-dir " + tmp.path + "/logs: no -r/-t stream goes to files, so nothing is written there") !=
        std::string::npos);
  CHECK(::access((tmp.path + "/logs").c_str(), F_OK) != 0);
}

TEST_CASE("bad input: a --token-file others may read, or shorter than a token, is refused", "[integration]") {
  TempDir tmp;
  const std::string token = tmp.path + "/token", shorter = tmp.path + "/short";
  write_file(token, std::string(64, 'a') + "\n", 0644);
  write_file(shorter, "x\n", 0600);
  const std::vector<std::string> rdzv = {"--rdzv", "tcp://127.0.0.1:1", "--nnodes", "2", "--node-rank", "0",
                                         "--token-file"};
  auto with = [&](const std::string& file) {
    auto v = rdzv;
    v.push_back(file);
    return v;
  };
  check_refused({with(token), "--token-file " + token + ": mode 0644 lets other users read or change the job token; "
                              "run `chmod 600 " + token + "`"}, tmp);
  ::chmod(token.c_str(), 0640);
  check_refused({with(token), "mode 0640"}, tmp);
  check_refused({with(shorter), "--token-file " + shorter + ": holds 1 characters, fewer than the 64 of a job token; "
                                "write one with `dlaunch token > " + shorter + "`"}, tmp);
  check_refused({with("/dev/zero"), "--token-file /dev/zero: is a character device, not a regular file"}, tmp);
}

TEST_CASE("bad input: more ranks than this host's descriptor limit are refused before any starts", "[integration]") {
  TempDir tmp;
  // `ulimit -n` sets both limits; dlaunch raises the soft one to the hard one.
  check_refused({{"-n", "400"}, "the agent of the 400 ranks on this host needs 1264 file descriptors (3 per rank and 64 "
                                "of its own), and RLIMIT_NOFILE lets a process of this user open 1024; raise the hard "
                                "limit (ulimit -Hn, limits.conf nofile) or run fewer ranks on this host"},
                tmp, "ulimit -n 1024");
  check_refused({{"-n", "1000000"}, "the agent of the 1000000 ranks on this host needs 3000064 file descriptors"}, tmp,
                "ulimit -n 1024");
  // 2 ranks here and 400 on a host never reached: the launcher's files are too many.
  check_refused({{"--output-filename", tmp.path + "/out", "-H", "localhost:2,dl-nowhere.invalid:400"},
                 "the launcher, writing the output files of 402 ranks needs 868 file descriptors"},
                tmp, "ulimit -n 800");
  // A job that fits runs under the same kind of limit.
  RunSpec s;
  s.argv = {"/bin/bash", "-c", "ulimit -n 1024; exec \"$@\"", "bash", bin("dlaunch"), "-n", "4", "/bin/true"};
  RunResult r = run(s, 30);
  INFO(r.err);
  CHECK(r.code == 0);
}

TEST_CASE("bad input: more ranks than this user may still start processes are refused", "[integration]") {
  if (::geteuid() != 0) {
    WARN("skipped: needs root to run dlaunch as nobody (root is not bound by RLIMIT_NPROC)");
    return;
  }
  TempDir tmp;
  open_to_all(tmp);
  const long nobody = 65534;
  check_refused({{"-n", "100"}, "the 100 ranks on this host need 132 processes (one per rank and 32 for dlaunch), this "
                                "user runs "},
                tmp, "ulimit -u 60", nobody);
  RunSpec s;
  s.argv = {"/bin/bash", "-c", "ulimit -u 60; exec \"$@\"", "bash", bin("dlaunch"), "-n", "2", "/bin/true"};
  s.uid = s.gid = nobody;
  s.cwd = tmp.path;
  s.set_env["HOME"] = tmp.path;
  RunResult r = run(s, 30);
  INFO(r.err);
  CHECK(r.code == 0);
}
