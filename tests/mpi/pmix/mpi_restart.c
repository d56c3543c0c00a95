/* An MPI job that loses a rank in its first attempt and must come back as
 * one world in the next (dlaunch --max-restarts; docs/failures.md). Plain
 * MPI: built by OpenMPI's mpicc (tests/mpi/pmix) and MPICH's (tests/mpi/pmi).
 *
 *   mpi_restart N LOST HOW [marker]
 *
 * N is the world size every rank must see; the attempt is
 * DLAUNCH_RESTART_COUNT. Every attempt starts with MPI_Init and an
 * Allreduce of the ranks (n(n-1)/2), and each rank prints
 * "attempt A rank R of S sum X ok|BAD". In attempt 0, rank LOST then
 * fails, as HOW says: "exit" (exit code 1), "kill" (SIGKILL to itself), or
 * "hold" (it creates /tmp/<marker>.held, which tells the test that every
 * rank is past MPI_Init, and sleeps until the test kills its host); every
 * other rank waits
 * for it in MPI_Barrier, until dlaunch stops it (after a first Barrier that
 * every rank enters once its line is written). A later attempt ends with
 * a Barrier and MPI_Finalize. Exits non-zero on any mismatch (MPI's size
 * against N, its rank against RANK, the sum). */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: mpi_restart N LOST exit|kill|hold [marker]\n");
    return 2;
  }
  const int want = atoi(argv[1]), lost = atoi(argv[2]);
  const char* how = argv[3];
  const char* count = getenv("DLAUNCH_RESTART_COUNT");
  const int attempt = count ? atoi(count) : -1;
  int rank, size, bad = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* want_rank = getenv("RANK");
  if (size != want) bad = 1, fprintf(stderr, "mpi_restart: rank %d: MPI_Comm_size is %d, expected %d\n", rank, size, want);
  if (want_rank && atoi(want_rank) != rank)
    bad = 1, fprintf(stderr, "mpi_restart: rank %d: MPI_Comm_rank differs from RANK=%s\n", rank, want_rank);
  long mine = rank, sum = -1;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (sum != (long)size * (size - 1) / 2) bad = 1;
  printf("attempt %d rank %d of %d sum %ld %s\n", attempt, rank, size, sum, bad ? "BAD" : "ok");
  fflush(stdout);
  if (attempt == 0) {
    /* Every rank's line written before the lost one fails: else a rank still
     * on its way to printf when the job is torn down had none to lose. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == lost) {
      if (strcmp(how, "kill") == 0) raise(SIGKILL);
      if (strcmp(how, "hold") == 0) {
        if (argc > 4) {
          char path[512];
          snprintf(path, sizeof path, "/tmp/%s.held", argv[4]);
          FILE* f = fopen(path, "w");
          if (f) fclose(f);
        }
        for (;;) sleep(1);
      }
      _exit(1);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* waits for the lost rank: dlaunch stops it */
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return bad;
}
