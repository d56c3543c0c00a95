// The job's store and control ports against another local user
// (docs/security.md): one who floods them with idle connections, and one
// who squats the port a per-node job's store is to listen on.
#include <catch2/catch.hpp>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include "tests/security/other_user.h"

using dl::sec::OtherUser;
namespace it = dl::it;

namespace {

// flood PORT1 PORT2 COUNT SECONDS: holds COUNT idle connections to each
// port, opening a new one for each the server closes; prints "ready" after
// two seconds of it, and at the end how many it opened and how many the
// server closed.
const char* kFlood = R"(
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
static long opened, closed_by_server;
static int open_one(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET, a.sin_port = htons(port), a.sin_addr.s_addr = htonl(0x7f000001);
  if (fd >= 0) connect(fd, (struct sockaddr*)&a, sizeof a), ++opened;
  return fd;
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
int main(int argc, char** argv) {
  int ports[2] = {atoi(argv[1]), atoi(argv[2])}, n = atoi(argv[3]);
  double end = now() + atof(argv[4]), ready = now() + 2;
  struct rlimit r;
  getrlimit(RLIMIT_NOFILE, &r), r.rlim_cur = r.rlim_max, setrlimit(RLIMIT_NOFILE, &r);
  struct pollfd* p = calloc(2 * n, sizeof *p);
  for (int i = 0; i < 2 * n; ++i) p[i].fd = open_one(ports[i % 2]), p[i].events = POLLIN;
  while (now() < end) {
    if (ready && now() > ready) printf("ready\n"), fflush(stdout), ready = 0;
    if (poll(p, 2 * n, 50) <= 0) continue;
    for (int i = 0; i < 2 * n; ++i) {
      if (!p[i].revents) continue;
      char buf[256];
      ssize_t k = recv(p[i].fd, buf, sizeof buf, MSG_DONTWAIT);
      if (k > 0 || (k < 0 && errno == EAGAIN)) continue;
      close(p[i].fd), ++closed_by_server;
      p[i].fd = open_one(ports[i % 2]);
    }
  }
  printf("opened %ld closed %ld\n", opened, closed_by_server);
  return 0;
}
)";

// squat: listens on 127.0.0.1, a port the kernel picks, prints it, and
// accepts connections without ever answering, for 60 s.
const char* kSquat = R"(
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
int main(void) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  socklen_t len = sizeof a;
  a.sin_family = AF_INET, a.sin_addr.s_addr = htonl(0x7f000001);
  if (bind(l, (struct sockaddr*)&a, sizeof a) || listen(l, 64) || getsockname(l, (struct sockaddr*)&a, &len)) return 1;
  printf("port %d\n", ntohs(a.sin_port));
  fflush(stdout);
  for (int i = 0; i < 600; ++i) {
    struct pollfd p = {l, POLLIN, 0};
    if (poll(&p, 1, 100) == 1) accept(l, 0, 0);
  }
  return 0;
}
)";

size_t open_descriptors(pid_t pid) {
  size_t n = 0;
  if (DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("store flood: another user's idle connections do not keep a job's ranks from its store",
          "[security][slow]") {
  if (!OtherUser::available()) {
    WARN("needs root and useradd to make another user; skipped");
    return;
  }
  OtherUser other;
  const std::string flood = dl::sec::compile_c(other.dir(), "flood", kFlood);
  it::TempDir tmp;
  const std::string go = tmp.path + "/go", m = it::new_marker();
  // The launcher may hold 1024 descriptors and no more: the intruder's 6000
  // connections would take them all if each were kept until its handshake,
  // and fill the store's backlog: the ranks would get no reply from the store.
  it::RunSpec job;
  job.argv = {"/usr/bin/prlimit", "--nofile=1024:1024", it::bin("dlaunch"), "-v", "-n", "2", "sh", "-c",
              ": " + m + "; i=0; while [ ! -e " + go + " ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; exec " +
                  it::bin("dlaunch-hello")};
  it::Child c = it::start(job);
  it::ChildGuard guard{c, m};
  std::string err;
  REQUIRE(it::read_fd_until(c.err_fd, err, ", job ", 30));
  std::smatch ports;
  REQUIRE(std::regex_search(err, ports, std::regex("control server on 127\\.0\\.0\\.1:(\\d+), store on port (\\d+)")));

  it::RunSpec attack;
  attack.argv = {flood, ports[1].str(), ports[2].str(), "3000", "10"};
  it::Child f = it::start(other.as(attack));
  it::ChildGuard fguard{f, flood};
  std::string fout;
  REQUIRE(it::read_fd_until(f.out_fd, fout, "ready", 20));
  size_t most = 0;
  for (int i = 0; i < 10; ++i, std::this_thread::sleep_for(std::chrono::milliseconds(100)))
    most = std::max(most, open_descriptors(c.pid));
  it::write_file(go, "");  // the ranks go to the store now, under the flood
  it::RunResult r = it::wait(c, 60);
  const bool flood_still_on = it::alive(f.pid);
  it::RunResult fr = it::wait(f, 30);
  INFO(r.err + fr.out + fr.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("rank 0 passed the barrier with all 2 ranks") != std::string::npos);
  CHECK(r.out.find("rank 1 passed the barrier with all 2 ranks") != std::string::npos);
  CHECK(flood_still_on);  // the job got through during the flood, not after it
  // The launcher held a few dozen descriptors, not the intruder's thousands.
  CHECK(most < 200);
  std::smatch counts;
  REQUIRE(std::regex_search(fr.out, counts, std::regex("opened (\\d+) closed (\\d+)")));
  // Each port closed at once whatever it held over 16 (kPreAuthPerLocalUser):
  // of its first 6000 alone, 5968.
  CHECK(std::stol(counts[2].str()) >= 5968);
  CHECK(r.err.find("closed ") != std::string::npos);
  CHECK(r.err.find("from " + std::string("user ") + other.name()) != std::string::npos);
}

TEST_CASE("store squat: a per-node job names the other user who holds its rendezvous port", "[security]") {
  if (!OtherUser::available()) {
    WARN("needs root and useradd to make another user; skipped");
    return;
  }
  OtherUser other;
  const std::string squat = dl::sec::compile_c(other.dir(), "squat", kSquat);
  it::RunSpec attack;
  attack.argv = {squat};
  it::Child s = it::start(other.as(attack));
  it::ChildGuard sguard{s, squat};
  std::string out;
  REQUIRE(it::read_fd_until(s.out_fd, out, "\n", 20));
  std::smatch port;
  REQUIRE(std::regex_search(out, port, std::regex("port (\\d+)")));
  const std::string named = "port " + port[1].str() + " on 127.0.0.1 is held by user " + other.name() + " (uid " +
                            std::to_string(other.uid()) + "), not by a dlaunch store: choose another --rdzv port";
  for (const char* node_rank : {"0", "1"}) {
    it::RunSpec job;
    job.argv = {it::bin("dlaunch"), "--nnodes", "2", "--node-rank", node_rank, "--rdzv",
                "tcp://127.0.0.1:" + port[1].str(), "true"};
    job.set_env["DLAUNCH_TOKEN"] = "store-squat-test-token-0123456789abcdef";
    it::RunResult r = it::run(job, 60);
    INFO("node rank " << node_rank << ": " << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find(named) != std::string::npos);
    CHECK(r.seconds < 8);
  }
}
