// The collectives' channels against another local user (docs/security.md):
// a rank's listening port, reachable by anyone, during communicator setup;
// and the file of a file:// store, in a directory others can write.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tests/security/other_user.h"

using dl::sec::OtherUser;
using Catch::Matchers::Contains;
namespace it = dl::it;

namespace {

// Connects to every port named on stdin; "close" closes each at once,
// "silent" holds each, and once stdin ends reports whether the victim
// closed it. A port that closed between the test's look and the knock
// (setup over, on a loaded machine) is reported as refused.
constexpr const char* kKnocker = R"py(import socket, sys
held = []
for line in sys.stdin:
    port = int(line)
    try:
        s = socket.create_connection(("127.0.0.1", port))
    except ConnectionRefusedError:
        print("knocked %d: refused" % port, flush=True)
        continue
    print("knocked %d: connected" % port, flush=True)
    if sys.argv[1] == "close":
        s.close()
    else:
        held.append(s)
for s in held:
    s.settimeout(30)
    try:
        print("closed by victim" if s.recv(1) == b"" else "got bytes", flush=True)
    except OSError as e:
        print("closed by victim (%s)" % e, flush=True)
)py";

// Socket inode -> port of every TCP socket listening on every address.
std::map<std::string, int> listeners_on_any() {
  std::map<std::string, int> out;
  // A rank's port is one dual-stack socket (collectives/tcp/mesh.cc), listed
  // in tcp6; where the kernel has no IPv6, an IPv4 one in tcp.
  for (const auto& [table, any] : {std::pair<const char*, std::string>{"/proc/net/tcp", "00000000:"},
                                   {"/proc/net/tcp6", "00000000000000000000000000000000:"}}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);
    while (std::getline(f, line)) {
      std::istringstream in(line);
      std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
      in >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (st == "0A" && local.rfind(any, 0) == 0) out[inode] = std::stoi(local.substr(any.size()), nullptr, 16);
    }
  }
  return out;
}

// True while `pid` (a child of this process) has not exited; leaves it to wait().
bool running(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
}

// /proc/PID/cmdline, or "" once the process is gone (reading an exiting
// process's fails with ESRCH).
std::string cmdline_of(const std::string& pid) {
  std::string out;
  const int fd = ::open(("/proc/" + pid + "/cmdline").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

bool descends_from(pid_t pid, pid_t root) {
  for (int i = 0; i < 64 && pid > 1; ++i, pid = it::parent_of(pid))
    if (pid == root) return true;
  return false;
}

// The ports that `dlaunch bench` processes started under `root` listen on.
std::set<int> bench_ports(pid_t root) {
  const auto any = listeners_on_any();
  std::set<int> ports;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (!descends_from(std::stoi(name), root)) continue;
    if (cmdline_of(name).find(std::string("\0bench\0", 7)) == std::string::npos) continue;
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator("/proc/" + name + "/fd", ec)) {
      const std::string link = std::filesystem::read_symlink(fd.path(), ec).string();
      if (link.rfind("socket:[", 0) != 0) continue;
      auto hit = any.find(link.substr(8, link.size() - 9));
      if (hit != any.end()) ports.insert(hit->second);
    }
  }
  return ports;
}

// A 2-rank `dlaunch bench`; rank 1 starts `stagger` later, so rank 0 waits
// in communicator setup meanwhile (as after a long `import torch`).
it::RunSpec bench_job(const std::string& marker, const std::string& stagger) {
  const std::string bench = it::bin("dlaunch") + " bench -b 8 -e 1K; exit $?";
  it::RunSpec s;
  s.argv = {it::bin("dlaunch"), "--mpi", "none", "-n", "1", "sh", "-c", bench, marker, ":", "-n", "1",
            "sh", "-c", "sleep " + stagger + "; " + bench, marker};
  return s;
}

// Runs the job while the other user knocks (`mode`) on every port its ranks
// listen on; returns the job's result and what the knocker printed, and
// whether its first knock landed while that rank was still in setup.
struct Knocked {
  it::RunResult job;
  std::string knocker;
  bool during_setup = false;
};

