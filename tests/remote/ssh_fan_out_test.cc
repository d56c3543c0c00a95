// Parallel fan-out over a 4-host cluster: per-host results, one-line errors.
#include <catch2/catch.hpp>

#include "remote/ssh/fan_out.h"
#include "remote/ssh/quote.h"
#include "tests/remote/ssh_test_util.h"

namespace ssh = dl::ssh;
using dl::cluster::Cluster;
using dl::cluster::InNamespace;
using dl::cluster::ScratchDir;

namespace {
std::vector<ssh::Target> targets_of(const Cluster& c) {
  std::vector<ssh::Target> t;
  for (auto& h : c.hosts()) t.push_back(dl::cluster::target(h));
  return t;
}
}  // namespace

TEST_CASE("ssh run_all runs hostname and cat with a payload on every host", "[remote][cluster][ssh]") {
  Cluster c(4);
  ScratchDir scratch;
  InNamespace in(c, "h0");
  auto targets = targets_of(c);
  std::vector<std::string> cmds(targets.size(), ssh::join_quoted({"sh", "-c", "hostname; cat"}));
  for (int parallel : {1, 2, 4}) {
    auto rs = ssh::run_all(targets, cmds, "the-token\n", dl::cluster::isolated_options(c, scratch),
                           parallel, std::chrono::seconds(10));
    REQUIRE(rs.size() == 4);
    for (int i = 0; i < 4; ++i) {
      INFO("parallel " << parallel << " host " << i << ": " << rs[i].error);
      CHECK(rs[i].error.empty());
      CHECK(rs[i].exit_status == 0);
      CHECK(rs[i].out == c.host(i) + "\nthe-token\n");
    }
  }
}

TEST_CASE("ssh start_all keeps commands running and reports each host's failure", "[remote][cluster][ssh]") {
  Cluster c(4);
  ScratchDir scratch;
  REQUIRE(c.script({"stop-sshd", c.id(), "h2"}).status == 0);
  InNamespace in(c, "h0");
  auto targets = targets_of(c);
  std::vector<std::string> cmds(4, "cat");
  cmds[3] = "dlaunch-agent-not-installed";
  auto rs = ssh::start_all(targets, cmds, "tok\n", dl::cluster::isolated_options(c, scratch), 3);
  for (int i : {0, 1, 3}) {
    INFO(rs[i].error);
    REQUIRE(rs[i].error.empty());
    REQUIRE(rs[i].process);
    CHECK(rs[i].session->local_address() == c.address(0));
  }
  CHECK(rs[2].error.find("h2") != std::string::npos);
  CHECK(rs[2].error.find("connection refused") != std::string::npos);
  CHECK(rs[2].error.find('\n') == std::string::npos);
  CHECK(!rs[2].session);
  // h3's command is not found: exit 127, and the message says what to do.
  int status = rs[3].process->wait(std::chrono::seconds(5));
  CHECK(status == 127);
  std::string msg = ssh::describe_start_failure(rs[3].session->name(), status, rs[3].process->err());
  CHECK(msg.find("not found") != std::string::npos);
  CHECK(msg.find("--prefix") != std::string::npos);
  // The others still run `cat` with stdin open until we close it.
  for (int i : {0, 1}) {
    CHECK(rs[i].process->poll_output(std::chrono::milliseconds(100)));
    rs[i].process->close_stdin();
    CHECK(rs[i].process->wait(std::chrono::seconds(5)) == 0);
    CHECK(rs[i].process->out() == "tok\n");
  }
}

TEST_CASE("ssh: a command that exits before reading its stdin payload is reported by its exit, not the write",
          "[remote][cluster][ssh]") {
  // 8 MiB is more than the channel's window: the write must wait for the
  // remote side, which exits without reading. Before, the write's failure
  // ("cannot write to the remote command's stdin") hid the exit status that
  // says why (127: not installed there), depending on which came first.
  Cluster c(2);
  ScratchDir scratch;
  InNamespace in(c, "h0");
  auto targets = targets_of(c);
  const std::string payload(8 << 20, 'x');
  std::vector<std::string> cmds(2, "dlaunch-agent-not-installed");
  auto ran = ssh::run_all(targets, cmds, payload, dl::cluster::isolated_options(c, scratch), 2, std::chrono::seconds(20));
  for (auto& r : ran) {
    INFO(r.error);
    CHECK(r.exit_status == 127);
    CHECK(r.error.find("not found") != std::string::npos);
    CHECK(r.error.find("stdin") == std::string::npos);
  }
  auto started = ssh::start_all(targets, cmds, payload, dl::cluster::isolated_options(c, scratch), 2);
  for (auto& s : started) {
    INFO(s.error);
    REQUIRE(s.error.empty());
    REQUIRE(s.process);
    CHECK(s.process->wait(std::chrono::seconds(10)) == 127);
  }
}
