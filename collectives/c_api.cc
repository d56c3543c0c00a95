// The C API (include/dlcoll.h) over dl::coll::Communicator: exceptions
// become error codes plus a thread-local message.
#include "collectives/include/dlcoll.h"

#include <string>

#include "collectives/communicator.h"
#include "errors/error.h"

struct dlcoll_comm { std::unique_ptr<dl::coll::Communicator> c; };
struct dlcoll_work { dl::coll::WorkPtr w; };

namespace {

thread_local std::string last_error;

using dl::coll::DataType;
using dl::coll::ReduceOp;

int code_for(dl::ErrorKind k) {
  switch (k) {
    case dl::ErrorKind::kUsage: case dl::ErrorKind::kParse: return DLCOLL_ERR_USAGE;
    case dl::ErrorKind::kIo: return DLCOLL_ERR_IO;
    case dl::ErrorKind::kTimeout: return DLCOLL_ERR_TIMEOUT;
    case dl::ErrorKind::kRemote: return DLCOLL_ERR_REMOTE;
    case dl::ErrorKind::kAuth: return DLCOLL_ERR_AUTH;
  }
  return DLCOLL_ERR_INTERNAL;
}

template <class F>
int guard(F&& f) {
  try {
    last_error.clear();
    f();
    return DLCOLL_OK;
  } catch (const dl::Error& e) {
    last_error = e.what();
    return code_for(e.kind());
  } catch (const std::exception& e) {
    last_error = e.what();
    return DLCOLL_ERR_INTERNAL;
  }
}

dl::coll::Communicator& comm(dlcoll_comm_t c) {
  if (!c || !c->c) throw dl::UsageError("dlcoll: NULL communicator handle");
  return *c->c;
}
DataType dt(dlcoll_dtype t) {
  if (t < 0 || t >= dl::coll::kNumDataTypes) throw dl::UsageError("dlcoll: invalid dtype " + std::to_string(t));
  return static_cast<DataType>(t);
}
ReduceOp rop(dlcoll_op o) {
  if (o < 0 || o >= dl::coll::kNumReduceOps) throw dl::UsageError("dlcoll: invalid op " + std::to_string(o));
  return static_cast<ReduceOp>(o);
}
template <class F>
int start(dlcoll_work_t* w, F&& f) {
  return guard([&] {
    if (!w) throw dl::UsageError("dlcoll: NULL work handle pointer");
    *w = new dlcoll_work{f()};
  });
}

}  // namespace

