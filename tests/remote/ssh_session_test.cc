// The libssh adapter against real sshds: host keys, authentication, exec,
// stdin, exit status, the local address.
#include <catch2/catch.hpp>

#include "errors/error.h"
#include "remote/ssh/quote.h"
#include "remote/ssh/session.h"
#include "tests/remote/ssh_test_util.h"

namespace ssh = dl::ssh;
using dl::cluster::Cluster;
using dl::cluster::InNamespace;
using dl::cluster::ScratchDir;

TEST_CASE("ssh session runs a command with a stdin payload and keeps stdin open", "[remote][cluster][ssh]") {
  Cluster c(2);
  ScratchDir scratch;
  InNamespace in(c, "h0");
  ssh::Session s(dl::cluster::target("h1"), dl::cluster::isolated_options(c, scratch));
  CHECK(s.user() == "root");
  CHECK(s.remote_address() == c.address(1));
  CHECK(s.local_address() == c.address(0));  // the launcher's default control address
  auto p = s.exec(ssh::join_quoted({"sh", "-c", "hostname; cat"}));
  p->write_stdin("token-0123456789\n");
  // stdin stays open: the command echoes the payload and keeps running.
  for (int i = 0; i < 100 && p->out().find("token") == std::string::npos; ++i)
    REQUIRE(p->poll_output(std::chrono::milliseconds(50)));
  CHECK(p->out() == "h1\ntoken-0123456789\n");
  CHECK_FALSE(p->exit_status().has_value());
  p->close_stdin();  // EOF: cat ends
  CHECK(p->wait(std::chrono::seconds(5)) == 0);
}

TEST_CASE("ssh session passes a hostile argument byte-identical", "[remote][cluster][ssh]") {
  Cluster c(2);
  ScratchDir scratch;
  InNamespace in(c, "h0");
  ssh::Session s(dl::cluster::target("h1"), dl::cluster::isolated_options(c, scratch));
  std::string hostile = "a b'c\"d$(touch /tmp/dl-pwned)`id`;|&*~\n\\ end";
  auto p = s.exec(ssh::join_quoted({"printf", "%s", hostile}));
  p->close_stdin();
  CHECK(p->wait(std::chrono::seconds(5)) == 0);
  CHECK(p->out() == hostile);
  CHECK(access("/tmp/dl-pwned", F_OK) != 0);
}

TEST_CASE("ssh session reports exit status, stderr and signals", "[remote][cluster][ssh]") {
  Cluster c(2);
  ScratchDir scratch;
  InNamespace in(c, "h0");
  ssh::Session s(dl::cluster::target("h1"), dl::cluster::isolated_options(c, scratch));
  auto p = s.exec("dlaunch-agent-missing --x");
  p->offer_stdin("token\n");  // stdin left open, as the launcher does (the command may have ended already)
  // poll_output alone (no wait) ends with the exit status set.
  for (int i = 0; i < 100 && p->poll_output(std::chrono::milliseconds(50)); ++i) {
  }
  REQUIRE(p->exit_status().has_value());
  CHECK(*p->exit_status() == 127);
  CHECK(p->wait(std::chrono::seconds(5)) == 127);
  CHECK(p->err().find("dlaunch-agent-missing") != std::string::npos);
  CHECK(p->err().find("not found") != std::string::npos);
  auto q = s.exec("echo out; echo err >&2; exit 7");
  CHECK(q->wait(std::chrono::seconds(5)) == 7);
  CHECK(q->out() == "out\n");
  CHECK(q->err() == "err\n");
  auto k = s.exec("kill -KILL $$");
  CHECK(k->wait(std::chrono::seconds(5)) == 128 + 9);
}

