/* dlcoll: the dlaunch collectives library, C API.
 *
 * Every function returns DLCOLL_OK (0) or an error code; after an error,
 * dlcoll_last_error() returns a message for this thread that names the rank,
 * host or argument involved and what to do. Handles are opaque; a
 * communicator is used from one thread at a time. Counts are in elements.
 * In-place: pass the same pointer as input and output (reduce_scatter:
 * out == in + rank*count; all_gather/gather: in == out + rank*count).
 * After a collective fails, the communicator is aborted: free it.
 *
 *   dlcoll_comm_t c;
 *   if (dlcoll_init("env://", 300000, &c) != DLCOLL_OK) { puts(dlcoll_last_error()); exit(1); }
 *   dlcoll_all_reduce(c, buf, buf, n, DLCOLL_FLOAT32, DLCOLL_SUM);
 *   dlcoll_free(c);
 */
#ifndef DLCOLL_H
#define DLCOLL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DLCOLL_VERSION_MAJOR 0
#define DLCOLL_VERSION_MINOR 1

typedef struct dlcoll_comm* dlcoll_comm_t;
typedef struct dlcoll_work* dlcoll_work_t;

typedef enum {
  DLCOLL_OK = 0,
  DLCOLL_ERR_USAGE = 1,    /* bad argument or mismatched call across ranks */
  DLCOLL_ERR_IO = 2,       /* a system call or socket failed */
  DLCOLL_ERR_TIMEOUT = 3,  /* a wait ran out; the message names who we waited for */
  DLCOLL_ERR_REMOTE = 4,   /* a peer died, aborted or disagreed */
  DLCOLL_ERR_AUTH = 5,     /* a peer failed the job-token handshake */
  DLCOLL_ERR_INTERNAL = 6  /* anything else (out of memory, ...) */
} dlcoll_status;

/* Numeric values match dl::coll::DataType / ReduceOp. */
typedef enum {
  DLCOLL_INT8 = 0, DLCOLL_UINT8 = 1, DLCOLL_INT32 = 2, DLCOLL_INT64 = 3,
  DLCOLL_FLOAT16 = 4, DLCOLL_BFLOAT16 = 5, DLCOLL_FLOAT32 = 6, DLCOLL_FLOAT64 = 7
} dlcoll_dtype;

typedef enum { DLCOLL_SUM = 0, DLCOLL_PROD = 1, DLCOLL_MIN = 2, DLCOLL_MAX = 3, DLCOLL_AVG = 4 } dlcoll_op;

/* The last error message of the calling thread ("" when none). */
const char* dlcoll_last_error(void);

/* Joins through a rendezvous URL (env://, tcp://host:port, file:///path),
 * rank and size from the environment (dlaunch, torchrun, OpenMPI, PMI,
 * Slurm). timeout_ms bounds setup and every later collective (0: 300000). */
int dlcoll_init(const char* url, int timeout_ms, dlcoll_comm_t* out);
/* Frees the communicator (waits for its queued async work). NULL is fine. */
int dlcoll_free(dlcoll_comm_t comm);
int dlcoll_rank(dlcoll_comm_t comm, int* rank);
int dlcoll_size(dlcoll_comm_t comm, int* size);
/* Sub-communicator of ranks[0..n); *out is NULL on ranks not listed. */
int dlcoll_new_group(dlcoll_comm_t comm, const int* ranks, int n, dlcoll_comm_t* out);

int dlcoll_broadcast(dlcoll_comm_t c, void* buf, size_t count, dlcoll_dtype t, int root);
int dlcoll_all_reduce(dlcoll_comm_t c, const void* in, void* out, size_t count, dlcoll_dtype t, dlcoll_op op);
int dlcoll_reduce(dlcoll_comm_t c, const void* in, void* out, size_t count, dlcoll_dtype t, dlcoll_op op, int root);
int dlcoll_all_gather(dlcoll_comm_t c, const void* in, void* out, size_t count, dlcoll_dtype t);
int dlcoll_all_gather_v(dlcoll_comm_t c, const void* in, void* out, const size_t* counts, dlcoll_dtype t);
int dlcoll_gather(dlcoll_comm_t c, const void* in, void* out, size_t count, dlcoll_dtype t, int root);
int dlcoll_scatter(dlcoll_comm_t c, const void* in, void* out, size_t count, dlcoll_dtype t, int root);
int dlcoll_reduce_scatter(dlcoll_comm_t c, const void* in, void* out, size_t count, dlcoll_dtype t, dlcoll_op op);
int dlcoll_all_to_all(dlcoll_comm_t c, const void* in, void* out, size_t count, dlcoll_dtype t);
int dlcoll_barrier(dlcoll_comm_t c);
int dlcoll_send(dlcoll_comm_t c, const void* buf, size_t count, dlcoll_dtype t, int dst);
int dlcoll_recv(dlcoll_comm_t c, void* buf, size_t count, dlcoll_dtype t, int src);

/* Asynchronous forms: start the operation and return a work handle; buffers
 * must stay valid until it completes. */
int dlcoll_broadcast_async(dlcoll_comm_t c, void* buf, size_t count, dlcoll_dtype t, int root, dlcoll_work_t* w);
int dlcoll_all_reduce_async(dlcoll_comm_t c, const void* in, void* out, size_t count, dlcoll_dtype t, dlcoll_op op,
                            dlcoll_work_t* w);
int dlcoll_reduce_async(dlcoll_comm_t c, const void* in, void* out, size_t count, dlcoll_dtype t, dlcoll_op op,
                        int root, dlcoll_work_t* w);
int dlcoll_all_gather_async(dlcoll_comm_t c, const void* in, void* out, size_t count, dlcoll_dtype t,
                            dlcoll_work_t* w);
int dlcoll_reduce_scatter_async(dlcoll_comm_t c, const void* in, void* out, size_t count, dlcoll_dtype t,
                                dlcoll_op op, dlcoll_work_t* w);
int dlcoll_all_to_all_async(dlcoll_comm_t c, const void* in, void* out, size_t count, dlcoll_dtype t,
                            dlcoll_work_t* w);
int dlcoll_barrier_async(dlcoll_comm_t c, dlcoll_work_t* w);
int dlcoll_send_async(dlcoll_comm_t c, const void* buf, size_t count, dlcoll_dtype t, int dst, dlcoll_work_t* w);
int dlcoll_recv_async(dlcoll_comm_t c, void* buf, size_t count, dlcoll_dtype t, int src, dlcoll_work_t* w);

/* Waits up to timeout_ms (< 0: forever); DLCOLL_ERR_TIMEOUT if still running
 * (wait again), else the operation's result. */
int dlcoll_work_wait(dlcoll_work_t w, int timeout_ms);
/* *done = 1 once the operation finished (successfully or not). */
int dlcoll_work_test(dlcoll_work_t w, int* done);
int dlcoll_work_free(dlcoll_work_t w);

#ifdef __cplusplus
}
#endif
#endif /* DLCOLL_H */
