// Two names for one machine across hosts: the agents' hellos carry a machine
// identity (machine-id, boot id, network namespace). Two -H entries reaching
// one namespace host (its name and its address) are refused before any rank
// runs; two namespace hosts, which share the kernel's machine-id and boot id,
// are two hosts.
#include <catch2/catch.hpp>

#include "tests/multihost/multihost_util.h"

using dl::cluster::Cluster;
using namespace dl::multihost;

namespace {
dl::cluster::RunResult run_hosts(const Cluster& c, const std::string& hosts, const std::string& program) {
  const std::string dlaunch = bin("dlaunch") + " -H " + hosts + " --ssh-config " + c.ssh_config();
  return c.run_in("h0", dlaunch + " -n 2 --gpus-per-node 0 " + program + " </dev/null", std::chrono::seconds(40));
}
}  // namespace

TEST_CASE("a namespace host under its name and its address is refused naming both before any rank runs",
          "[multihost][cluster][slow]") {
  Cluster c(3);
  const std::string marker = unique_marker();
  auto r = run_hosts(c, "h1:1," + c.address(1) + ":1", "sh -c 'echo RAN-" + marker + "'");
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(contains(r.output, "-H entries 'h1' and '" + c.address(1) + "' are the same machine"));
  CHECK(contains(r.output, "e.g. -H h1:2"));
  CHECK_FALSE(contains(r.output, "RAN-" + marker));
  CHECK(wait_clean(c, marker).empty());
}

TEST_CASE("two namespace hosts sharing machine-id and boot id are two hosts", "[multihost][cluster][slow]") {
  Cluster c(3);
  // What makes them two: not the kernel's ids (shared), their network namespaces.
  const std::string ids = "cat /etc/machine-id /proc/sys/kernel/random/boot_id 2>/dev/null";
  CHECK(c.run_in("h1", ids).output == c.run_in("h2", ids).output);
  auto r = run_hosts(c, "h1:1,h2:1", "sh -c 'echo R=$RANK L=$LOCAL_RANK N=$NODE_RANK H=$(hostname)'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(contains(r.output, "R=0 L=0 N=0 H=h1"));
  CHECK(contains(r.output, "R=1 L=0 N=1 H=h2"));
  CHECK(wait_clean(c, "R=").empty());
}
