/* MPI ring for the PMIx tests: n steps of MPI_Sendrecv to the right neighbour
 * pass every rank's value once around the ring; each rank checks the value
 * it got at every step (the rank `step` places to its left) and the final sum
 * n(n-1)/2 computed independently. Exits non-zero on any mismatch. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  int rank, size, bad = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  long carry = rank, sum = rank;
  for (int step = 1; step < size; ++step) {
    long got = -1;
    MPI_Sendrecv(&carry, 1, MPI_LONG, right, step, &got, 1, MPI_LONG, left, step, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    long want = (rank - step + size) % size;
    if (got != want) {
      fprintf(stderr, "mpi_ring: rank %d step %d got %ld, expected %ld\n", rank, step, got, want);
      bad = 1;
    }
    carry = got;
    sum += got;
  }
  if (sum != (long)size * (size - 1) / 2) {
    fprintf(stderr, "mpi_ring: rank %d sum %ld, expected %ld\n", rank, sum, (long)size * (size - 1) / 2);
    bad = 1;
  }
  printf("ring rank %d of %d sum %ld %s\n", rank, size, sum, bad ? "BAD" : "ok");
  MPI_Finalize();
  return bad;
}
