// dlaunch's store measured the way bench/store/store_bench.py measures
// torch's TCPStore; prints one "name value" line per result for the driver.
//   store_bench ops N        µs per set/get/add, one client, server in-process
//   store_bench barrier W    seconds until the last of W client processes has
//                            connected, added to a counter and seen "go"
//   store_bench wakeup W     the same children without a store: the floor
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_server.h"

using namespace dl::rdzv;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
// steady_clock is CLOCK_MONOTONIC: comparable across processes, and with
// Python's time.clock_gettime(time.CLOCK_MONOTONIC) in the driver.
static double monotonic() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

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
// a lock is unsafe) and block on one eventfd in semaphore mode; the clock
// starts when the parent has put the server's port in shared memory and
// released them all with one write (one pipe read by all wakes them in a
// herd, one pipe each costs W^2 closes: seconds at W = 1024 either way).
// Each child stamps CLOCK_MONOTONIC into shared memory when its wait
// returns: the barrier time is the last stamp, so process exit and reaping
// are not counted (bench/store/store_bench.py measures torch's clients the
// same way). With no_store the children only stamp and exit: the cost of
// waking W processes, the floor of this method.
static void barrier(int w, bool no_store) {
  // Nothing to warm up before forking: the handshake's HMAC no longer loads
  // OpenSSL (wire/sha256.h), and torch's children inherit an imported torch.
  // shared[0] is the port, shared[1 + i] child i's stamp.
  auto* shared = static_cast<double*>(
      mmap(nullptr, sizeof(double) * (w + 1), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return std::perror("mmap");
  const int go = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  if (go < 0) return std::perror("eventfd");
  for (int i = 0; i < w; ++i) {
    if (fork() == 0) {
      int rc = 1;
      pollfd p{go, POLLIN, 0};
      uint64_t one = 0;
      // A parent that died never writes: give up after two minutes.
      if (poll(&p, 1, 120000) == 1 && read(go, &one, sizeof one) == sizeof one) rc = 0;
      try {
        if (rc == 0 && !no_store) {
          TcpStore s("127.0.0.1", static_cast<uint16_t>(shared[0]), "bench");
          if (s.add("arrived", 1) == w) s.set("go", "1");
          s.wait({"go"}, std::chrono::seconds(60));
        }
        shared[1 + i] = monotonic();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "client: %s\n", e.what());
        rc = 1;
      }
      _exit(rc);
    }
  }
  BackgroundStoreServer server("127.0.0.1", 0, "bench");
  shared[0] = server.port();
  const double t0 = monotonic();
  const uint64_t all = static_cast<uint64_t>(w);
  if (write(go, &all, sizeof all) != sizeof all) std::perror("write");
  int failed = 0, status = 0;
  for (int i = 0; i < w; ++i)
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  std::printf("barrier_s %.4f\n", *std::max_element(shared + 1, shared + 1 + w) - t0);
  close(go);
  munmap(shared, sizeof(double) * (w + 1));
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
  else if (mode == "barrier" && n > 0) barrier(n, false);
  else if (mode == "wakeup" && n > 0) barrier(n, true);
  else return std::fprintf(stderr, "usage: store_bench ops N | barrier W | wakeup W\n"), 2;
  return 0;
}
