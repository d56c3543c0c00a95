// Tests of the namespace cluster itself: it must be a faithful small cluster
// (isolated, reachable by ssh) and leave nothing behind.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "tests/cluster/cluster_fixture.h"

using dl::cluster::Cluster;
using dl::cluster::run_argv;

namespace {
std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (size_t p; (p = s.find(" \n")) != std::string::npos;) s.erase(p, 1);
  return s;
}
// The value of `key=` in cluster.sh up's output, or "".
std::string field(const std::string& text, const std::string& key) {
  const auto at = text.find(key + "=");
  if (at == std::string::npos) return "";
  const auto from = at + key.size() + 1;
  return text.substr(from, text.find('\n', from) - from);
}
bool process_gone(int pid) {
  for (int i = 0; i < 100; ++i) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}
// Where cluster.sh can make a CPU group: cgroup v1's cpu controller, or v2
// with cpu delegated by the root.
bool machine_has_cpu_cgroups() {
  if (access("/sys/fs/cgroup/cpu/cgroup.procs", F_OK) == 0) return true;
  const std::string v2 = dl::cluster::read_file("/sys/fs/cgroup/cgroup.subtree_control");
  return (" " + v2).find(" cpu ") != std::string::npos || (" " + v2).find(" cpu\n") != std::string::npos;
}
}  // namespace

TEST_CASE("cluster hosts ping each other and nothing else", "[cluster]") {
  Cluster c(4);
  for (int i = 0; i < c.size(); ++i)
    for (int j = 0; j < c.size(); ++j) {
      auto r = c.run_in(c.host(i), "ping -c1 -W2 " + c.address(j));
      INFO(r.output);
      CHECK(r.status == 0);
    }
  // The root namespace has no address or route into the cluster.
  auto root = run_argv({"ip", "-o", "addr"});
  CHECK(root.output.find(c.address(0)) == std::string::npos);
  std::string subnet = c.address(0).substr(0, c.address(0).rfind('.')) + ".0/24";
  auto route = run_argv({"ip", "route"});
  CHECK(route.output.find(subnet) == std::string::npos);
  CHECK(c.run_in("h0", "ip route").output.find(subnet) != std::string::npos);
}

TEST_CASE("cluster ssh from h0 reaches every host as root", "[cluster]") {
  Cluster c(4);
  for (int i = 0; i < c.size(); ++i) {
    auto r = c.run_in("h0", "ssh -F " + c.ssh_config() + " " + c.host(i) + " 'hostname; hostname -I; id -u'");
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(trim(r.output) == c.host(i) + "\n" + c.address(i) + "\n0");
  }
}

TEST_CASE("cluster down kills every process and deletes every namespace", "[cluster]") {
  std::string id, dir, cgroup;
  int pid = 0;
  {
    Cluster c(2);
    id = c.id();
    dir = c.dir();
    auto r = c.run_in("h1", "sleep 1000 >/dev/null 2>&1 & echo $!");
    REQUIRE(r.status == 0);
    pid = std::stoi(r.output);
    auto in_ns = c.pids_in("h1");
    CHECK(std::find(in_ns.begin(), in_ns.end(), pid) != in_ns.end());
    // One CPU group for the whole cluster (docs/testing-cluster.md): what
    // exec runs and what an ssh login starts are both in it.
    cgroup = trim(run_argv({"sed", "-n", "s/^CGROUP=//p", dir + "/cluster.env"}).output);
    if (machine_has_cpu_cgroups()) {
      REQUIRE(cgroup.find("/dlaunch-cluster-" + id) != std::string::npos);
      const std::string member = ":/dlaunch-cluster-" + id + "\n";
      CHECK(dl::cluster::read_file("/proc/" + std::to_string(pid) + "/cgroup").find(member) != std::string::npos);
      auto via_ssh = c.run_in("h0", "ssh -F " + c.ssh_config() + " h1 cat /proc/self/cgroup");
      CHECK(via_ssh.output.find(member) != std::string::npos);
      CHECK(dl::cluster::read_file(cgroup + "/cgroup.procs").find(std::to_string(pid) + "\n") != std::string::npos);
    }
  }
  CHECK(process_gone(pid));
  auto ns = run_argv({"ip", "netns", "list"});
  CHECK(ns.output.find("dl" + id + "-") == std::string::npos);
  CHECK(access(dir.c_str(), F_OK) != 0);
  CHECK(access(("/etc/netns/dl" + id + "-h0").c_str(), F_OK) != 0);
  if (!cgroup.empty()) CHECK(access(cgroup.c_str(), F_OK) != 0);
  // down again is harmless.
  CHECK(run_argv({Cluster::script_path(), "down", id}).status == 0);
}

TEST_CASE("cluster two clusters at once do not collide", "[cluster]") {
  Cluster a(2), b(2);
  CHECK(a.id() != b.id());
  CHECK(a.address(0) != b.address(0));
  CHECK(a.run_in("h0", "ssh -F " + a.ssh_config() + " h1 true").status == 0);
  CHECK(b.run_in("h0", "ssh -F " + b.ssh_config() + " h1 true").status == 0);
  // Isolated: a's h0 cannot reach b's h1.
  CHECK(a.run_in("h0", "ping -c1 -W1 " + b.address(1)).status != 0);
}

