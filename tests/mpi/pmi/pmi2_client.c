/* A real PMI-2 client: Slurm's libpmi2 (Debian's libpmi2-0), the library
 * Intel MPI loads with I_MPI_PMI=pmi2 and I_MPI_PMI_LIBRARY=libpmi2.so, and
 * the PMI-2 wire protocol MPICH-derived MPIs speak. Every rank checks what a
 * PMI-2 MPI needs at start-up and prints one line:
 *
 *   pmi2 rank R of N jobid J ok       (or a line with BAD and what was wrong)
 *
 * usage: pmi2_client N [marker] [abort]
 *   N       the size the job must have
 *   marker  ignored (a tag tests find leftover processes by)
 *   abort   the last rank calls PMI2_Abort after the fence
 *
 * Checks: PMI2_Init's size, rank (against RANK, which dlaunch sets) and
 * spawned flag; the job id; every rank's KVS put visible to every rank after
 * one fence (a second round, too, so a server that serves one fence only
 * fails); PMI_process_mapping; a node attribute put by the host's first
 * local rank and waited for by the others (PMI2_Info_GetNodeAttr with
 * waitfor); PMI2_Finalize. */
#include <slurm/pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int bad = 0;
static int my_rank = -1;

static void fail(const char* what, int rc) {
  printf("pmi2 rank %d BAD %s (rc %d)\n", my_rank, what, rc);
  fflush(stdout);
  bad = 1;
}

static int env_int(const char* name) {
  const char* v = getenv(name);
  return v ? atoi(v) : -1;
}

static void exchange(const char* jobid, int size, int round) {
  char key[64], val[256], got[256];
  int len = 0, rc;
  snprintf(key, sizeof key, "k%d-%d", round, my_rank);
  snprintf(val, sizeof val, "value of rank %d in round %d", my_rank, round);
  if ((rc = PMI2_KVS_Put(key, val)) != PMI2_SUCCESS) fail("KVS_Put", rc);
  if ((rc = PMI2_KVS_Fence()) != PMI2_SUCCESS) fail("KVS_Fence", rc);
  for (int r = 0; r < size; ++r) {
    snprintf(key, sizeof key, "k%d-%d", round, r);
    snprintf(val, sizeof val, "value of rank %d in round %d", r, round);
    memset(got, 0, sizeof got);
    rc = PMI2_KVS_Get(jobid, r, key, got, sizeof got, &len);
    if (rc != PMI2_SUCCESS || strcmp(got, val) != 0) {
      char what[400];
      snprintf(what, sizeof what, "KVS_Get %s gave '%s'", key, got);
      fail(what, rc);
    }
  }
}

int main(int argc, char** argv) {
  int spawned = -1, size = -1, appnum = -1, rc;
  if (argc < 2) {
    fprintf(stderr, "usage: pmi2_client N [marker] [abort]\n");
    return 2;
  }
  const int expect = atoi(argv[1]);
  const int do_abort = argc > 3 && strcmp(argv[3], "abort") == 0;
  if ((rc = PMI2_Init(&spawned, &size, &my_rank, &appnum)) != PMI2_SUCCESS) {
    fail("PMI2_Init", rc);
    return 1;
  }
  if (size != expect) fail("size", size);
  if (my_rank != env_int("RANK")) fail("rank is not RANK", my_rank);
  if (spawned != 0) fail("spawned", spawned);
  if (appnum != 0) fail("appnum", appnum);

  char jobid[256] = "";
  if ((rc = PMI2_Job_GetId(jobid, sizeof jobid)) != PMI2_SUCCESS || !jobid[0]) fail("Job_GetId", rc);

  exchange(jobid, size, 1);
  exchange(jobid, size, 2);

  char map[1024] = "";
  int found = 0;
  rc = PMI2_Info_GetJobAttr("PMI_process_mapping", map, sizeof map, &found);
  if (rc != PMI2_SUCCESS || !found || strncmp(map, "(vector,", 8) != 0) fail("PMI_process_mapping", rc);

  /* The host's first local rank publishes its rank; the others wait for it.
   * dlaunch places ranks in blocks, so the leader is RANK - LOCAL_RANK. */
  const int local = env_int("LOCAL_RANK");
  char attr[64], want[64];
  snprintf(want, sizeof want, "%d", my_rank - local);
  if (local == 0) {
    if ((rc = PMI2_Info_PutNodeAttr("dl-leader", want)) != PMI2_SUCCESS) fail("PutNodeAttr", rc);
  } else {
    memset(attr, 0, sizeof attr);
    rc = PMI2_Info_GetNodeAttr("dl-leader", attr, sizeof attr, &found, 1);
    if (rc != PMI2_SUCCESS || !found || strcmp(attr, want) != 0) fail("GetNodeAttr dl-leader", rc);
  }

  if (do_abort && my_rank == size - 1) {
    char msg[128];
    snprintf(msg, sizeof msg, "pmi2 rank %d gives up", my_rank);
    PMI2_Abort(1, msg);
    return 3; /* not reached: the launcher ends the job */
  }
  if (do_abort) sleep(60); /* the others wait to be ended */

  if ((rc = PMI2_Finalize()) != PMI2_SUCCESS) fail("Finalize", rc);
  printf("pmi2 rank %d of %d jobid %s %s\n", my_rank, size, jobid, bad ? "BAD" : "ok");
  return bad;
}
