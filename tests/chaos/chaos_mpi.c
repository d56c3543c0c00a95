/* The chaos run's MPI job: `chaos_mpi LINES MARK`. Every rank takes part in
 * LINES allreduces, one every 50 ms, checks each sum and prints
 * "chaos RANK I a=0 MARK" after step I (the shell job's lines), so a lost or
 * spliced line shows as in any other job. Exits 1 on a wrong sum. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int lines = argc > 1 ? atoi(argv[1]) : 10;
  const char* mark = argc > 2 ? argv[2] : "";
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 0; i < lines; ++i) {
    long mine = rank + i, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (sum != (long)size * (size - 1) / 2 + (long)size * i) {
      fprintf(stderr, "chaos_mpi: rank %d step %d sum %ld is wrong\n", rank, i, sum);
      MPI_Finalize();
      return 1;
    }
    printf("chaos %d %d a=0 %s\n", rank, i, mark);
    usleep(50000);
  }
  MPI_Finalize();
  return 0;
}