TEST_CASE("cluster fault hooks: sshd, link, block, rate, setenv", "[cluster][slow]") {
  Cluster c(3);
  std::string ssh = "ssh -F " + c.ssh_config() + " ";
  REQUIRE(c.script({"stop-sshd", c.id(), "h1"}).status == 0);
  auto r = c.run_in("h0", ssh + "h1 true");
  CHECK(r.status == 255);
  CHECK(r.output.find("Connection refused") != std::string::npos);
  REQUIRE(c.script({"start-sshd", c.id(), "h1"}).status == 0);
  CHECK(c.run_in("h0", ssh + "h1 true").status == 0);

  REQUIRE(c.script({"link", c.id(), "h2", "down"}).status == 0);
  CHECK(c.run_in("h0", "ping -c1 -W1 " + c.address(2)).status != 0);
  REQUIRE(c.script({"link", c.id(), "h2", "up"}).status == 0);
  CHECK(c.run_in("h0", "ping -c1 -W2 " + c.address(2)).status == 0);

  REQUIRE(c.script({"block", c.id(), "h0", "h1", "22", "reject"}).status == 0);
  CHECK(c.run_in("h0", ssh + "h1 true").status != 0);
  CHECK(c.run_in("h0", ssh + "h2 true").status == 0);  // only h0 -> h1 is blocked
  REQUIRE(c.script({"unblock", c.id(), "h1"}).status == 0);
  CHECK(c.run_in("h0", ssh + "h1 true").status == 0);

  REQUIRE(c.script({"slow", c.id(), "h2", "0", "1mbit"}).status == 0);
  auto q = run_argv({"tc", "-n", c.netns("h2"), "qdisc", "show", "dev", "eth0"});
  CHECK(q.output.find("rate 1Mbit") != std::string::npos);
  REQUIRE(c.script({"unslow", c.id(), "h2"}).status == 0);

  REQUIRE(c.script({"setenv", c.id(), "h2", "DL_DOCTOR_MARK=h2-only"}).status == 0);
  CHECK(trim(c.run_in("h0", ssh + "h2 'echo $DL_DOCTOR_MARK'").output) == "h2-only");
  CHECK(trim(c.run_in("h0", ssh + "h1 'echo x$DL_DOCTOR_MARK'").output) == "x");
}

// The chaos run's partition-half: the upper half cut off from the lower, both
// ways, each half still whole inside (a dropped SYN: ssh gives up at its ConnectTimeout).
TEST_CASE("cluster fault hooks: a partition of half the hosts cuts TCP between the halves only", "[cluster][slow]") {
  Cluster c(4);
  const std::string ssh = "ssh -o ConnectTimeout=2 -F " + c.ssh_config() + " ";
  REQUIRE(c.script({"partition", c.id(), "h2", "h3"}).status == 0);
  CHECK(c.run_in("h0", ssh + "h2 true").status != 0);
  CHECK(c.run_in("h3", ssh + "h1 true").status != 0);
  CHECK(c.run_in("h2", ssh + "h3 true").status == 0);
  CHECK(c.run_in("h1", ssh + "h0 true").status == 0);
  for (auto& h : c.hosts()) REQUIRE(c.script({"unblock", c.id(), h}).status == 0);
  CHECK(c.run_in("h0", ssh + "h2 true").status == 0);
  CHECK(c.run_in("h3", ssh + "h1 true").status == 0);
  CHECK(c.script({"partition", c.id(), "h9"}).status == 2);  // no such host
}

TEST_CASE("cluster refuses to start without root and says why", "[cluster]") {
  auto r = run_argv({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                     Cluster::script_path(), "up", "--owner", "1"});
  CHECK(r.status == 3);
  CHECK(r.output.find("needs root") != std::string::npos);
}

TEST_CASE("cluster up without --owner is refused and names the forms that work", "[cluster]") {
  // Its own parent is no owner: from a subshell or a runner's one-command
  // shell it is gone at once, and anyone's next up would reap the cluster.
  auto r = run_argv({Cluster::script_path(), "up", "--hosts", "1"});
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("up needs --owner PID") != std::string::npos);
  CHECK(r.output.find("--owner $$") != std::string::npos);
  CHECK(r.output.find("DL_CLUSTER_ID=") == std::string::npos);
  auto bad = run_argv({Cluster::script_path(), "up", "--owner", "me"});
  CHECK(bad.status == 2);
  CHECK(bad.output.find("--owner takes a process id, got 'me'") != std::string::npos);
}

TEST_CASE("cluster up takes down a cluster whose owner is gone and keeps one whose owner lives", "[cluster]") {
  const pid_t owner = fork();
  REQUIRE(owner >= 0);
  if (owner == 0) {
    execlp("sleep", "sleep", "600", static_cast<char*>(nullptr));
    _exit(127);
  }
  auto up = run_argv({Cluster::script_path(), "up", "--hosts", "1", "--owner", std::to_string(owner)},
                     std::chrono::seconds(120));
  const std::string id = field(up.output, "DL_CLUSTER_ID"), dir = field(up.output, "DL_CLUSTER_DIR");
  INFO(up.output);
  kill(owner, SIGKILL);
  waitpid(owner, nullptr, 0);
  REQUIRE(up.status == 0);
  REQUIRE_FALSE(id.empty());
  {
    Cluster living(1);  // its up reaps first
    CHECK(access(dir.c_str(), F_OK) != 0);
    CHECK(run_argv({"ip", "netns", "list"}).output.find("dl" + id + "-") == std::string::npos);
    Cluster next(1);  // and this one's reap leaves a cluster whose owner (this process) lives
    CHECK(access(living.dir().c_str(), F_OK) == 0);
    CHECK(living.run_in("h0", "true").status == 0);
  }
  run_argv({Cluster::script_path(), "down", id}, std::chrono::seconds(60));  // when the reap did not
}
