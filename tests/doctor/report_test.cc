// The report: marks, exit code, the table and the JSON (doctor/report.h).
#include <catch2/catch.hpp>

#include "doctor/options.h"
#include "doctor/report.h"
#include "errors/error.h"
#include "wire/record.h"

using namespace dl::doctor;

TEST_CASE("a report with only passes and warnings exits 0, a failure exits 1", "[doctor]") {
  Report r({"h0", "h1"});
  r.set(0, Check::kSsh, Mark::kOk, "local");
  r.set(1, Check::kSsh, Mark::kOk, "1.2ms");
  CHECK(r.exit_code() == 0);
  r.add({Mark::kWarn, Check::kNetwork, {"h1"}, "dl0 on h1 is not reachable", "keep NCCL off it"});
  CHECK(r.exit_code() == 0);
  r.set(1, Check::kEnv, Mark::kFail, "PATH");
  r.add({Mark::kFail, Check::kEnv, {"h1"}, "h1: PATH lacks /x", "make PATH the same"});
  CHECK(r.exit_code() == 1);
  CHECK_FALSE(r.host_passed(1));
  CHECK(r.host_passed(0));
  const std::string t = r.render(true);
  INFO(t);
  CHECK(t.find("host  hostfile  ssh") != std::string::npos);
  CHECK(t.find("\u2717 env: h1: PATH lacks /x; make PATH the same\n") != std::string::npos);
  CHECK(t.find("! network: dl0 on h1 is not reachable; keep NCCL off it\n") != std::string::npos);
  CHECK(t.find("NOT healthy: 1 of 2 hosts passed, 1 problem, 1 warning") != std::string::npos);
  const auto j = dl::wire::decode_record<ReportRecord>(r.to_json(), {"the report"});
  CHECK(j.exit_code == 1);
  CHECK_FALSE(j.healthy);
  CHECK(j.hosts[1].checks.at("env").mark == "fail");
  CHECK(j.hosts[0].checks.at("nccl").mark == "not_run");
  CHECK(j.problems[1].hosts == std::vector<std::string>{"h1"});
  CHECK_FALSE(j.hosts[0].facts);  // stage 3 never reached it
}

TEST_CASE("the JSON report carries a host's facts and the notes laid out a member a line", "[doctor]") {
  Report r({"h0"});
  HostFacts f;
  f.version = "1.2", f.hostname = "h0", f.env = {{"PATH", "/bin"}, {"UNSET", std::nullopt}}, f.cores = 8;
  GpuFact gpu;
  gpu.vendor = "nvidia", gpu.id = "0", gpu.pci_bus_id = "0000:18:00.0", gpu.numa = 1, gpu.memory_bytes = 85520809984ULL;
  gpu.name = "NVIDIA H100", gpu.driver = "550.54.15";
  f.gpus = {gpu};
  f.tmp_free_bytes = 1ull << 40, f.ssh_rtt_us = 412.5;
  f.cuda = GpuProbe{1, "", std::string(""), 12040, std::nullopt};
  f.agent = ExecutableFact{"/usr/bin/dlaunch-agent", true, "", std::string("1.2")};
  r.set_facts(0, f);
  r.notes().interface = "NCCL_SOCKET_IFNAME=eth0";
  r.notes().links = std::vector<LinkNote>{{"h0", "h1", 50, 1e9, 2e9, 0.5, "", std::vector<Retested>{{1, 2, 3, 4}}}};
  r.notes().stage_seconds = std::map<std::string, double>{{"ssh", 0.25}};
  const std::string text = r.to_json();
  INFO(text);
  CHECK(text.find("\n  \"exit_code\": 0,\n") != std::string::npos);
  const auto j = dl::wire::decode_record<ReportRecord>(text, {"the report"});
  REQUIRE(j.hosts[0].facts);
  const HostFacts& back = *j.hosts[0].facts;
  CHECK(back.env == f.env);
  CHECK(back.gpus[0].memory_bytes == 85520809984ULL);
  CHECK(back.gpus[0].name == "NVIDIA H100");
  CHECK_FALSE(back.gpus[0].memory_used_bytes.has_value());
  CHECK(back.tmp_free_bytes == f.tmp_free_bytes);
  CHECK(back.cuda->driver_version == 12040);
  CHECK(back.agent->version == "1.2");
  CHECK(j.notes.interface == "NCCL_SOCKET_IFNAME=eth0");
  CHECK(j.notes.links->at(0).retested->at(0).reference_Bps == 4);
  CHECK(j.notes.stage_seconds->at("ssh") == 0.25);
  CHECK_FALSE(j.notes.nccl_check);
  CHECK(r.render(false).find("\nnetwork: NCCL_SOCKET_IFNAME=eth0\n") != std::string::npos);
}

