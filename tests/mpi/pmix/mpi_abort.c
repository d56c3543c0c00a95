/* MPI_Abort case for the PMIx tests: after a barrier, the last rank calls
 * MPI_Abort(MPI_COMM_WORLD, argv[1] or 7) while the others wait in a second
 * barrier that never completes; the launcher must end the job with that code. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == size - 1) MPI_Abort(MPI_COMM_WORLD, argc > 1 ? atoi(argv[1]) : 7);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
