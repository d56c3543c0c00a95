/* The OpenMPI anchor: MPI_Allreduce / MPI_Allgather / MPI_Bcast on float32.
 *   mpi_bench OP LO HI FACTOR      sizes LO..HI by FACTOR (bytes, as dlaunch bench counts them)
 *   mpi_bench OP S1,S2,...         exactly these sizes
 * Prints one JSON line per size from rank 0: {"op","size","time_us"}, the
 * slowest rank's mean over 200 (< 1 MiB), 20 (< 64 MiB) or 5 iterations. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double run(const char* op, void* in, void* out, size_t bytes, int n, int iters) {
  int count = (int)(bytes / 4);
  double t0 = 0;
  for (int i = -2; i < iters; ++i) {
    if (i == 0) { MPI_Barrier(MPI_COMM_WORLD); t0 = MPI_Wtime(); }
    if (!strcmp(op, "all_reduce")) MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(op, "all_gather")) MPI_Allgather(in, count / n, MPI_FLOAT, out, count / n, MPI_FLOAT, MPI_COMM_WORLD);
    else MPI_Bcast(in, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
  }
  double us = (MPI_Wtime() - t0) * 1e6 / iters, worst;
  MPI_Allreduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char* op = argc > 1 ? argv[1] : "all_reduce";
  size_t list[64], nlist = 0, hi = 0;
  if (argc > 2 && strchr(argv[2], ',')) {
    for (char* p = argv[2]; *p && nlist < 64; ) {
      list[nlist++] = strtoull(p, &p, 10);
      if (*p == ',') ++p;
    }
  } else {
    size_t lo = argc > 2 ? strtoull(argv[2], 0, 10) : 8, top = argc > 3 ? strtoull(argv[3], 0, 10) : 1 << 20;
    int factor = argc > 4 ? atoi(argv[4]) : 4;
    for (size_t b = lo; b <= top && nlist < 64; b *= factor) list[nlist++] = b;
  }
  for (size_t i = 0; i < nlist; ++i) if (list[i] > hi) hi = list[i];
  char* in = malloc(hi + 64);
  char* out = malloc(hi + 64);
  memset(in, 0, hi + 64);
  memset(out, 0, hi + 64);
  for (size_t li = 0; li < nlist; ++li) {
    size_t b = list[li];
    size_t bytes = b / 4 / n * n * 4;
    if (strcmp(op, "all_gather") && b >= 4) bytes = b / 4 * 4;
    int iters = bytes >= (64u << 20) ? 5 : bytes >= (1u << 20) ? 20 : 200;
    double us = run(op, in, out, bytes, n, iters);
    if (rank == 0) printf("{\"op\":\"%s\",\"size\":%zu,\"time_us\":%.3f}\n", op, bytes, us);
    fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
