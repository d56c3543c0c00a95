// dlaunch's store measured the way bench/store/store_bench.py measures
// torch's TCPStore; prints one "name value" line per result for the driver.
//   store_bench ops N        µs per set/get/add, one client, server in-process
//   store_bench barrier W    seconds for W waiting client processes to connect,
//                            add to a counter, wait for "go", and exit
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_server.h"
#include "wire/handshake.h"

using namespace dl::rdzv;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

static void ops(int n) {
  BackgroundStoreServer server("127.0.0.1", 0, "bench");
  TcpStore s("127.0.0.1", server.port(), "bench");
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) s.set("key" + std::to_string(i % 100), "value");
  std::printf("set_us %.2f\n", since(t0) * 1e6 / n);
  t0 = Clock::now();
  for (int i = 0; i < n; ++i) s.get("key" + std::to_string(i % 100));
  std::printf("get_us %.2f\n", since(t0) * 1e6 / n);
  t0 = Clock::now();
  for (int i = 0; i < n; ++i) s.add("counter", 1);
  std::printf("add_us %.2f\n", since(t0) * 1e6 / n);
  if (s.get("counter") != std::to_string(n)) std::printf("error counter mismatch\n");
}

// Children are forked first (forking a process whose server thread may hold
// a lock is unsafe) and block on a pipe; the clock starts when the server's
// port is written to them.
static void barrier(int w) {
  // Load OpenSSL's RNG before forking, as torch's children inherit an
  // imported torch: per-process library start-up is not what we measure.
  dl::wire::random_bytes(1);
  int fds[2];
  if (pipe(fds) != 0) return std::perror("pipe");
  for (int i = 0; i < w; ++i) {
    if (fork() == 0) {
      close(fds[1]);
      uint16_t port = 0;
      int rc = read(fds[0], &port, sizeof port) == sizeof port ? 0 : 1;
      try {
        TcpStore s("127.0.0.1", port, "bench");
        if (s.add("arrived", 1) == w) s.set("go", "1");
        s.wait({"go"}, std::chrono::seconds(60));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "client: %s\n", e.what());
        rc = 1;
      }
      _exit(rc);
    }
  }
  close(fds[0]);
  BackgroundStoreServer server("127.0.0.1", 0, "bench");
  const uint16_t port = server.port();
  auto t0 = Clock::now();
  for (int i = 0; i < w; ++i)
    if (write(fds[1], &port, sizeof port) != sizeof port) std::perror("write");
  int failed = 0, status = 0;
  for (int i = 0; i < w; ++i)
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  std::printf("barrier_s %.4f\n", since(t0));
  close(fds[1]);
  if (failed) std::printf("error %d clients failed\n", failed);
}

int main(int argc, char** argv) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  std::string mode = argc > 1 ? argv[1] : "";
  int n = argc > 2 ? std::stoi(argv[2]) : 0;
  if (mode == "ops" && n > 0) ops(n);
  else if (mode == "barrier" && n > 0) barrier(n);
  else return std::fprintf(stderr, "usage: store_bench ops N | barrier W\n"), 2;
  return 0;
}
