#pragma once
// A test cluster of network namespaces for Catch2 tests (docs/testing-cluster.md).
//
//   dl::cluster::Cluster c(4);                       // cluster.sh up: 4 hosts h0..h3
//   auto r = c.run_in("h0", "ssh -F " + c.ssh_config() + " h1 hostname");
//   CHECK(r.status == 0);
//   { dl::cluster::InNamespace in(c, "h0"); ... }    // this thread's sockets live in h0
//
// The constructor throws std::runtime_error with cluster.sh's own message when
// the cluster cannot be built (not root, no `ip netns`, a tool missing), so the
// test FAILS saying why; it never skips. The destructor runs `cluster.sh down`,
// also when the test failed; a test process that crashed leaves its cluster to
// the reaper that every `up` runs.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace dl::cluster {

struct RunResult {
  int status = -1;       // exit status; 128+N for a signal; 124 when it timed out
  std::string output;    // stdout and stderr together, in order
};

// Runs argv (no shell) with stdout+stderr captured, killing it (its process
// group) after `timeout`. Never throws for the command's failure.
RunResult run_argv(const std::vector<std::string>& argv,
                   std::chrono::milliseconds timeout = std::chrono::seconds(60));

class Cluster {
 public:
  // Brings up `hosts` hosts (cluster.sh up --hosts N --owner <this pid>).
  explicit Cluster(int hosts = 4);
  ~Cluster();  // cluster.sh down; never throws
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  const std::string& id() const { return id_; }      // "4272"
  const std::string& dir() const { return dir_; }    // the cluster dir, removed by down
  int size() const { return hosts_; }
  std::string host(int i) const { return "h" + std::to_string(i); }
  std::string address(int i) const;                  // "10.216.176.<i+1>"
  std::string netns(const std::string& host) const { return "dl" + id_ + "-" + host; }
  std::vector<std::string> hosts() const;            // h0..h<K-1>
  std::vector<std::string> addresses() const;

  // Files for ssh clients: `ssh -F ssh_config() hN` works from inside any host.
  std::string ssh_config() const { return dir_ + "/ssh_config"; }
  std::string known_hosts() const { return dir_ + "/known_hosts"; }
  std::string key() const { return dir_ + "/id_ed25519"; }      // the client key (root on every host)
  std::string hostfile() const { return dir_ + "/hostfile"; }   // "<addr> slots=2" per host

  // Runs `shell_cmd` with sh -c inside `host`'s namespace (hostname = host).
  RunResult run_in(const std::string& host, const std::string& shell_cmd,
                   std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  // Runs `cluster.sh <args>` (the fault hooks: stop-sshd, link, block, slow, setenv).
  RunResult script(const std::vector<std::string>& args) const;
  // The pids of every process in `host`'s namespace (ip netns pids).
  std::vector<int> pids_in(const std::string& host) const;

  // The path of cluster.sh (for tests that drive it themselves).
  static std::string script_path();

 private:
  std::string id_, dir_, net_;
  int hosts_ = 0;
  int owner_pid_ = 0;
};

// Moves the calling thread into `host`'s network namespace until destroyed.
// Sockets (and threads) created meanwhile belong to that namespace. Throws
// std::runtime_error if setns(2) fails.
class InNamespace {
 public:
  InNamespace(const Cluster& cluster, const std::string& host);
  ~InNamespace();
  InNamespace(const InNamespace&) = delete;
  InNamespace& operator=(const InNamespace&) = delete;

 private:
  int original_ = -1;
};

// The whole of a file ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::string out;
  if (FILE* f = fopen(path.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    fclose(f);
  }
  return out;
}

}  // namespace dl::cluster
