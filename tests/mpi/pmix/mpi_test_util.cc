#include "tests/mpi/pmix/mpi_test_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

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

}  // namespace dl::mpitest
