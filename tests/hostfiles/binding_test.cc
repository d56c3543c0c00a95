// The binding policy (hostfiles/binding.h): CPU lists, --bind-to plans and
// GPU binding by local rank. Pure; the agent's reading of the host is tested
// in tests/agent/.
#include <catch2/catch.hpp>

#include <optional>
#include <stdexcept>

#include "hostfiles/binding.h"

using namespace dl::hostfiles;
using V = std::vector<int>;
using Gpus = std::vector<std::string>;

TEST_CASE("cpu lists parse and format as the kernel writes them", "[hostfiles]") {
  CHECK(parse_cpu_list("0-3,8,10-11\n") == V{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpu_list("") == V{});
  CHECK(parse_cpu_list("5") == V{5});
  CHECK(parse_cpu_list("\t0-1 \n") == V{0, 1});  // as /proc/PID/status writes it
  CHECK(format_cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(format_cpu_list({}) == "");
  CHECK_THROWS_AS(parse_cpu_list("3-1"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpu_list("a"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpu_list("1;2"), std::invalid_argument);
}

TEST_CASE("bind-to core: consecutive cores by local rank, all their threads", "[hostfiles]") {
  CpuTopology t;
  t.cores = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  t.numa = {{0, 1, 4, 5}, {2, 3, 6, 7}};
  auto p = plan_cpus("core", t, 4, 1, "h1");
  CHECK(p == std::vector<V>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  auto q = plan_cpus("core", t, 2, 2, "h1");
  CHECK(q == std::vector<V>{{0, 1, 4, 5}, {2, 3, 6, 7}});
  try {
    plan_cpus("core", t, 3, 2, "node7");
    FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    CHECK(m.find("node7 has 4 usable cores") != std::string::npos);
    CHECK(m.find("need 6") != std::string::npos);
    CHECK(m.find("--bind-to numa or none") != std::string::npos);
  }
}

TEST_CASE("bind-to numa: local ranks in blocks over the nodes, and none binds nothing", "[hostfiles]") {
  CpuTopology t;
  t.cores = {{0}, {1}, {2}, {3}};
  t.numa = {{0, 1}, {2, 3}};
  CHECK(plan_cpus("numa", t, 4, 1, "h") == std::vector<V>{{0, 1}, {0, 1}, {2, 3}, {2, 3}});
  CHECK(plan_cpus("numa", t, 3, 1, "h") == std::vector<V>{{0, 1}, {0, 1}, {2, 3}});
  CHECK(plan_cpus("numa", t, 1, 1, "h") == std::vector<V>{{0, 1}});
  CHECK(plan_cpus("none", t, 2, 1, "h") == std::vector<V>{{}, {}});
  CHECK_THROWS_AS(plan_cpus("numa", CpuTopology{}, 2, 1, "h"), std::runtime_error);
}

TEST_CASE("gpu: one GPU per rank, round-robin by local rank", "[hostfiles]") {
  const Gpus two{"0", "1"};
  const char* want[] = {"0", "1", "0", "1"};
  for (int lr = 0; lr < 4; ++lr) CHECK(bind_gpus(two, lr, 1) == std::optional<std::string>(want[lr]));
}

TEST_CASE("gpu: --gpus-per-rank K gives K consecutive GPUs", "[hostfiles]") {
  const Gpus four{"0", "1", "2", "3"};
  CHECK(bind_gpus(four, 0, 2) == "0,1");
  CHECK(bind_gpus(four, 1, 2) == "2,3");
  CHECK(bind_gpus(four, 2, 2) == "0,1");  // more ranks than fit: wrap round
  CHECK(bind_gpus(four, 0, 4) == "0,1,2,3");
  CHECK(bind_gpus(four, 1, 8) == "0,1,2,3");  // never more than the host has
}

TEST_CASE("gpu: binding keeps the host's own GPU names", "[hostfiles]") {
  const Gpus given{"4", "5", "GPU-abc"};
  CHECK(bind_gpus(given, 0, 1) == "4");
  CHECK(bind_gpus(given, 2, 1) == "GPU-abc");
  CHECK(bind_gpus(given, 3, 1) == "4");
}

TEST_CASE("gpu: no GPUs, no binding", "[hostfiles]") { CHECK_FALSE(bind_gpus({}, 0, 1).has_value()); }
