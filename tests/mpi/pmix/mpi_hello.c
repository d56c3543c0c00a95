/* MPI hello for the PMIx tests: checks MPI's own view of size and rank
 * against the launcher's (RANK / WORLD_SIZE when set, else argv[1] = size),
 * an Allreduce of the ranks (expected n(n-1)/2), a Barrier, and the node-local
 * communicator's size (expected: all ranks, one host). Prints one line per
 * rank; exits non-zero on any mismatch. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(int rank, const char* what, long got, long want) {
  fprintf(stderr, "mpi_hello: rank %d: %s is %ld, expected %ld\n", rank, what, got, want);
  return 1;
}

int main(int argc, char** argv) {
  int rank, size, local_size, bad = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* want_size = getenv("WORLD_SIZE");
  const char* want_rank = getenv("RANK");
  if (argc > 1) want_size = argv[1];
  if (want_size && atoi(want_size) != size) bad |= fail(rank, "MPI_Comm_size", size, atoi(want_size));
  if (want_rank && atoi(want_rank) != rank) bad |= fail(rank, "MPI_Comm_rank", rank, atoi(want_rank));
  long mine = rank, sum = -1;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (sum != (long)size * (size - 1) / 2) bad |= fail(rank, "allreduce sum", sum, (long)size * (size - 1) / 2);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &local_size);
  const char* want_local = getenv("LOCAL_WORLD_SIZE");
  if (want_local && atoi(want_local) != local_size)
    bad |= fail(rank, "node-local size", local_size, atoi(want_local));
  MPI_Comm_free(&local);
  MPI_Barrier(MPI_COMM_WORLD);
  printf("hello rank %d of %d sum %ld local %d %s\n", rank, size, sum, local_size, bad ? "BAD" : "ok");
  fflush(stdout);
  MPI_Finalize();
  return bad;
}
