/* MPI ring with a big message for the MPICH tests: every rank sends a 4 MiB
 * buffer ($RING_BYTES bytes if set) around the ring with MPI_Sendrecv,
 * size-1 steps, so every rank's buffer visits every other rank once. Each
 * buffer is filled from (origin rank, index); at each step the receiver
 * checks every byte against the rank `step` places to its left, computed
 * independently. Exits non-zero on any wrong byte. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pattern(int origin, size_t i) { return (unsigned char)((origin * 131 + i * 7 + (i >> 12)) & 0xff); }

int main(int argc, char** argv) {
  int rank, size, bad = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* bytes = getenv("RING_BYTES");
  const size_t n = bytes ? (size_t)atol(bytes) : (size_t)4 << 20;
  unsigned char* carry = malloc(n);
  unsigned char* got = malloc(n);
  for (size_t i = 0; i < n; ++i) carry[i] = pattern(rank, i);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int step = 1; step < size; ++step) {
    memset(got, 0, n);
    MPI_Sendrecv(carry, (int)n, MPI_BYTE, right, step, got, (int)n, MPI_BYTE, left, step, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    const int origin = (rank - step + size) % size;
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += got[i] != pattern(origin, i);
    if (wrong) {
      fprintf(stderr, "mpi_big_ring: rank %d step %d: %zu of %zu bytes from rank %d wrong\n", rank, step, wrong, n,
              origin);
      bad = 1;
    }
    unsigned char* t = carry;
    carry = got, got = t;
  }
  printf("ring rank %d of %d bytes %zu %s\n", rank, size, n, bad ? "BAD" : "ok");
  fflush(stdout);
  free(carry), free(got);
  MPI_Finalize();
  return bad;
}
