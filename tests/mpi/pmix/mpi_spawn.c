/* MPI_Comm_spawn under dlaunch. Run as the parent, `mpi_spawn MARKER
 * [crash]`: spawns 2 copies of itself with the arguments "child" and its
 * own, merges the intercommunicator and all-reduces the merged ranks with
 * the children (N parents: expected size N+2, sum 0+1+...+N+1). With "crash", child 1 kills itself
 * with SIGSEGV right after MPI_Init. Errors return (MPI_ERRORS_RETURN), so a
 * spawn that dlaunch refuses is reported as "spawn failed: <MPI's error
 * string>" and exit code 3, not as an abort. Prints "spawn parent ok" /
 * "spawn child ok". */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Comm parent, inter, merged;
  MPI_Comm_get_parent(&parent);
  const int child = parent != MPI_COMM_NULL;
  if (child) {
    inter = parent;
    int me = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (me == 1 && argc > 3 && strcmp(argv[3], "crash") == 0) raise(SIGSEGV);  // child MARKER crash
  } else {
    char* args[] = {"child", argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL, NULL};
    int errs[2];
    int rc = MPI_Comm_spawn(argv[0], args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, errs);
    if (rc != MPI_SUCCESS) {
      char text[MPI_MAX_ERROR_STRING];
      int len = 0;
      MPI_Error_string(rc, text, &len);
      printf("spawn failed: %s\n", text);
      fflush(stdout);
      MPI_Finalize();
      return 3;
    }
  }
  MPI_Intercomm_merge(inter, child, &merged);
  int rank, size;
  MPI_Comm_rank(merged, &rank);
  MPI_Comm_size(merged, &size);
  long mine = rank, sum = -1;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, merged);
  /* The parents (MPI_COMM_WORLD of the parent job) and the 2 children. */
  int parents = 0;
  if (child) MPI_Comm_remote_size(inter, &parents);
  else MPI_Comm_size(MPI_COMM_WORLD, &parents);
  const long want = (long)size * (size - 1) / 2;
  if (size != parents + 2 || sum != want) {
    printf("spawn BAD %s: merged size %d, sum %ld (expected size %d, sum %ld)\n", child ? "child" : "parent", size, sum,
           parents + 2, want);
    return 1;
  }
  printf("spawn %s ok\n", child ? "child" : "parent");
  MPI_Comm_free(&merged);
  MPI_Comm_disconnect(&inter);
  MPI_Finalize();
  return 0;
}