TEST_CASE("doctor options: defaults, bad usage names the option", "[doctor]") {
  bool help = false;
  auto o = parse_doctor_options({"--hostfile", "hosts", "-x", "CUDA_HOME", "--quick"}, &help);
  CHECK(o.hostfile == "hosts");
  CHECK(o.exports == std::vector<std::string>{"CUDA_HOME"});
  CHECK(o.quick);
  CHECK(o.link_factor == 3);
  CHECK_NOTHROW(parse_doctor_options({}, &help));  // no hosts: the allocation's, else this machine
  CHECK_THROWS_WITH(parse_doctor_options({"-H", "a", "--hostfile", "h"}, &help), Catch::Contains("not both"));
  CHECK_THROWS_WITH(parse_doctor_options({"-H", "a", "--program", "rel/path"}, &help), Catch::Contains("absolute path"));
  CHECK_THROWS_WITH(parse_doctor_options({"-H", "a", "--bogus"}, &help), Catch::Contains("bogus"));
  CHECK_THROWS_AS(parse_doctor_options({"-H", "a", "--link-factor", "1"}, &help), dl::UsageError);
  // Durations and factors are finite and bounded: nan passes no `x <= 0` check.
  CHECK_THROWS_WITH(parse_doctor_options({"-H", "a", "--ssh-timeout", "nan"}, &help),
                    "--ssh-timeout takes seconds: a number above 0 and at most 1000000 (11.6 days), got 'nan'");
  CHECK_THROWS_WITH(parse_doctor_options({"-H", "a", "--link-factor", "inf"}, &help),
                    "--link-factor takes a number above 1 and at most 1000000, got 'inf'");
  CHECK(parse_doctor_options({"-H", "a", "--connect-timeout", "0.5"}, &help).connect_timeout_s == 0.5);
  CHECK_THROWS_WITH(parse_doctor_options({"-H", "a", "--ssh-config", "/dev/zero"}, &help),
                    Catch::StartsWith("--ssh-config /dev/zero: is a character device, not a regular file"));
}

TEST_CASE("one line per problem however many hosts share it - the table only for hosts that failed or warned", "[doctor]") {
  std::vector<std::string> hosts;
  for (int i = 1; i <= 200; ++i) hosts.push_back("node" + std::string(i < 10 ? "000" : i < 100 ? "00" : "0") + std::to_string(i));
  Report r(hosts);
  for (int h = 0; h < 200; ++h) r.set(h, Check::kSsh, Mark::kOk, "1.0ms");
  // 37 hosts lack the same PATH entry; one lacks another; one is off in time.
  for (int h = 100; h <= 136; ++h) {
    r.set(h, Check::kEnv, Mark::kFail, "PATH");
    r.add({Mark::kFail, Check::kEnv, {hosts[h]}, hosts[h] + ": PATH lacks /opt/app/bin", "make PATH the same"});
  }
  r.set(150, Check::kEnv, Mark::kFail, "PATH");
  r.add({Mark::kFail, Check::kEnv, {hosts[150]}, hosts[150] + ": PATH lacks /usr/local/cuda/bin", "make PATH the same"});
  r.set(160, Check::kClock, Mark::kWarn, "+0.9s");
  const std::string t = r.render(true);
  INFO(t);
  CHECK(t.find("\u2717 env: 37 hosts (node[0101-0137]): PATH lacks /opt/app/bin; make PATH the same\n") != std::string::npos);
  CHECK(t.find("\u2717 env: node0151: PATH lacks /usr/local/cuda/bin; make PATH the same\n") != std::string::npos);
  CHECK(t.find("NOT healthy: 162 of 200 hosts passed, 2 problems, 0 warnings") != std::string::npos);
  // Rows: the 38 that failed and the one that warned; the rest a count.
  size_t rows = 0;
  for (size_t at = t.find("\nnode"); at != std::string::npos; at = t.find("\nnode", at + 1)) ++rows;
  CHECK(rows == 39);
  CHECK(t.find("\nnode0001 ") == std::string::npos);
  CHECK(t.find("\nnode0161 ") != std::string::npos);
  CHECK(t.find("\u2713 the other 161 hosts passed every check (-v lists them)\n") != std::string::npos);
  // -v: every host a row.
  const std::string v = r.render(true, true);
  CHECK(v.find("\nnode0001 ") != std::string::npos);
  CHECK(v.find("hosts passed every check (-v") == std::string::npos);
  // The JSON names the same one problem with its 37 hosts.
  const auto j = dl::wire::decode_record<ReportRecord>(r.to_json(), {"the report"});
  REQUIRE(j.problems.size() == 2);
  CHECK(j.problems[0].hosts.size() == 37);
  CHECK(j.problems[0].what == "37 hosts (node[0101-0137]): PATH lacks /opt/app/bin");
}

TEST_CASE("a healthy thousand hosts is a count, not a table", "[doctor]") {
  std::vector<std::string> hosts;
  for (int i = 0; i < 1000; ++i) hosts.push_back("n" + std::to_string(i));
  Report r(hosts);
  for (int h = 0; h < 1000; ++h) r.set(h, Check::kSsh, Mark::kOk);
  const std::string t = r.render(false);
  INFO(t);
  CHECK(t.find("host  hostfile") == std::string::npos);
  CHECK(t.find("ok all 1000 hosts passed every check (-v lists them)\n") != std::string::npos);
  CHECK(t.find("healthy: 1000 of 1000 hosts passed, 0 problems") != std::string::npos);
}
