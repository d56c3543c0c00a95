/* Runs a launcher and measures it from outside: its wall time to exit, its
 * own CPU time (user+sys of all its threads, read from its /proc entry while
 * it is a zombie, so its children's CPU is not counted) and the most socket
 * descriptors it held at once (sampled every millisecond).
 * Usage: measure COMMAND [ARGS...]
 * Prints "start_ns done_s cpu_s peak_sockets" on stdout; the command's own
 * stdout and stderr go to /dev/null and measure.err. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int sockets_of(pid_t pid) {
  char dir[64], path[384], link[64];
  snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
  DIR* d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  for (struct dirent* e; (e = readdir(d));) {
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ssize_t len = readlink(path, link, sizeof link - 1);
    if (len > 7 && strncmp(link, "socket:", 7) == 0) ++n;
  }
  closedir(d);
  return n;
}

/* utime+stime of a zombie, in seconds (fields 14 and 15 of /proc/PID/stat). */
static double own_cpu_s(pid_t pid) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  char* p = strrchr(buf, ')');
  unsigned long ut = 0, st = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: measure COMMAND [ARGS...]\n"); return 2; }
  const long long start = now_ns(CLOCK_REALTIME), t0 = now_ns(CLOCK_MONOTONIC);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR), err = open("measure.err", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(null, 0), dup2(null, 1), dup2(err < 0 ? null : err, 2);
    execvp(argv[1], argv + 1);
    _exit(127);
  }
  int peak = 0;
  siginfo_t info;
  for (;;) {
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) break;
    int s = sockets_of(pid);
    if (s > peak) peak = s;
    usleep(1000);
  }
  const double done = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9, cpu = own_cpu_s(pid);
  int status = 0;
  waitpid(pid, &status, 0);
  printf("%lld %.3f %.2f %d\n", start, done, cpu, peak);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