Knocked knock_during_setup(const OtherUser& other, const std::string& mode) {
  it::RunSpec k;
  k.argv = {"/usr/bin/python3", "-c", kKnocker, mode};
  k.stdin_hold = true;
  it::Child knocker = it::start(other.as(k));
  it::ChildGuard kg{knocker, ""};
  const std::string marker = it::new_marker();
  it::Child job = it::start(bench_job(marker, "2"));
  it::ChildGuard jg{job, marker};
  Knocked out;
  std::set<int> knocked;
  const double until = 20;  // seconds of watching; the job takes about 2
  for (int i = 0; i < until * 200 && running(job.pid); ++i) {
    for (int port : bench_ports(job.pid)) {
      if (!knocked.insert(port).second) continue;
      const std::string line = std::to_string(port) + "\n";
      REQUIRE(::write(knocker.in_fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
      const std::string said = "knocked " + std::to_string(port) + ": ";
      // The knocker prints each line in one write, so it arrives whole.
      REQUIRE(it::read_fd_until(knocker.out_fd, out.knocker, said, 10));
      const bool connected = out.knocker.find(said + "connected") != std::string::npos;
      if (knocked.size() == 1) out.during_setup = connected && bench_ports(job.pid).count(port) == 1;
    }
    ::usleep(5000);
  }
  out.job = it::wait(job, 60);
  ::close(knocker.in_fd);
  knocker.in_fd = -1;
  const it::RunResult k_end = it::wait(knocker, 40);
  out.knocker += k_end.out + k_end.err;
  return out;
}

// A directory for the other user's plants, removed afterwards.
struct Dir {
  std::string path;
  explicit Dir(mode_t mode) {
    char tmpl[] = "/tmp/dlsec-coll.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
    ::chmod(path.c_str(), mode);
  }
  ~Dir() { std::filesystem::remove_all(path); }
};

// A 2-rank bench whose ranks meet through a file:// store at `store`.
it::RunResult file_store_job(const std::string& store) {
  it::RunSpec s;
  s.argv = {it::bin("dlaunch"), "--mpi", "none", "-n", "2", "env", "-u", "DLAUNCH_TOKEN", it::bin("dlaunch"),
            "bench", "--url", "file://" + store, "-b", "8", "-e", "8"};
  return it::run(s, 60);
}

it::RunResult as_other(const OtherUser& other, const std::string& script) {
  it::RunSpec s;
  s.argv = {"/bin/sh", "-c", script};
  return it::run(other.as(s), 30);
}

}  // namespace

TEST_CASE("collectives: another user's connection to a rank's port during setup ends nothing, holds up nothing",
          "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  OtherUser other;
  // "close": connect and close at once; "silent": connect and say nothing.
  for (const std::string mode : {"close", "silent"}) {
    // Under load rank 1 may start so late that the first port knocked on is
    // one whose setup is already over: such a run tests nothing, try again.
    Knocked k = knock_during_setup(other, mode);
    for (int again = 0; again < 2 && !k.during_setup; ++again) k = knock_during_setup(other, mode);
    INFO(mode << "\njob stdout:\n" << k.job.out << "job stderr:\n" << k.job.err << "knocker:\n" << k.knocker);
    CHECK(k.during_setup);
    CHECK(k.job.code == 0);
    CHECK_FALSE(k.job.timed_out);
    CHECK(k.job.seconds < 15);  // not the setup timeout (300 s)
    CHECK_THAT(k.job.out, Contains("1024"));  // the bench's last row
    if (mode == "silent") CHECK_THAT(k.knocker, Contains("closed by victim") && !Contains("got bytes"));
  }
}

TEST_CASE("file store: another user's 0666 store file in a sticky directory is refused, nothing leaked",
          "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  OtherUser other;
  Dir sticky(01777);
  const std::string store = sticky.path + "/job.store";
  REQUIRE(as_other(other, "umask 0; : > " + store + " && chmod 666 " + store).code == 0);
  const it::RunResult r = file_store_job(store);
  INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
  CHECK(r.code != 0);
  CHECK_FALSE(r.timed_out);
  CHECK_THAT(r.err, Contains("store file " + store + " is not yours") && Contains(other.name()) &&
                        Contains("mode 0666") && Contains("remove it"));
  const it::RunResult seen = as_other(other, "wc -c < " + store + "; cat " + store);
  CHECK(seen.code == 0);
  CHECK(seen.out == "0\n");  // no token, no address
}

TEST_CASE("file store: a symbolic link planted by another user is not followed", "[security]") {
  DLSEC_NEEDS_OTHER_USER();
  OtherUser other;
  Dir mine(0700);
  const std::string precious = mine.path + "/precious", absent = mine.path + "/absent";
  { std::ofstream(precious) << "precious\n"; }
  ::chmod(precious.c_str(), 0600);
  SECTION("in a sticky directory") {
    Dir sticky(01777);
    const std::string store = sticky.path + "/job.store", other_store = sticky.path + "/job2.store";
    REQUIRE(as_other(other, "ln -s " + precious + " " + store + " && ln -s " + absent + " " + other_store).code == 0);
    for (const std::string& s : {store, other_store}) {
      const it::RunResult r = file_store_job(s);
      INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
      CHECK(r.code != 0);
      CHECK_THAT(r.err, Contains("store file " + s + " is a symbolic link of uid " + std::to_string(other.uid())) &&
                            Contains("not followed"));
    }
  }
  SECTION("in the other user's own directory") {
    const std::string store = other.dir() + "/job.store";
    REQUIRE(as_other(other, "chmod 777 . && ln -s " + precious + " " + store).code == 0);
    const it::RunResult r = file_store_job(store);
    INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
    CHECK(r.code != 0);
    CHECK_THAT(r.err, Contains("directory " + other.dir() + " of store file " + store + " belongs to uid " +
                               std::to_string(other.uid())));
  }
  CHECK(it::read_file(precious) == "precious\n");
  CHECK_FALSE(std::filesystem::exists(absent));
}
