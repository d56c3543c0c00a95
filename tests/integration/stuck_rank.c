/* A native rank that gets stuck, for tests/integration/stacks_test.cc: rank
 * $STUCK_ELSEWHERE waits in stuck_elsewhere(), every other rank in
 * stuck_here(), each after touching $READY_DIR/ready.$RANK. Built with -g
 * at test build time; its arguments (the test's marker) are ignored. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void ready(const char* rank) {
  const char* dir = getenv("READY_DIR");
  char path[4096];
  if (!dir) return;
  snprintf(path, sizeof path, "%s/ready.%s", dir, rank);
  FILE* f = fopen(path, "w");
  if (f) fclose(f);
}

__attribute__((noinline)) static void stuck_here(const char* rank) {
  ready(rank);
  for (;;) pause();
}

__attribute__((noinline)) static void stuck_elsewhere(const char* rank) {
  ready(rank);
  for (;;) pause();
}

int main(void) {
  const char* rank = getenv("RANK");
  const char* odd = getenv("STUCK_ELSEWHERE");
  if (!rank) return 2;
  if (odd && strcmp(rank, odd) == 0) stuck_elsewhere(rank);
  else stuck_here(rank);
  return 0;
}