extern "C" {

const char* dlcoll_last_error(void) { return last_error.c_str(); }

int dlcoll_init(const char* url, int timeout_ms, dlcoll_comm_t* out) {
  return guard([&] {
    if (!url || !out) throw dl::UsageError("dlcoll_init: url and out must not be NULL");
    dl::coll::Options o;
    if (timeout_ms > 0) o.timeout = std::chrono::milliseconds(timeout_ms);
    *out = new dlcoll_comm{dl::coll::Communicator::from_url(url, o)};
  });
}

int dlcoll_free(dlcoll_comm_t c) { return guard([&] { delete c; }); }
int dlcoll_rank(dlcoll_comm_t c, int* r) { return guard([&] { *r = comm(c).rank(); }); }
int dlcoll_size(dlcoll_comm_t c, int* s) { return guard([&] { *s = comm(c).size(); }); }

int dlcoll_new_group(dlcoll_comm_t c, const int* ranks, int n, dlcoll_comm_t* out) {
  return guard([&] {
    auto g = comm(c).new_group(std::vector<int>(ranks, ranks + n));
    *out = g ? new dlcoll_comm{std::move(g)} : nullptr;
  });
}

int dlcoll_broadcast(dlcoll_comm_t c, void* b, size_t n, dlcoll_dtype t, int root) {
  return guard([&] { comm(c).broadcast(b, n, dt(t), root); });
}
int dlcoll_all_reduce(dlcoll_comm_t c, const void* i, void* o, size_t n, dlcoll_dtype t, dlcoll_op op) {
  return guard([&] { comm(c).all_reduce(i, o, n, dt(t), rop(op)); });
}
int dlcoll_reduce(dlcoll_comm_t c, const void* i, void* o, size_t n, dlcoll_dtype t, dlcoll_op op, int root) {
  return guard([&] { comm(c).reduce(i, o, n, dt(t), rop(op), root); });
}
int dlcoll_all_gather(dlcoll_comm_t c, const void* i, void* o, size_t n, dlcoll_dtype t) {
  return guard([&] { comm(c).all_gather(i, o, n, dt(t)); });
}
int dlcoll_all_gather_v(dlcoll_comm_t c, const void* i, void* o, const size_t* counts, dlcoll_dtype t) {
  return guard([&] {
    auto& cm = comm(c);
    cm.all_gather_v(i, o, std::vector<size_t>(counts, counts + cm.size()), dt(t));
  });
}
int dlcoll_gather(dlcoll_comm_t c, const void* i, void* o, size_t n, dlcoll_dtype t, int root) {
  return guard([&] { comm(c).gather(i, o, n, dt(t), root); });
}
int dlcoll_scatter(dlcoll_comm_t c, const void* i, void* o, size_t n, dlcoll_dtype t, int root) {
  return guard([&] { comm(c).scatter(i, o, n, dt(t), root); });
}
int dlcoll_reduce_scatter(dlcoll_comm_t c, const void* i, void* o, size_t n, dlcoll_dtype t, dlcoll_op op) {
  return guard([&] { comm(c).reduce_scatter(i, o, n, dt(t), rop(op)); });
}
int dlcoll_all_to_all(dlcoll_comm_t c, const void* i, void* o, size_t n, dlcoll_dtype t) {
  return guard([&] { comm(c).all_to_all(i, o, n, dt(t)); });
}
int dlcoll_barrier(dlcoll_comm_t c) { return guard([&] { comm(c).barrier(); }); }
int dlcoll_send(dlcoll_comm_t c, const void* b, size_t n, dlcoll_dtype t, int dst) {
  return guard([&] { comm(c).send(b, n, dt(t), dst); });
}
int dlcoll_recv(dlcoll_comm_t c, void* b, size_t n, dlcoll_dtype t, int src) {
  return guard([&] { comm(c).recv(b, n, dt(t), src); });
}

int dlcoll_broadcast_async(dlcoll_comm_t c, void* b, size_t n, dlcoll_dtype t, int root, dlcoll_work_t* w) {
  return start(w, [&] { return comm(c).broadcast_async(b, n, dt(t), root); });
}
int dlcoll_all_reduce_async(dlcoll_comm_t c, const void* i, void* o, size_t n, dlcoll_dtype t, dlcoll_op op,
                            dlcoll_work_t* w) {
  return start(w, [&] { return comm(c).all_reduce_async(i, o, n, dt(t), rop(op)); });
}
int dlcoll_reduce_async(dlcoll_comm_t c, const void* i, void* o, size_t n, dlcoll_dtype t, dlcoll_op op, int root,
                        dlcoll_work_t* w) {
  return start(w, [&] { return comm(c).reduce_async(i, o, n, dt(t), rop(op), root); });
}
int dlcoll_all_gather_async(dlcoll_comm_t c, const void* i, void* o, size_t n, dlcoll_dtype t, dlcoll_work_t* w) {
  return start(w, [&] { return comm(c).all_gather_async(i, o, n, dt(t)); });
}
int dlcoll_reduce_scatter_async(dlcoll_comm_t c, const void* i, void* o, size_t n, dlcoll_dtype t, dlcoll_op op,
                                dlcoll_work_t* w) {
  return start(w, [&] { return comm(c).reduce_scatter_async(i, o, n, dt(t), rop(op)); });
}
int dlcoll_all_to_all_async(dlcoll_comm_t c, const void* i, void* o, size_t n, dlcoll_dtype t, dlcoll_work_t* w) {
  return start(w, [&] { return comm(c).all_to_all_async(i, o, n, dt(t)); });
}
int dlcoll_barrier_async(dlcoll_comm_t c, dlcoll_work_t* w) {
  return start(w, [&] { return comm(c).barrier_async(); });
}
int dlcoll_send_async(dlcoll_comm_t c, const void* b, size_t n, dlcoll_dtype t, int dst, dlcoll_work_t* w) {
  return start(w, [&] { return comm(c).send_async(b, n, dt(t), dst); });
}
int dlcoll_recv_async(dlcoll_comm_t c, void* b, size_t n, dlcoll_dtype t, int src, dlcoll_work_t* w) {
  return start(w, [&] { return comm(c).recv_async(b, n, dt(t), src); });
}

int dlcoll_work_wait(dlcoll_work_t w, int timeout_ms) {
  return guard([&] {
    if (!w) throw dl::UsageError("dlcoll_work_wait: NULL work handle");
    w->w->wait(timeout_ms < 0 ? dl::coll::kWaitForever : std::chrono::milliseconds(timeout_ms));
  });
}
int dlcoll_work_test(dlcoll_work_t w, int* done) { return guard([&] { *done = w->w->is_completed() ? 1 : 0; }); }
int dlcoll_work_free(dlcoll_work_t w) { return guard([&] { delete w; }); }

}  // extern "C"
