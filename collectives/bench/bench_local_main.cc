// dlcoll-bench: runs `dlaunch bench` on N local ranks before (or without)
// the launcher: forks N processes that find each other through env://
// (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free MASTER_PORT, rank 0
// hosting the store), exactly as they would under dlaunch or torchrun.
//   dlcoll-bench -n 4 -b 8 -e 256M -f 2 --op all_reduce
// Like mpirun's default for small jobs, rank r is bound to CPU r modulo the
// CPUs this process may use; `--bind none` (right after -n) leaves the
// ranks free to migrate.
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "collectives/bench/bench_command.h"
#include "control/env_names.h"
#include "wire/handshake.h"
#include "wire/socket.h"

namespace {


}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  int n = 2;
  if (args.size() >= 2 && args[0] == "-n") {
    n = std::atoi(args[1].c_str());
    args.erase(args.begin(), args.begin() + 2);
  }
  bool bind = true;
  if (args.size() >= 2 && args[0] == "--bind") {
    if (args[1] != "core" && args[1] != "none") {
      std::cerr << "dlcoll-bench: error: --bind takes core or none, got '" << args[1] << "'\n";
      return 2;
    }
    bind = args[1] == "core";
    args.erase(args.begin(), args.begin() + 2);
  }
  std::vector<int> cpus;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (n < 1) {
    std::cerr << "dlcoll-bench: error: -n must be at least 1\n";
    return 2;
  }
  const std::string port = std::to_string(dl::wire::free_tcp_port(true)), token = dl::wire::new_token();
  std::vector<pid_t> kids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      if (bind && !cpus.empty()) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[r % cpus.size()], &one);
        ::sched_setaffinity(0, sizeof one, &one);
      }
      ::setenv(dl::env::kRank, std::to_string(r).c_str(), 1);
      ::setenv(dl::env::kLocalRank, std::to_string(r).c_str(), 1);
      ::setenv(dl::env::kWorldSize, std::to_string(n).c_str(), 1);
      ::setenv(dl::env::kLocalWorldSize, std::to_string(n).c_str(), 1);
      ::setenv(dl::env::kMasterAddr, "127.0.0.1", 1);
      ::setenv(dl::env::kMasterPort, port.c_str(), 1);
      ::setenv(dl::env::kDlToken, token.c_str(), 1);
      ::_exit(dl::coll::run_bench_command(args));
    }
    kids.push_back(pid);
  }
  int worst = 0;
  for (pid_t pid : kids) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    worst = std::max(worst, rc);
  }
  return worst;
}
