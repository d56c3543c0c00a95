// The PMIx server of a job (docs/security.md, "The PMIx server"), attacked
// by another local user as findings F1 describes: a libpmix client of its own
// that knows the job's namespace and server address, claims the job owner's
// uid (an LD_PRELOAD of geteuid/getegid, which libpmix's `native` security
// over TCP believes) and calls PMIx_Spawn or PMIx_Abort. It must get nowhere,
// start nothing, and be named on the job's stderr; the job goes on.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "tests/security/other_user.h"

using dl::sec::OtherUser;

namespace {

// PMIx_Init, then spawn `sh -c CMD`, abort with code 77, or nothing ("init").
constexpr const char* kClient = R"(#include <pmix.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char** argv) {
  pmix_proc_t me;
  if (argc < 2) return 2;
  pmix_status_t rc = PMIx_Init(&me, NULL, 0);
  if (rc != PMIX_SUCCESS) { printf("init failed %d\n", rc); return 10; }
  printf("connected as %s:%u\n", me.nspace, me.rank);
  fflush(stdout);
  if (!strcmp(argv[1], "abort")) _exit(PMIx_Abort(77, "attacker was here", NULL, 0) == PMIX_SUCCESS ? 0 : 11);
  if (!strcmp(argv[1], "spawn") && argc > 2) {
    char* av[] = {"/bin/sh", "-c", argv[2], NULL};
    pmix_app_t a;
    PMIX_APP_CONSTRUCT(&a);
    a.cmd = "/bin/sh";
    a.argv = av;
    a.maxprocs = 1;
    char ns[PMIX_MAX_NSLEN + 1];
    rc = PMIx_Spawn(NULL, 0, &a, 1, ns);
    printf("spawn %d\n", rc);
    _exit(rc == PMIX_SUCCESS ? 0 : 12);
  }
  _exit(0);
}
)";

// Claims the uid and gid in $U and $G.
constexpr const char* kShim = R"(#include <stdlib.h>
#include <sys/types.h>
uid_t geteuid(void) { return (uid_t)atoi(getenv("U")); }
gid_t getegid(void) { return (gid_t)atoi(getenv("G")); }
uid_t getuid(void) { return (uid_t)atoi(getenv("U")); }
gid_t getgid(void) { return (gid_t)atoi(getenv("G")); }
)";

// Rank 0 writes its PMIx address, namespace and agent pid to DIR/info; every
// rank then waits for DIR/go (60 s at most) and says it is done. With MPI,
// between MPI_Init and a barrier.
constexpr const char* kMpiRank = R"(import os, sys, time
from mpi4py import MPI
c = MPI.COMM_WORLD
d = sys.argv[1]
if c.rank == 0:
    with open(d + "/info.tmp", "w") as f:
        f.write("%s\n%s\n%d\n" % (os.environ["PMIX_SERVER_URI41"], os.environ["PMIX_NAMESPACE"], os.getppid()))
    os.rename(d + "/info.tmp", d + "/info")
end = time.time() + 60
while not os.path.exists(d + "/go") and time.time() < end:
    time.sleep(0.05)
c.Barrier()
print("rank %d done" % c.rank)
)";
constexpr const char* kPlainRank =
    R"(d="$1"; if [ "$RANK" = 0 ]; then printf '%s\n%s\n%s\n' "$PMIX_SERVER_URI41" "$PMIX_NAMESPACE" "$PPID" > "$d/info.tmp" && mv "$d/info.tmp" "$d/info"; fi
i=0; while [ ! -e "$d/go" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo "rank $RANK done")";

// A job of this user: 2 ranks on a host of 4 slots (room for a spawn), its
// temp files in a private dir.
struct Victim {
  std::string dir;
  dl::it::Child child;
  std::string uri, nspace;
  pid_t agent = -1;

