// The launcher's threads do not grow with the number of hosts: every ssh
// session is driven by its one event loop (docs/ssh.md, "One loop for every
// host"). Counted in /proc/PID/task while a job sleeps on 2 and on 16 hosts.
#include <dirent.h>
#include <signal.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <thread>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;

namespace {
int threads_of(int pid) {
  int n = 0;
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  while (dirent* e = d ? ::readdir(d) : nullptr) n += e->d_name[0] != '.';
  if (d) ::closedir(d);
  return n;
}

// Runs `sleep MARK` on the first `hosts` hosts (one rank each) with
// `launcher`, and returns the launcher's thread count once every rank runs.
int threads_while_sleeping(const Cluster& c, int hosts, const std::string& launcher) {
  const std::string hf = c.dir() + "/hosts." + std::to_string(hosts);
  {
    std::ofstream out(hf);
    for (int i = 0; i < hosts; ++i) out << c.address(i) << " slots=1\n";
  }
  const std::string mark = unique_marker();
  auto f = std::async(std::launch::async, [&] {
    return c.run_in("h0", bin("dlaunch") + " --launcher " + launcher + " -n " + std::to_string(hosts) +
                              " --hostfile " + hf + " --ssh-config " + c.ssh_config() + " --timeout 20 sleep " + mark +
                              " </dev/null", std::chrono::seconds(60));
  });
  int running = 0;
  for (int i = 0; i < 300 && running < hosts; ++i) {
    running = 0;
    for (int h = 0; h < hosts; ++h) running += pids_matching(c, c.host(h), "sleep " + mark).empty() ? 0 : 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const int pid = launcher_pid(mark);
  const int threads = running == hosts && pid > 0 ? threads_of(pid) : -1;
  if (pid > 0) ::kill(pid, SIGINT);
  auto r = f.get();
  INFO(r.output);
  CHECK(r.status == 128 + SIGINT);
  CHECK(wait_clean(c, mark).empty());
  return threads;
}
}  // namespace

TEST_CASE("the launcher holds as many threads for 16 hosts as for 2", "[multihost][cluster][slow]") {
  Cluster c(16);
  for (const std::string launcher : {"libssh", "ssh"}) {
    INFO("--launcher " << launcher);
    const int two = threads_while_sleeping(c, 2, launcher);
    const int sixteen = threads_while_sleeping(c, 16, launcher);
    REQUIRE(two > 0);
    CHECK(sixteen == two);
    CHECK(sixteen <= 3);  // the loop, asio's resolver, the stdin reader at most
  }
}
