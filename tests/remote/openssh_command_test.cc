// --launcher ssh without a cluster: the ssh command line (options, where the
// host goes, no token) and the remote script run by a real sh, hostile words
// included; the connection line; the failure messages.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>

#include "remote/openssh_starter.h"
#include "remote/ssh/quote.h"
#include "tests/cluster/cluster_fixture.h"

using namespace dl::remote;

namespace {
AgentStartSpec spec_for(const std::string& host) {
  AgentStartSpec s;
  s.node = 3;
  s.host = host;
  s.control_port = "4000";
  s.token = "secret-token-0123";
  s.args.node = 3;
  return s;
}

bool has_pair(const std::vector<std::string>& v, const std::string& a, const std::string& b) {
  for (size_t i = 0; i + 1 < v.size(); ++i)
    if (v[i] == a && v[i + 1] == b) return true;
  return false;
}

// Runs the remote command as the remote sh would, with $SSH_CONNECTION set.
dl::cluster::RunResult run_remote(const std::vector<std::string>& argv) {
  return dl::cluster::run_argv({"env", "SSH_CONNECTION=10.9.8.7 51000 10.9.8.1 22", "sh", "-c", argv.back()});
}
}  // namespace

TEST_CASE("openssh argv: batch mode, timeout, config, user, port, and the host after --", "[remote][ssh]") {
  StarterOptions o;
  o.ssh_timeout = std::chrono::milliseconds(2500);
  o.ssh_config = "/etc/cluster ssh config";
  o.ssh_accept_new = true;
  auto s = spec_for("node7");
  s.user = "alice", s.port = 2222;
  auto v = openssh_argv(o, s, "/opt/dl/bin/dlaunch-agent");
  CHECK(v.front() == "ssh");
  CHECK(has_pair(v, "-o", "BatchMode=yes"));
  CHECK(has_pair(v, "-o", "ConnectTimeout=3"));  // rounded up: never 0 (= the system's default)
  CHECK(has_pair(v, "-F", "/etc/cluster ssh config"));
  CHECK(has_pair(v, "-o", "StrictHostKeyChecking=accept-new"));
  CHECK(has_pair(v, "-l", "alice"));
  CHECK(has_pair(v, "-p", "2222"));
  CHECK(has_pair(v, "--", "node7"));
  CHECK(v.size() == static_cast<size_t>(std::find(v.begin(), v.end(), "--") - v.begin()) + 3);
  for (auto& w : v) CHECK(w.find("secret-token") == std::string::npos);
  o.ssh_accept_new = false;
  o.ssh_config.clear();
  auto plain = openssh_argv(o, spec_for("-oProxyCommand=touch /tmp/x"), "dlaunch-agent");
  CHECK(std::find(plain.begin(), plain.end(), "-F") == plain.end());
  CHECK(std::find(plain.begin(), plain.end(), "StrictHostKeyChecking=accept-new") == plain.end());
  // A host that looks like an option stays the destination.
  CHECK(has_pair(plain, "--", "-oProxyCommand=touch /tmp/x"));
}

TEST_CASE("openssh remote command: the connection line, then the agent with --connect to the client address", "[remote][ssh]") {
  StarterOptions o;
  auto v = openssh_argv(o, spec_for("h1"), "/bin/echo");
  auto r = run_remote(v);
  INFO(v.back() << "\n" << r.output);
  REQUIRE(r.status == 0);
  std::string client, server;
  REQUIRE(parse_ssh_connection(r.output.substr(0, r.output.find('\n')), &client, &server));
  CHECK(client == "10.9.8.7");
  CHECK(server == "10.9.8.1");
  const std::string agent_line = r.output.substr(r.output.find('\n') + 1);
  CHECK(agent_line.find("--node 3") != std::string::npos);
  CHECK(agent_line.find("--connect 10.9.8.7:4000") != std::string::npos);
  // --control-addr wins over the connection's address; an IPv6 one is bracketed.
  auto s = spec_for("h1");
  s.control_addr = "fd00::5";
  r = run_remote(openssh_argv(o, s, "/bin/echo"));
  CHECK(r.output.find("--connect [fd00::5]:4000") != std::string::npos);
}

TEST_CASE("openssh remote command: a hostile --prefix runs nothing and reads as not found", "[remote][ssh]") {
  char dir[] = "/tmp/dl-openssh-XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string pwned = std::string(dir) + "/pwned";
  const std::string agent = "/x/$(touch " + pwned + ")`touch " + pwned + "`; touch " + pwned + "/bin/dlaunch-agent";
  auto r = run_remote(openssh_argv(StarterOptions{}, spec_for("h1"), agent));
  INFO(r.output);
  CHECK(r.status == 127);
  CHECK(::access(pwned.c_str(), F_OK) != 0);
  CHECK(openssh_failure("h1", r.status, r.output, agent).find("dlaunch-agent was not found (" + agent + ")") !=
        std::string::npos);
  ::rmdir(dir);
}

TEST_CASE("openssh remote command without SSH_CONNECTION says to pass --control-addr", "[remote][ssh]") {
  auto v = openssh_argv(StarterOptions{}, spec_for("h1"), "/bin/echo");
  auto r = dl::cluster::run_argv({"env", "-u", "SSH_CONNECTION", "sh", "-c", v.back()});
  CHECK(r.status == 2);
  CHECK(r.output.find("--control-addr") != std::string::npos);
}

TEST_CASE("openssh failures name the host and the fix", "[remote][ssh]") {
  CHECK(openssh_failure("h2", 255, "ssh: connect to host 10.0.0.3 port 22: Connection refused\r\n", "a")
            .find("h2: ssh failed (exit 255): ssh: connect to host 10.0.0.3 port 22: Connection refused: is sshd") == 0);
  CHECK(openssh_failure("h3", 255, "No ED25519 host key is known for h3 and you have requested strict checking.\n"
                                   "Host key verification failed.\n", "a")
            .find("--ssh-accept-new") != std::string::npos);
  CHECK(openssh_failure("h1", 3, "boom\n", "a") == "h1: dlaunch-agent exited with status 3 (boom)");
  std::string client, server;
  CHECK_FALSE(parse_ssh_connection("hello world", &client, &server));
}
