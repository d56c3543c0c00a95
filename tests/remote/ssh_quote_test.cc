// shell_quote / join_quoted against real shells, and Target parsing.
#include <catch2/catch.hpp>

#include "errors/error.h"
#include "remote/ssh/quote.h"
#include "remote/ssh/session.h"
#include "tests/cluster/cluster_fixture.h"

namespace ssh = dl::ssh;

namespace {
const std::vector<std::string> kHostile = {
    "",          " ",          "a b",        "$(touch /tmp/pwned)", "`id`",      "; rm -rf /x",
    "a'b",       "'",          "''",         "\"",                  "\\",        "a\nb\n",
    "$HOME",     "*",          "~",          "x|y&z",               "a=b",       "-n",
    "\t\r",      "%s%n",       "!event",     "{a,b}",               "#comment",  "é ünïcode",
    "'\"'$'\"'", "a\\'b",      ">/tmp/out"};
}  // namespace

TEST_CASE("ssh shell_quote round-trips hostile strings through sh, bash and dash", "[remote][ssh]") {
  for (const char* shell : {"/bin/sh", "/bin/bash", "/bin/dash"}) {
    for (const auto& s : kHostile) {
      // The remote sshd does `$SHELL -c "<command>"`; do the same locally.
      auto r = dl::cluster::run_argv({shell, "-c", ssh::join_quoted({"printf", "%s", s})});
      INFO(shell << " word: [" << s << "] quoted: " << ssh::shell_quote(s));
      CHECK(r.status == 0);
      CHECK(r.output == s);
    }
  }
}

TEST_CASE("ssh join_quoted keeps word boundaries", "[remote][ssh]") {
  auto r = dl::cluster::run_argv({"/bin/sh", "-c", ssh::join_quoted({"printf", "<%s>", "a b", "", "c"})});
  CHECK(r.output == "<a b><><c>");
  CHECK(ssh::join_quoted({"dlaunch-agent", "--job", "x1"}) == "dlaunch-agent --job x1");
  CHECK(ssh::shell_quote("a=b") == "'a=b'");  // never an assignment in command position
  CHECK(ssh::shell_quote("it's") == "'it'\\''s'");
}

TEST_CASE("ssh parse_target reads user@host:port", "[remote][ssh]") {
  auto t = ssh::parse_target("alice@node1:2222", "hosts:1");
  CHECK(t.user == "alice");
  CHECK(t.host == "node1");
  CHECK(t.port == 2222);
  t = ssh::parse_target("node2", "hosts:2");
  CHECK((t.user.empty() && t.host == "node2" && t.port == 0));
  t = ssh::parse_target("[fe80::1]:22", "hosts:3");
  CHECK((t.host == "fe80::1" && t.port == 22));
  CHECK(t.str() == "[fe80::1]:22");
  t = ssh::parse_target("fe80::2", "hosts:4");
  CHECK((t.host == "fe80::2" && t.port == 0));
  CHECK_THROWS_AS(ssh::parse_target("node:0", "hosts:5"), dl::UsageError);
  CHECK_THROWS_AS(ssh::parse_target("node:99999", "hosts:5"), dl::UsageError);
  CHECK_THROWS_WITH(ssh::parse_target("@node", "hosts:6"), Catch::Contains("hosts:6"));
  CHECK_THROWS_AS(ssh::parse_target("bob@", "hosts:7"), dl::UsageError);
}
