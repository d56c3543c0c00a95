// dlaunch's store measured the way bench/store/store_bench.py measures
// torch's TCPStore; prints one "name value" line per result for the driver.
//   store_bench ops N        µs per set/get/add, one client, server in-process
//   store_bench barrier W    seconds until the last of W client processes has
//                            connected and passed Store::barrier (one request)
//   store_bench addwait W    the same barrier made of c10d operations, as
//                            torch's clients make it: add to a counter, the
//                            last sets "go", all wait for "go"
//   store_bench wakeup W     the same children without a store: the floor
//   store_bench echo W       the same children making Store::barrier's
//                            round trips against a bare epoll loop that only
//                            answers bytes: the floor of the protocol's shape
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <cstdlib>
#include <memory>
#include <stdexcept>
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
  // Sets are pipelined (tcp_store.h): the answers of the last ones are
  // collected inside the timed region, so every set is known to have been
  // stored, or refused, when the clock stops.
  s.flush();
  std::printf("set_us %.2f\n", since(t0) * 1e6 / n);
  t0 = Clock::now();
  for (int i = 0; i < n; ++i) s.get("key" + std::to_string(i % 100));
  std::printf("get_us %.2f\n", since(t0) * 1e6 / n);
  t0 = Clock::now();
  for (int i = 0; i < n; ++i) s.add("counter", 1);
  std::printf("add_us %.2f\n", since(t0) * 1e6 / n);
  if (s.get("counter") != std::to_string(n)) std::printf("error counter mismatch\n");
}

// The bare server of `echo`: per connection it answers the client's hello
// ('h') with one byte, takes the proof ('p') without answer, and parks the
// barrier ('w') until all W clients sent it, then answers every one: the
// round trips a store client makes in Store::barrier (hello, barrier), with
// no authentication, protocol, store or Asio.
static void echo_server(int lfd, int w) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{EPOLLIN, {}};
  ev.data.fd = lfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  std::vector<int> waiting, all;
  epoll_event evs[256];
  while (static_cast<int>(waiting.size()) < w) {
    int n = epoll_wait(ep, evs, 256, 120000);
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) {
      const int fd = evs[i].data.fd;
      if (fd == lfd) {
        for (int c; (c = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
          epoll_event cev{EPOLLIN, {}};
          cev.data.fd = c;
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
          all.push_back(c);
        }
        continue;
      }
      char buf[16];
      ssize_t got = recv(fd, buf, sizeof buf, 0);
      for (ssize_t k = 0; k < got; ++k) {
        if (buf[k] == 'w') waiting.push_back(fd);
        else if (buf[k] == 'h' && send(fd, "a", 1, MSG_NOSIGNAL) != 1) std::perror("send");
      }
    }
  }
  for (int fd : waiting) if (send(fd, "g", 1, MSG_NOSIGNAL) != 1) std::perror("send");
  for (int fd : all) close(fd);
  close(ep);
}

static bool echo_client(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return false;
  char c = 0;
  bool ok = send(fd, "h", 1, MSG_NOSIGNAL) == 1 && recv(fd, &c, 1, 0) == 1 &&  // hello, answer
            send(fd, "p", 1, MSG_NOSIGNAL) == 1 &&                            // proof, not answered
            send(fd, "w", 1, MSG_NOSIGNAL) == 1 && recv(fd, &c, 1, 0) == 1 && c == 'g';  // barrier
  return ok;  // the socket closes at exit, after the stamp
}

// Children are forked first (forking a process whose server thread may hold
// a lock is unsafe) and block on one eventfd in semaphore mode; the clock
// starts when the parent has put the server's port in shared memory and
// released them all with one write (one pipe read by all wakes them in a
// herd, one pipe each costs W^2 closes: seconds at W = 1024 either way).
// Each child stamps CLOCK_MONOTONIC into shared memory when its wait
// returns: the barrier time is the last stamp. A child that has stamped
// counts itself on a second eventfd and stays until every child has stamped,
// as a rank stays in its job after a barrier: otherwise the exits of the
// first children to pass (hundreds of microseconds each in this VM) run
// while the last ones wait for a CPU, and process teardown is measured as
// if it were the barrier. bench/store/store_bench.py measures torch's
// clients the same way. With no_store the children only stamp: the cost of
// waking W processes, the floor of this method.
enum class Mode { kStore, kAddWait, kWakeup, kEcho };