TEST_CASE("ssh host keys: unknown refused, accept_new adds it, changed refused", "[remote][cluster][ssh]") {
  Cluster c(3);
  ScratchDir scratch;
  InNamespace in(c, "h0");
  auto o = dl::cluster::isolated_options(c, scratch);
  o.known_hosts_file = scratch.path + "/known_hosts";
  dl::cluster::write_file(o.known_hosts_file, "");
  try {
    ssh::Session s(dl::cluster::target("h1"), o);
    FAIL("connected to a host with an unknown key");
  } catch (const dl::AuthError& e) {
    std::string m = e.what();
    CHECK(m.find("h1") != std::string::npos);
    CHECK(m.find("host key unknown") != std::string::npos);
    CHECK(m.find("ssh-keyscan -H " + c.address(1)) != std::string::npos);
    CHECK(m.find("--ssh-accept-new") != std::string::npos);
    CHECK(m.find('\n') == std::string::npos);
  }
  o.accept_new = true;
  { ssh::Session s(dl::cluster::target("h1"), o); }
  std::string added = dl::cluster::read_file(o.known_hosts_file);
  std::string h1_key = dl::cluster::read_file(c.dir() + "/h1/ssh_host_ed25519_key.pub");
  CHECK(added.find(h1_key.substr(0, h1_key.find(' ', 12))) != std::string::npos);
  o.accept_new = false;
  { ssh::Session s(dl::cluster::target("h1"), o); }  // now known

  // h2's address with h1's key: a changed key, refused even with accept_new.
  std::string h2_line = c.address(2) + " " + h1_key;
  dl::cluster::write_file(o.known_hosts_file, h2_line);
  o.accept_new = true;
  CHECK_THROWS_WITH(ssh::Session(dl::cluster::target("h2"), o), Catch::Contains("HOST KEY CHANGED") &&
                                                 Catch::Contains("ssh-keygen -R " + c.address(2)));
  CHECK(dl::cluster::read_file(o.known_hosts_file) == h2_line);
}

TEST_CASE("ssh authentication failure names the user and the keys tried", "[remote][cluster][ssh]") {
  Cluster c(2);
  ScratchDir scratch;
  std::string wrong = scratch.path + "/wrong_key";
  REQUIRE(dl::cluster::run_argv({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", wrong}).status == 0);
  // A config without the cluster's IdentityFile.
  std::string cfg = scratch.path + "/config";
  dl::cluster::write_file(cfg, "Host *\n  User root\n  UserKnownHostsFile " + c.known_hosts() + "\n");
  InNamespace in(c, "h0");
  auto o = dl::cluster::isolated_options(c, scratch);
  o.config_file = cfg;
  o.identity_files = {wrong};
  try {
    ssh::Session s(dl::cluster::target(c.address(1)), o);
    FAIL("authenticated with the wrong key");
  } catch (const dl::AuthError& e) {
    std::string m = e.what();
    CHECK(m.find("authentication failed for user root") != std::string::npos);
    CHECK(m.find(wrong) != std::string::npos);
    CHECK(m.find("authorized_keys") != std::string::npos);
  }
  o.identity_files = {wrong, c.key()};  // the right key after the wrong one still works
  ssh::Session ok(dl::cluster::target(c.address(1)), o);
  CHECK(ok.user() == "root");
}

TEST_CASE("ssh connection refused and unreachable are told apart", "[remote][cluster][ssh]") {
  Cluster c(3);
  ScratchDir scratch;
  REQUIRE(c.script({"stop-sshd", c.id(), "h1"}).status == 0);
  REQUIRE(c.script({"link", c.id(), "h2", "down"}).status == 0);
  InNamespace in(c, "h0");
  auto o = dl::cluster::isolated_options(c, scratch);
  o.connect_timeout = std::chrono::milliseconds(800);
  CHECK_THROWS_WITH(ssh::Session(dl::cluster::target("h1"), o), Catch::Contains("h1") && Catch::Contains("connection refused"));
  CHECK_THROWS_WITH(ssh::Session(dl::cluster::target("h2"), o), Catch::Contains("h2") && Catch::Contains("unreachable"));
  CHECK_THROWS_WITH(ssh::Session(dl::cluster::target("h0", 2222), o), Catch::Contains("connection refused"));
}

TEST_CASE("ssh poll_output returns when output arrives, not at its timeout", "[remote][cluster][ssh]") {
  // The doctor times its ssh round trip around this wait: output that came
  // during it must end it (it once waited the timeout out, a fake 100 ms).
  Cluster c(2);
  ScratchDir scratch;
  InNamespace in(c, "h0");
  ssh::Session s(dl::cluster::target("h1"), dl::cluster::isolated_options(c, scratch));
  auto p = s.exec("sleep 0.3; echo hi; cat");
  const auto t0 = std::chrono::steady_clock::now();
  while (p->out().empty()) REQUIRE(p->poll_output(std::chrono::seconds(20)));
  const double s_taken = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(p->out() == "hi\n");
  CHECK(s_taken < 5);
  p->close_stdin();
  CHECK(p->wait(std::chrono::seconds(5)) == 0);
}
