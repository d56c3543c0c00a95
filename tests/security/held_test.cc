// What another local user can see of a running job, and what its bytes do to
// the job's ports (docs/security.md, "Threat model"): the job's
// token is on no command line, the job's processes' environments are closed
// to it, the temp dirs the job makes are 0700, and junk sent to every port
// dlaunch listens on leaves the job running to a normal end.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "tests/security/other_user.h"

using dl::sec::OtherUser;

namespace {

// Each rank runs MPI_Init and MPI_Finalize (so the agent makes its temp
// dir), writes its token and pid, then waits for DIR/go (60 s at most).
constexpr const char* kRank =
    R"(d="$1"; /usr/bin/python3 -c 'from mpi4py import MPI; MPI.COMM_WORLD.Barrier()' || exit 3
printf '%s\n%s\n%s\n' "$DLAUNCH_TOKEN" "$$" "$PPID" > "$d/rank.$RANK.tmp" && mv "$d/rank.$RANK.tmp" "$d/rank.$RANK"
i=0; while [ ! -e "$d/go" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo "rank $RANK done")";

// Connects to each port given and sends junk: random bytes, a huge length,
// a half-sent frame; then holds the connections a moment and closes them.
constexpr const char* kJunk = R"(import os, socket, sys, time
socks = []
for p in sys.argv[1:]:
    for payload in (os.urandom(256), b"\xff\xff\xff\xff" + b"x" * 64, b"DLH1\x00\x00"):
        try:
            s = socket.create_connection(("127.0.0.1", int(p)), timeout=2)
            s.sendall(payload)
            socks.append(s)
        except OSError:
            pass
time.sleep(1)
for s in socks:
    s.close()
print("sent to", len(sys.argv) - 1, "ports")
)";

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}


}  // namespace

TEST_CASE("another user sees no token, reads no environment, finds 0700 temp dirs, and its junk ends no job",
          "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  OtherUser other;
  char tmpl[] = "/tmp/dlsec-held.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  // The job's TMPDIR is world-writable and sticky, as /tmp is.
  const std::string shared_tmp = other.dir() + "/tmp";
  REQUIRE(::mkdir(shared_tmp.c_str(), 01777) == 0);
  REQUIRE(::chmod(shared_tmp.c_str(), 01777) == 0);

  dl::it::RunSpec spec;
  spec.set_env["TMPDIR"] = shared_tmp;
  spec.argv = {dl::it::bin("dlaunch"), "-n", "2", "/bin/sh", "-c", kRank, "rank", dir};
  dl::it::Child job = dl::it::start(spec);
  dl::it::ChildGuard guard{job, dir};
  for (int i = 0; i < 600 && !(std::filesystem::exists(dir + "/rank.0") && std::filesystem::exists(dir + "/rank.1"));
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto r0 = lines_of(dir + "/rank.0");
  REQUIRE(r0.size() == 3);
  const std::string token = r0[0], rank_pid = r0[1], agent_pid = r0[2];
  REQUIRE(token.size() >= 32);

  // Every process's command line, as the other user reads them.
  dl::it::RunSpec ps;
  ps.argv = {"/bin/sh", "-c", "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null; echo; done"};
  const auto cmdlines = dl::it::run(other.as(ps), 30);
  CHECK(cmdlines.code == 0);
  CHECK(cmdlines.out.find("dlaunch") != std::string::npos);  // it did see the job
  CHECK(cmdlines.out.find(token) == std::string::npos);

  // The environments of the job's processes are closed to it.
  for (const std::string& pid : {rank_pid, agent_pid, std::to_string(job.pid)}) {
    dl::it::RunSpec env;
    env.argv = {"/bin/cat", "/proc/" + pid + "/environ"};
    const auto r = dl::it::run(other.as(env), 30);
    CHECK(r.code != 0);
    CHECK(r.out.find(token) == std::string::npos);
  }

  // Whatever the job made in the shared TMPDIR is 0700 and ours.
  int made = 0;
  for (auto& e : std::filesystem::directory_iterator(shared_tmp)) {
    struct stat st;
    REQUIRE(::lstat(e.path().c_str(), &st) == 0);
    INFO(e.path().string());
    CHECK(st.st_uid == ::geteuid());
    CHECK((st.st_mode & 077) == 0);
    ++made;
  }
  CHECK(made > 0);  // the agent's temp dir at least

  // Junk to every port dlaunch and its agent listen on.
  std::vector<std::string> ports;
  for (pid_t pid : {job.pid, static_cast<pid_t>(std::stol(agent_pid))})
    for (unsigned p : dl::sec::listening_ports(pid)) ports.push_back(std::to_string(p));
  REQUIRE_FALSE(ports.empty());
  const std::string junk_py = other.dir() + "/junk.py";
  { std::ofstream(junk_py) << kJunk; }
  dl::it::RunSpec junk;
  junk.argv = {"/usr/bin/python3", junk_py};
  junk.argv.insert(junk.argv.end(), ports.begin(), ports.end());
  const auto j = dl::it::run(other.as(junk), 60);
  INFO(j.out + j.err);
  CHECK(j.code == 0);

  std::ofstream(dir + "/go") << "";
  const auto end = dl::it::wait(job, 90);
  INFO(end.out + end.err);
  CHECK(end.code == 0);
  CHECK(end.out.find("rank 0 done") != std::string::npos);
  CHECK(end.out.find("rank 1 done") != std::string::npos);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
