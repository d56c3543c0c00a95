// bench/store-scale's floor: the cheapest barrier N TCP clients on this
// machine can pass, with no store at all. N loopback connections, held by
// client processes of PER_PROCESS each over epoll (as store_scale's), to one
// server process over epoll. A barrier: every client writes one byte; once
// the server has read all N it writes one byte to each; a client process is
// done when every one of its connections has its byte. What is left is the
// kernel's part (N sends, N receives, N wake-ups each way) and the
// processes' turns on the CPUs, which a store's barrier also pays.
//
// usage: barrier_floor N [PER_PROCESS] [BARRIERS]
// prints: barrier-floor clients=N barrier_s=X (the median of BARRIERS, from
// the signal until the last client process saw its last reply, as
// store_scale's barrier_s)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char* what) {
  fprintf(stderr, "barrier_floor: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void full_read(int fd, void* buf, size_t n) {
  char* p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("reading a pipe");
    p += r, n -= (size_t)r;
  }
}

static void full_write(int fd, const void* buf, size_t n) {
  const char* p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("writing");
    p += w, n -= (size_t)w;
  }
}

// The server: accepts n connections, then serves `barriers` barriers.
static void serve(int lfd, int n, int barriers) {
  int* fds = calloc((size_t)n, sizeof *fds);
  int ep = epoll_create1(0);
  for (int i = 0; i < n; ++i) {
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) die("accept");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fds[i] = fd;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl");
  }
  struct epoll_event evs[1024];
  for (int b = 0; b < barriers; ++b) {
    int arrived = 0;
    while (arrived < n) {
      int k = epoll_wait(ep, evs, 1024, -1);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) die("epoll_wait");
      for (int j = 0; j < k; ++j) {
        char c;
        ssize_t r = recv(fds[evs[j].data.u32], &c, 1, 0);
        if (r == 1) ++arrived;
        else if (r == 0) exit(1);
      }
    }
    for (int i = 0; i < n; ++i) full_write(fds[i], "r", 1);
  }
  exit(0);
}

// A client process: `count` connections; for each barrier, waits for the
// go byte, writes one byte per connection, waits for every reply, reports
// when it was done.
static void client(uint16_t port, int count, int barriers, int go, int done) {
  int* fds = calloc((size_t)count, sizeof *fds);
  int ep = epoll_create1(0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < count; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    while (connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
      if (errno != EAGAIN && errno != ECONNREFUSED) die("connect");
      usleep(1000);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fds[i] = fd;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl");
  }
  full_write(done, "c", 1);  // connected
  struct epoll_event evs[1024];
  for (int b = 0; b < barriers; ++b) {
    char g;
    full_read(go, &g, 1);
    for (int i = 0; i < count; ++i) full_write(fds[i], "a", 1);
    int replied = 0;
    while (replied < count) {
      int k = epoll_wait(ep, evs, 1024, -1);
      if (k < 0 && errno == EINTR) continue;
      if (k < 0) die("epoll_wait");
      for (int j = 0; j < k; ++j) {
        char c;
        if (recv(fds[evs[j].data.u32], &c, 1, 0) == 1) ++replied;
      }
    }
    double t = now_s();
    full_write(done, &t, sizeof t);
  }
  exit(0);
}

static int by_value(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return a < b ? -1 : a > b;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: barrier_floor N [PER_PROCESS] [BARRIERS]\n");
    return 2;
  }
  const int n = atoi(argv[1]);
  const int per = argc > 2 ? atoi(argv[2]) : 1000;
  const int barriers = argc > 3 ? atoi(argv[3]) : 5;
  if (n < 1 || per < 1 || barriers < 1) {
    fprintf(stderr, "barrier_floor: N, PER_PROCESS and BARRIERS are positive\n");
    return 2;
  }
  struct rlimit rl = {(rlim_t)n + 4096, (rlim_t)n + 4096};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) die("raising the descriptor limit (run as root or raise ulimit -n)");
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(lfd, (struct sockaddr*)&a, sizeof a) != 0 || listen(lfd, 65535) != 0) die("listen");
  socklen_t len = sizeof a;
  getsockname(lfd, (struct sockaddr*)&a, &len);
  const uint16_t port = ntohs(a.sin_port);
  pid_t server = fork();
  if (server == 0) serve(lfd, n, barriers);
  close(lfd);
  const int procs = (n + per - 1) / per;
  int* go = calloc((size_t)procs, sizeof *go);
  int* done = calloc((size_t)procs, sizeof *done);
  for (int p = 0; p < procs; ++p) {
    int g[2], d[2];
    if (pipe(g) != 0 || pipe(d) != 0) die("pipe");
    const int count = p == procs - 1 ? n - per * (procs - 1) : per;
    if (fork() == 0) {
      close(g[1]), close(d[0]);
      client(port, count, barriers, g[0], d[1]);
    }
    close(g[0]), close(d[1]);
    go[p] = g[1], done[p] = d[0];
  }
  for (int p = 0; p < procs; ++p) {
    char c;
    full_read(done[p], &c, 1);
  }
  double* took = calloc((size_t)barriers, sizeof *took);
  for (int b = 0; b < barriers; ++b) {
    usleep(200000);  // the connections settled, as between store_scale's barriers
    const double t0 = now_s();
    for (int p = 0; p < procs; ++p) full_write(go[p], "g", 1);
    double last = 0;
    for (int p = 0; p < procs; ++p) {
      double t;
      full_read(done[p], &t, sizeof t);
      if (t > last) last = t;
    }
    took[b] = last - t0;
  }
  int status = 0, bad = 0;
  while (wait(&status) > 0)
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad = 1;
  qsort(took, (size_t)barriers, sizeof *took, by_value);
  printf("barrier-floor clients=%d barrier_s=%.3f\n", n, took[barriers / 2]);
  return bad;
}
