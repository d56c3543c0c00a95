/* MPMD under dlaunch: each rank's MPI_APPNUM attribute (from the PMIx
 * server's PMIX_APPNUM) must equal the MPI_APPNUM variable dlaunch set, and
 * MPI_COMM_WORLD spans every app context (an Allreduce over all ranks). argv[1]
 * is a label of the context ("server", "worker"); prints
 * "appnum RANK of SIZE app A LABEL ok" per rank, BAD lines on a mismatch. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  int rank, size, flag = 0, bad = 0;
  int* appnum = NULL;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
  const char* want = getenv("MPI_APPNUM");
  if (!flag || !want || *appnum != atoi(want)) {
    printf("appnum BAD rank %d: attribute %d (set %d), MPI_APPNUM=%s\n", rank, flag ? *appnum : -1, flag,
           want ? want : "(unset)");
    bad = 1;
  }
  long mine = rank, sum = -1;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (sum != (long)size * (size - 1) / 2) {
    printf("appnum BAD rank %d: allreduce %ld\n", rank, sum);
    bad = 1;
  }
  if (!bad) printf("appnum %d of %d app %d %s ok\n", rank, size, *appnum, argc > 1 ? argv[1] : "-");
  MPI_Finalize();
  return bad;
}
