#include "tests/mpi/pmix/mpi_test_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <vector>

namespace dl::mpitest {

Result run(const std::string& cmd) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  Result r;
  FILE* p = popen(("timeout -k 5 120 " + cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

int count(const std::string& text, const std::string& needle) {
  int c = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++c;
  return c;
}

std::string marker() {
  static int seq = 0;
  return "dlmpimark" + std::to_string(getpid()) + "x" + std::to_string(++seq);
}

bool leftover(const std::string& mark) {
  for (int tries = 0; tries < 30; ++tries) {
    bool found = false;
    DIR* d = opendir("/proc");
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      std::ifstream f(std::string("/proc/") + e->d_name + "/cmdline");
      std::stringstream ss;
      ss << f.rdbuf();
      if (ss.str().find(mark) != std::string::npos) found = true;
    }
    closedir(d);
    if (!found) return false;
    usleep(100000);
  }
  return true;
}

std::string sim_tree_command(const std::string& dlaunch, int hosts, int slots, int fanout) {
  std::string list;
  for (int i = 0; i < hosts; ++i) list += (i ? "," : "") + ("sim" + std::to_string(i) + ":" + std::to_string(slots));
  return "env DLAUNCH_SIM=1 " + dlaunch + " -v --launcher sim --fanout " + std::to_string(fanout) +
         " --gpus-per-node 0 -H " + list;
}

std::string check_restart(const std::string& dlaunch_args, const std::string& program, int n, int lost,
                          const std::string& how) {
  char base[] = "/tmp/dl_mpi_restart.XXXXXX";
  REQUIRE(mkdtemp(base) != nullptr);
  const std::string mark = marker();
  const std::string ns = std::to_string(n);
  Result r = run("env TMPDIR=" + std::string(base) + " " + dlaunch_args + " " + program + " " + ns + " " +
                 std::to_string(lost) + " " + how + " " + mark);
  INFO(dlaunch_args << " " << program << " " << ns << " " << lost << " " << how << "\n" << r.out);
  CHECK(r.code == 0);
  CHECK(count(r.out, "dlaunch: attempt 1 of 2 failed: rank " + std::to_string(lost) + " on ") == 1);
  CHECK(count(r.out, "attempt 2 of 2 succeeded") == 1);
  // Attempt 0: every rank came up in the one world (the lost one too, before it failed).
  CHECK(count(r.out, "attempt 0 rank ") == n);
  CHECK(count(r.out, "attempt 1 rank ") == n);
  for (int k = 0; k < n; ++k)
    CHECK(count(r.out, "attempt 1 rank " + std::to_string(k) + " of " + ns + " sum " + std::to_string(n * (n - 1) / 2) +
                           " ok") == 1);
  CHECK(count(r.out, " of 1 ") == (n == 1 ? 2 * n : 0));  // no singleton, in either attempt
  CHECK(count(r.out, "BAD") == 0);
  CHECK(count(r.out, "attempt 2 rank ") == 0);  // one restart was enough
  CHECK_FALSE(leftover(mark));
  std::vector<std::string> left;
  DIR* d = opendir(base);
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') left.push_back(e->d_name);
  closedir(d);
  std::string names;
  for (const auto& x : left) names += x + " ";
  INFO("left in TMPDIR: " << names);
  CHECK(left.empty());
  std::string rm = "rm -rf " + std::string(base);
  CHECK(std::system(rm.c_str()) == 0);
  return r.out;
}

}  // namespace dl::mpitest
