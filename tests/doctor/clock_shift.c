/* A test-only LD_PRELOAD library that moves one process tree's wall clock:
 * CLOCK_REALTIME (clock_gettime, gettimeofday, time) reads DL_CLOCK_SHIFT_S
 * seconds off the kernel's. The way libfaketime does it, in a few lines.
 * Linux time namespaces offset only CLOCK_MONOTONIC and CLOCK_BOOTTIME, and
 * setting the real clock would move every process on the machine, so a
 * namespace host whose clock is off is made this way: its sshd sets
 * LD_PRELOAD for its sessions (cluster.sh setenv), and the doctor's peer
 * there reads the clock through libc as it does on any host. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long long shift_ns(void) {
  const char* s = getenv("DL_CLOCK_SHIFT_S");
  return s ? (long long)(atof(s) * 1e9) : 0;
}

int clock_gettime(clockid_t id, struct timespec* ts) {
  static int (*real)(clockid_t, struct timespec*);
  if (!real) real = (int (*)(clockid_t, struct timespec*))dlsym(RTLD_NEXT, "clock_gettime");
  int rc = real(id, ts);
  if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
    long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + shift_ns();
    ts->tv_sec = ns / 1000000000LL;
    ts->tv_nsec = ns % 1000000000LL;
  }
  return rc;
}

// glibc declares tv non-null; a program that passes NULL anyway must not
// crash in this stand-in, so the check stays (and gcc's warning about it goes).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnonnull-compare"
int gettimeofday(struct timeval* tv, void* tz) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
  if (tv) tv->tv_sec = ts.tv_sec, tv->tv_usec = ts.tv_nsec / 1000;
  (void)tz;
  return 0;
}
#pragma GCC diagnostic pop

time_t time(time_t* t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (t) *t = ts.tv_sec;
  return ts.tv_sec;
}
