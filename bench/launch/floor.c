/* The floor for launching: fork/exec N copies of a program and wait for
 * them all, nothing else. Usage: floor N PROGRAM [ARGS...] */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) { fprintf(stderr, "usage: floor N PROGRAM [ARGS...]\n"); return 2; }
  int n = atoi(argv[1]), failed = 0;
  for (int i = 0; i < n; ++i) {
    pid_t p = fork();
    if (p == 0) { execv(argv[2], argv + 2); _exit(127); }
  }
  for (int i = 0; i < n; ++i) {
    int st;
    if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
  }
  return failed;
}
