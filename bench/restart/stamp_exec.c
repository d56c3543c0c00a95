/* The first thing a rank of bench/restart/host-loss.sh runs, under either
 * launcher: appends "start RANK WORLD_SIZE HOST TIME" (time in seconds,
 * CLOCK_REALTIME) to FILE in one O_APPEND write, then execs PROGRAM. So
 * "running" is the rank's process started by its launcher, not the
 * interpreter's start-up after it (the same for both launchers).
 * Usage: stamp_exec FILE PROGRAM [ARGS...] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) { fprintf(stderr, "usage: stamp_exec FILE PROGRAM [ARGS...]\n"); return 2; }
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  struct utsname u;
  if (uname(&u) != 0) return 1;
  const char* rank = getenv("RANK");
  const char* world = getenv("WORLD_SIZE");
  char line[160];
  int n = snprintf(line, sizeof line, "start %s %s %s %lld.%06ld\n", rank ? rank : "-", world ? world : "-", u.nodename,
                   (long long)t.tv_sec, t.tv_nsec / 1000);
  int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0 || write(fd, line, (size_t)n) != n) { perror(argv[1]); return 1; }
  close(fd);
  execv(argv[2], argv + 2);
  perror(argv[2]);
  return 127;
}
