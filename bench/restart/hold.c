/* The rank of bench/restart/host-loss.sh --sim: says when it started and,
 * in the first attempt, when it was told to stop, each as one O_APPEND
 * write to the file named by $1:
 *   start RANK ATTEMPT NS      at once (CLOCK_REALTIME, ns)
 *   term RANK ATTEMPT NS       on SIGTERM (attempt 0 only), then exits 0
 * Attempt 0 (DLAUNCH_RESTART_COUNT unset or 0) waits for SIGTERM in
 * sigwait, costing no CPU; later attempts exit 0 at once, about as cheap as
 * /bin/true, so the job ends as soon as the next attempt has run. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int say(const char* path, const char* what, const char* rank, long attempt) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  char line[96];
  int n = snprintf(line, sizeof line, "%s %s %ld %lld\n", what, rank, attempt, t.tv_sec * 1000000000LL + t.tv_nsec);
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (fd < 0 || write(fd, line, (size_t)n) != n) return 1;
  return close(fd);
}

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: hold FILE\n"); return 2; }
  const char* rank = getenv("RANK");
  const char* a = getenv("DLAUNCH_RESTART_COUNT");
  long attempt = a ? atol(a) : 0;
  if (!rank) rank = "-";
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, NULL); /* before the first write: a TERM now waits for sigwait */
  if (say(argv[1], "start", rank, attempt)) return 1;
  if (attempt > 0) return 0;
  int sig = 0;
  if (sigwait(&term, &sig) != 0) return 1;
  return say(argv[1], "term", rank, attempt);
}