static void barrier(int w, Mode mode) {
  const bool no_store = mode == Mode::kWakeup;
  // Nothing to warm up before forking: the handshake's HMAC loads no
  // OpenSSL (wire/sha256.h), and torch's children inherit an imported torch.
  // shared[0] is the port, shared[1 + i] child i's stamp.
  // With DL_STORE_BENCH_PHASES=1, each child also stamps when it was
  // released, connected and had its add answered (shared[1 + w + 3 * i ..]),
  // and the percentiles of each phase are printed: where the time goes.
  const bool phases = getenv("DL_STORE_BENCH_PHASES") != nullptr;
  // With phases, also each child's CPU time (shared[1 + 4w + 3i ..]) when
  // released, connected and passed: what a client costs, phase by phase.
  const size_t words = 1 + static_cast<size_t>(w) * (phases ? 7 : 1);
  auto* shared = static_cast<double*>(
      mmap(nullptr, sizeof(double) * words, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return std::perror("mmap");
  const int go = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
  const int stamped = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);  // children that stamped (or failed)
  const int leave = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);  // written once all have
  if (go < 0 || stamped < 0 || leave < 0) return std::perror("eventfd");
  for (int i = 0; i < w; ++i) {
    if (fork() == 0) {
      int rc = 1;
      // A rank has used its heap long before it meets the store, and
      // torch's children allocate (in Python) between fork and release.
      // Here the child's first malloc after fork would copy-on-write the
      // allocator's state inside the timed region (250-300 us per child on
      // this VM): allocate once before the release instead. DL_STORE_BENCH_COLD=1
      // leaves it out.
      if (getenv("DL_STORE_BENCH_COLD") == nullptr) {
        void* volatile warm = std::malloc(64);
        std::free(warm);
      }
      pollfd p{go, POLLIN, 0};
      uint64_t one = 0;
      // A parent that died never writes: give up after two minutes.
      if (poll(&p, 1, 120000) == 1 && read(go, &one, sizeof one) == sizeof one) rc = 0;
      double* ph = phases ? shared + 1 + w + 3 * i : nullptr;
      double* cpu = phases ? shared + 1 + 4 * w + 3 * i : nullptr;
      auto cpu_now = [] {
        timespec t{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        return t.tv_sec + t.tv_nsec * 1e-9;
      };
      try {
        if (ph) ph[0] = monotonic(), cpu[0] = cpu_now();
        if (rc == 0 && mode == Mode::kEcho) {
          if (!echo_client(static_cast<uint16_t>(shared[0]))) throw std::runtime_error("echo round trips failed");
        } else if (rc == 0 && !no_store) {
          TcpStore s("127.0.0.1", static_cast<uint16_t>(shared[0]), "bench");
          if (ph) ph[1] = monotonic(), cpu[1] = cpu_now();
          if (mode == Mode::kStore) {
            if (ph) ph[2] = ph[1];  // no separate add
            s.barrier("arrived", w, std::chrono::seconds(60));
          } else {
            const int64_t arrived = s.add("arrived", 1);
            if (ph) ph[2] = monotonic();
            if (arrived == w) s.set("go", "1");
            s.wait({"go"}, std::chrono::seconds(60));
          }
          // Stamped before the client is destroyed, as torch's children
          // stamp with their TCPStore still open: closing is not the barrier.
          shared[1 + i] = monotonic();
        }
        if (rc == 0 && mode != Mode::kStore && mode != Mode::kAddWait) shared[1 + i] = monotonic();
        if (cpu) cpu[2] = cpu_now();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "client: %s\n", e.what());
        rc = 1;
      }
      const uint64_t me = 1;
      if (write(stamped, &me, sizeof me) != sizeof me) rc = 1;
      pollfd l{leave, POLLIN, 0};
      if (poll(&l, 1, 120000) != 1 || read(leave, &one, sizeof one) != sizeof one) rc = 1;
      _exit(rc);
    }
  }
  std::unique_ptr<BackgroundStoreServer> server;
  std::thread echo;
  if (mode == Mode::kEcho) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(lfd, 4096) != 0 ||
        getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return std::perror("echo listen");
    shared[0] = ntohs(a.sin_port);
    echo = std::thread([lfd, w] { echo_server(lfd, w); close(lfd); });
  } else {
    server = std::make_unique<BackgroundStoreServer>("127.0.0.1", 0, "bench");
    shared[0] = server->port();
  }
  rusage self0{};
  getrusage(RUSAGE_SELF, &self0);  // the server thread's CPU, with the parent's
  const double t0 = monotonic();
  const uint64_t all = static_cast<uint64_t>(w);
  if (write(go, &all, sizeof all) != sizeof all) std::perror("write");
  // Waits (two minutes at most: the children give up then too) until every
  // child has stamped, then lets them all exit. It looks every 2 ms rather
  // than sleeping on the eventfd, which would wake it for each child and
  // take a CPU from the last ones.
  uint64_t seen = 0;
  for (int i = 0; seen < all && i < 60000; ++i) {
    usleep(2000);
    uint64_t got = 0;
    if (read(stamped, &got, sizeof got) == sizeof got) seen += got;
  }
  rusage self1{};
  getrusage(RUSAGE_SELF, &self1);
  if (write(leave, &all, sizeof all) != sizeof all) std::perror("write");
  int failed = 0, status = 0;
  for (int i = 0; i < w; ++i)
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  std::printf("barrier_s %.4f\n", *std::max_element(shared + 1, shared + 1 + w) - t0);
  if (echo.joinable()) echo.join();
  if (phases) {
    // What each child cost: CPU and page faults (copy-on-write after fork).
    rusage ru{};
    getrusage(RUSAGE_CHILDREN, &ru);
    auto us = [](const timeval& t) { return t.tv_sec * 1e6 + t.tv_usec; };
    std::printf("server_cpu_us_per_client_user_sys %.1f %.1f\n", (us(self1.ru_utime) - us(self0.ru_utime)) / w,
                (us(self1.ru_stime) - us(self0.ru_stime)) / w);
    double connect_cpu = 0, total_cpu = 0;
    for (int i = 0; i < w; ++i) {
      const double* c = shared + 1 + 4 * w + 3 * i;
      connect_cpu += c[1] - c[0], total_cpu += c[2] - c[0];
    }
    std::printf("child_cpu_us_connect_total %.1f %.1f\n", connect_cpu * 1e6 / w, total_cpu * 1e6 / w);
    std::printf("child_cpu_us_user_sys_minflt %.0f %.0f %.1f\n",
                (ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec) / w, (ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec) / w,
                static_cast<double>(ru.ru_minflt) / w);
  }
  if (phases && (mode == Mode::kStore || mode == Mode::kAddWait)) {
    // Each phase's end, relative to t0, at the 10th/50th/90th/100th percentile.
    const char* names[] = {"released", "connected", "added", "passed"};
    for (int k = 0; k < 4; ++k) {
      std::vector<double> v;
      for (int i = 0; i < w; ++i) v.push_back((k < 3 ? shared[1 + w + 3 * i + k] : shared[1 + i]) - t0);
      std::sort(v.begin(), v.end());
      std::printf("phase_%s_p10_p50_p90_max %.4f %.4f %.4f %.4f\n", names[k], v[w / 10], v[w / 2], v[w * 9 / 10], v[w - 1]);
    }
  }
  close(go);
  close(stamped);
  close(leave);
  munmap(shared, sizeof(double) * words);
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
  else if (mode == "barrier" && n > 0) barrier(n, Mode::kStore);
  else if (mode == "addwait" && n > 0) barrier(n, Mode::kAddWait);
  else if (mode == "wakeup" && n > 0) barrier(n, Mode::kWakeup);
  else if (mode == "echo" && n > 0) barrier(n, Mode::kEcho);
  else return std::fprintf(stderr, "usage: store_bench ops N | barrier W | addwait W | wakeup W | echo W\n"), 2;
  return 0;
}
