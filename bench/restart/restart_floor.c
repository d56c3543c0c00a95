/* The floor for restarting N ranks with no coordination: the least a
 * restart must do. Starts N copies of hold (bench/restart/hold.c, attempt 0:
 * each waits for SIGTERM) and waits until each has written its start line
 * to FILE; then, timed: SIGTERM to each, every one reaped, and N new copies
 * forked and exec'd as attempt 1 (DLAUNCH_RESTART_COUNT=1: each writes its
 * line and exits), every one reaped. Prints the timed part's seconds.
 * Usage: restart_floor N HOLD FILE */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static long lines_in(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  long n = 0;
  for (int c; (c = getc(f)) != EOF;) n += c == '\n';
  fclose(f);
  return n;
}

static int start(int n, char** argv, pid_t* pids) {
  for (int i = 0; i < n; ++i) {
    pids[i] = fork();
    if (pids[i] < 0) return 1;
    if (pids[i] == 0) { execv(argv[0], argv); _exit(127); }
  }
  return 0;
}

static int reap(int n) {
  int failed = 0;
  for (int i = 0; i < n; ++i) {
    int st;
    if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
  }
  return failed;
}

int main(int argc, char** argv) {
  if (argc != 4 || atoi(argv[1]) <= 0) { fprintf(stderr, "usage: restart_floor N HOLD FILE\n"); return 2; }
  const int n = atoi(argv[1]);
  char* hold[] = {argv[2], argv[3], NULL};
  pid_t* pids = calloc((size_t)n, sizeof *pids);
  if (!pids) return 1;
  setenv("DLAUNCH_RESTART_COUNT", "0", 1);
  if (start(n, hold, pids)) { fprintf(stderr, "restart_floor: fork failed\n"); return 1; }
  const double limit = now() + 600;
  while (lines_in(argv[3]) < n) {
    if (now() > limit) { fprintf(stderr, "restart_floor: %s: fewer than %d start lines after 600 s\n", argv[3], n); return 1; }
    usleep(20000);
  }
  const double t0 = now();
  for (int i = 0; i < n; ++i) kill(pids[i], SIGTERM);
  int failed = reap(n);
  setenv("DLAUNCH_RESTART_COUNT", "1", 1);
  if (start(n, hold, pids)) { fprintf(stderr, "restart_floor: fork failed\n"); return 1; }
  failed |= reap(n);
  printf("%.3f\n", now() - t0);
  free(pids);
  return failed;
}
