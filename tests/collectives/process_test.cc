// Ranks as forked processes through the C API and env:// (rank 0 hosts the
// TCP store): the path a real job takes. Includes a rank process that exits
// mid-job, which must make every other process fail naming it.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/include/dlcoll.h"
#include "wire/socket.h"

namespace {


// Forks n ranks running body(rank) -> exit code; each child's stderr goes to
// a file whose text is returned with its exit code.
std::vector<std::pair<int, std::string>> run_processes(int n, const std::function<int(int)>& body) {
  const std::string port = std::to_string(dl::wire::free_tcp_port(true));
  char dir[] = "/tmp/dlcoll-test-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      std::string err = std::string(dir) + "/err" + std::to_string(r);
      std::freopen(err.c_str(), "w", stderr);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      ::setenv("DLAUNCH_TOKEN", "process-test-token", 1);
      int rc = body(r);
      std::fflush(stderr);
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  std::vector<std::pair<int, std::string>> out;
  for (int r = 0; r < n; ++r) {
    int st = 0;
    // Bounded wait: a hung rank is killed and reported, never left behind.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (::waitpid(pids[r], &st, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) {
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], &st, 0);
        break;
      }
      ::usleep(10000);
    }
    std::string err = std::string(dir) + "/err" + std::to_string(r);
    std::ifstream f(err);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::remove(err.c_str());
    out.emplace_back(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), text);
  }
  ::rmdir(dir);
  return out;
}

}  // namespace

TEST_CASE("collectives: C API all_reduce across forked processes over env://", "[collectives]") {
  auto res = run_processes(3, [](int r) {
    dlcoll_comm_t c = nullptr;
    if (dlcoll_init("env://", 20000, &c) != DLCOLL_OK) { std::fprintf(stderr, "%s", dlcoll_last_error()); return 3; }
    int rank = -1, size = -1;
    dlcoll_rank(c, &rank);
    dlcoll_size(c, &size);
    if (rank != r || size != 3) return 4;
    std::vector<double> v(100000, rank + 1.0);
    if (dlcoll_all_reduce(c, v.data(), v.data(), v.size(), DLCOLL_FLOAT64, DLCOLL_SUM) != DLCOLL_OK) {
      std::fprintf(stderr, "%s", dlcoll_last_error());
      return 5;
    }
    for (double x : v)
      if (x != 6.0) return 6;
    dlcoll_work_t w = nullptr;
    int32_t g[3] = {0, 0, 0}, mine = 10 * rank;
    if (dlcoll_all_gather_async(c, &mine, g, 1, DLCOLL_INT32, &w) != DLCOLL_OK) return 7;
    if (dlcoll_work_wait(w, 10000) != DLCOLL_OK) { std::fprintf(stderr, "%s", dlcoll_last_error()); return 8; }
    dlcoll_work_free(w);
    if (g[0] != 0 || g[1] != 10 || g[2] != 20) return 9;
    // Bad arguments come back as codes with a message, not crashes.
    if (dlcoll_broadcast(c, g, 1, DLCOLL_INT32, 7) != DLCOLL_ERR_USAGE) return 10;
    if (std::strstr(dlcoll_last_error(), "root 7") == nullptr) return 11;
    dlcoll_free(c);
    return 0;
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << " stderr: " << res[r].second);
    CHECK(res[r].first == 0);
  }
}

TEST_CASE("collectives: a rank process that exits makes the others fail naming it", "[collectives]") {
  auto start = std::chrono::steady_clock::now();
  auto res = run_processes(4, [](int r) {
    dlcoll_comm_t c = nullptr;
    if (dlcoll_init("env://", 15000, &c) != DLCOLL_OK) { std::fprintf(stderr, "%s", dlcoll_last_error()); return 3; }
    std::vector<float> v(1 << 20, 1.0f);
    dlcoll_all_reduce(c, v.data(), v.data(), v.size(), DLCOLL_FLOAT32, DLCOLL_SUM);
    if (r == 2) ::_exit(42);  // dies without a word: the kernel closes its sockets
    int rc = DLCOLL_OK;
    for (int i = 0; i < 5 && rc == DLCOLL_OK; ++i)
      rc = dlcoll_all_reduce(c, v.data(), v.data(), v.size(), DLCOLL_FLOAT32, DLCOLL_SUM);
    std::fprintf(stderr, "%s", dlcoll_last_error());
    return rc == DLCOLL_ERR_REMOTE ? 0 : 10 + rc;
  });
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(12));
  CHECK(res[2].first == 42);
  for (int r : {0, 1, 3}) {
    INFO("rank " << r << " stderr: " << res[r].second);
    CHECK(res[r].first == 0);
    CHECK_THAT(res[r].second, Catch::Matchers::Contains("rank 2 on host"));
  }
}