  // `restarts`: --max-restarts 1 (a restarted job's ranks reach the same
  // front door, in every attempt).
  explicit Victim(bool mpi, bool restarts = false) {
    char tmpl[] = "/tmp/dlsec-victim.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    dl::it::RunSpec spec;
    spec.set_env["TMPDIR"] = dir;
    if (mpi) {
      std::ofstream(dir + "/rank.py") << kMpiRank;
      spec.argv = {dl::it::bin("dlaunch"), "-H", "localhost:4", "-n", "2", "/usr/bin/python3", dir + "/rank.py", dir};
    } else {
      spec.argv = {dl::it::bin("dlaunch"), "-H", "localhost:4", "-n", "2", "/bin/sh", "-c", kPlainRank, "rank", dir};
    }
    if (restarts) spec.argv.insert(spec.argv.begin() + 1, {"--max-restarts", "1"});
    child = dl::it::start(spec);
  }
  ~Victim() {
    // A killed job's agent may still be removing its own files in there.
    std::error_code ec;
    for (int i = 0; i < 50 && (std::filesystem::remove_all(dir, ec), std::filesystem::exists(dir)); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  // Waits for rank 0's info; false after 60 s.
  bool read_info() {
    for (int i = 0; i < 600 && !std::filesystem::exists(dir + "/info"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream f(dir + "/info");
    std::string pid;
    if (!std::getline(f, uri) || !std::getline(f, nspace) || !std::getline(f, pid)) return false;
    agent = static_cast<pid_t>(std::stol(pid));
    return true;
  }
  // Lets the ranks finish.
  dl::it::RunResult finish() {
    std::ofstream(dir + "/go") << "";
    return dl::it::wait(child, 90);
  }
  // Temp dirs the agent made (dlaunch-<pid>-...): made only when libpmix starts.
  // The agent's PMIx temp dirs ($TMPDIR/dlaunch-<pid>-<hex>; its store
  // door's, dlaunch-<pid>-store-<hex>, is not libpmix's).
  int agent_temp_dirs() const {
    int n = 0;
    for (auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("dlaunch-", 0) == 0 && name.find("-store-") == std::string::npos) ++n;
    }
    return n;
  }
};

// The environment a rank's PMIx client reads, pointing at the victim's server.
std::map<std::string, std::string> pmix_env(const Victim& v, const std::string& rank) {
  return {{"PMIX_NAMESPACE", v.nspace},        {"PMIX_RANK", rank},
          {"PMIX_SERVER_URI41", v.uri},        {"PMIX_SERVER_URI4", v.uri},
          {"PMIX_SECURITY_MODE", "native"},    {"PMIX_GDS_MODULE", "hash"},
          {"PMIX_BFROP_BUFFER_TYPE", "PMIX_BFROP_BUFFER_NON_DESC"}};
}

// The attacker's client and uid shim, built into its dir.
struct Tools {
  std::string client, shim;
  explicit Tools(const std::string& dir) {
    client = dl::sec::compile_c(dir, "pmix_client", kClient, "$(pkg-config --cflags --libs pmix)");
    shim = dl::sec::compile_c(dir, "uid_shim.so", kShim, "-shared -fPIC");
  }
};

// Runs the client as `other`, claiming this process's uid and gid.
dl::it::RunResult attack(const OtherUser& other, const Tools& tools, const Victim& v,
                         const std::vector<std::string>& args) {
  dl::it::RunSpec spec;
  spec.argv = {tools.client};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.set_env = pmix_env(v, "0");
  spec.set_env["LD_PRELOAD"] = tools.shim;
  spec.set_env["U"] = std::to_string(::geteuid());
  spec.set_env["G"] = std::to_string(::getegid());
  return dl::it::run(other.as(spec), 60);
}


std::string refusal_of(const OtherUser& other) {
  return "refused a connection to this job's PMIx port from user " + other.name() + " (uid " +
         std::to_string(other.uid()) + ")";
}

// The other user with its tools, a victim job whose rank 0 has said where
// its server is, and a guard that ends the job whatever the test does.
struct Scene {
  OtherUser other;
  Tools tools;
  Victim v;
  dl::it::ChildGuard guard;
  explicit Scene(bool mpi, bool restarts = false)
      : tools(other.dir()), v(mpi, restarts), guard{v.child, v.dir} {}
};

// The victim's job ended normally, both ranks done, and the intruder named.
void check_job_went_on(Scene& s) {
  const auto job = s.v.finish();
  INFO(job.out + job.err);
  CHECK(job.code == 0);
  CHECK(job.out.find("rank 0 done") != std::string::npos);
  CHECK(job.out.find("rank 1 done") != std::string::npos);
  CHECK(job.err.find(refusal_of(s.other)) != std::string::npos);
  CHECK(job.err.find("attacker was here") == std::string::npos);
  CHECK(job.err.find("called MPI_Init") == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(s.other.dir() + "/pwned"));
}

}  // namespace

TEST_CASE("PMIx server: another user's client starts nothing in a job that never called MPI_Init, and is named",
          "[security][pmix]") {
  DLSEC_NEEDS_OTHER_USER();
  Scene s(false);
  auto& v = s.v;
  REQUIRE(v.read_info());
  const auto r = attack(s.other, s.tools, v, {"spawn", "id -u > " + s.other.dir() + "/pwned"});
  INFO(r.out + r.err);
  CHECK(r.code != 0);
  CHECK(r.out.find("connected") == std::string::npos);
  CHECK(v.agent_temp_dirs() == 0);  // libpmix was never started for it
  check_job_went_on(s);
}

TEST_CASE("PMIx server: in a running MPI job, another user can neither spawn nor abort, libpmix has no TCP port",
          "[security][pmix][slow]") {
  DLSEC_NEEDS_OTHER_USER();
  Scene s(true);
  auto& v = s.v;
  REQUIRE(v.read_info());
  // libpmix serves rank 0 by now; the agent listens on TCP only at the door.
  const std::string door = v.uri.substr(v.uri.rfind(':') + 1);
  CHECK(dl::sec::listening_ports(v.agent) == std::vector<unsigned>{static_cast<unsigned>(std::stoul(door))});
  const auto spawn = attack(s.other, s.tools, v, {"spawn", "id -u > " + s.other.dir() + "/pwned"});
  INFO("spawn: " + spawn.out + spawn.err);
  CHECK(spawn.code != 0);
  CHECK(spawn.out.find("connected") == std::string::npos);
  const auto abort = attack(s.other, s.tools, v, {"abort"});
  INFO("abort: " + abort.out + abort.err);
  CHECK(abort.code != 0);
  CHECK(abort.out.find("connected") == std::string::npos);
  check_job_went_on(s);
}

TEST_CASE("PMIx server: the same client run by the job's own user gets in (the refusals are the uid check)",
          "[security][pmix][slow]") {
  DLSEC_NEEDS_OTHER_USER();
  Scene s(true);
  auto& v = s.v;
  REQUIRE(v.read_info());
  dl::it::RunSpec spec;
  spec.argv = {s.tools.client, "init"};
  spec.set_env = pmix_env(v, "0");
  const auto r = dl::it::run(spec, 60);
  INFO(r.out + r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("connected as " + v.nspace + ":0") != std::string::npos);
  // A second client as rank 0 would confuse the job's MPI_Finalize: the
  // guard ends the job.
}

// Under --max-restarts the ranks' PMIx port is the front door of a server
// that serves every attempt (docs/failures.md, "MPI jobs"): another user's
// connection is refused and named before anything starts, and the job goes on.
TEST_CASE("PMIx server under --max-restarts: another user's connection to a rank's port does not end the job, and is "
          "named",
          "[security][pmix][restart]") {
  DLSEC_NEEDS_OTHER_USER();
  Scene s(false, true);
  auto& v = s.v;
  REQUIRE(v.read_info());
  const auto r = attack(s.other, s.tools, v, {"init"});
  INFO(r.out + r.err);
  CHECK(r.code != 0);
  CHECK(r.out.find("connected") == std::string::npos);
  check_job_went_on(s);
}
