#!/usr/bin/python3
"""dlaunch's TCP store vs torch.distributed.TCPStore, measured in one run.

Run with Debian's python (torch 1.13):  /usr/bin/python3 bench/store/store_bench.py [BUILD_DIR [REPEAT]]
Both stores are measured the same way:
  ops:     one client, server in the same process (a background thread, as
           torch's is_master=True), N sequential set/get/add on loopback.
  barrier: W client *processes* forked first (torch's after `import torch`),
           blocked on one eventfd; then the server starts in the parent, its
           port goes to shared memory and one eventfd write releases them
           all (the clock starts).
           Each child connects, passes the barrier and stamps the time into
           shared memory, then stays until every child has stamped (as a
           rank stays in its job after a barrier), so no child's exit runs
           while others still wait for a CPU. Time until the last stamp.
           torch's barrier and dlaunch's "add + wait" row: add("arrived", 1),
           the last sets "go", all wait(["go"]). dlaunch's "barrier" row:
           Store::barrier, one request that the server answers when all
           have arrived. dlaunch's C++ children allocate once from the heap
           before the release, as torch's Python children do (and as any
           rank has long before it meets its store): a forked child's first
           malloc copies the allocator's state page by page, 250-300 us on
           this VM, which is fork's cost, not the store's.
           DL_STORE_BENCH_COLD=1 leaves that out.
  wake-up: the same children with no store, stamping at once: what this
           start-up method costs by itself on this machine (the floor).
  echo:    (dlaunch column only) the same children making Store::barrier's
           two blocking round trips (hello, barrier) with one byte each
           against a bare epoll loop: the floor of the protocol's shape, with
           no authentication, store or Asio.
Both sides run with LD_BIND_NOW=1 (see main). Every measure runs REPEAT times, alternating dlaunch and torch; the table
shows medians and the ratio of the medians.
"""
import datetime
import mmap
import os
import resource
import select
import statistics
import struct
import subprocess
import sys
import time

import torch.distributed as dist

N_OPS = 20000
WIDTHS = (64, 256, 1024)


def torch_ops(n):
    s = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=60), wait_for_workers=False)
    out = {}
    t0 = time.perf_counter()
    for i in range(n):
        s.set("key%d" % (i % 100), "value")
    out["set_us"] = (time.perf_counter() - t0) * 1e6 / n
    t0 = time.perf_counter()
    for i in range(n):
        s.get("key%d" % (i % 100))
    out["get_us"] = (time.perf_counter() - t0) * 1e6 / n
    t0 = time.perf_counter()
    for _ in range(n):
        s.add("counter", 1)
    out["add_us"] = (time.perf_counter() - t0) * 1e6 / n
    assert s.get("counter") == str(n).encode(), "torch counter mismatch"
    return out


def torch_barrier(w, use_store=True):
    # As store_bench.cc: children first, blocked on one eventfd (semaphore
    # mode) until the port is in shared memory; each stamps CLOCK_MONOTONIC
    # into shared memory when its wait returns; the time is the last stamp
    # minus the release.
    shared = mmap.mmap(-1, 8 * (w + 1))  # anonymous, shared with the children
    go = os.eventfd(0, os.EFD_SEMAPHORE | os.EFD_CLOEXEC)
    stamped = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)  # children that stamped (or failed)
    leave = os.eventfd(0, os.EFD_SEMAPHORE | os.EFD_CLOEXEC)  # written once all have
    for i in range(w):
        pid = os.fork()
        if pid == 0:
            rc = 0
            try:
                if not select.select([go], [], [], 120)[0]:
                    raise TimeoutError("not released within 120 s")
                os.eventfd_read(go)
                if use_store:
                    port = int(struct.unpack_from("d", shared, 0)[0])
                    c = dist.TCPStore("127.0.0.1", port, None, False, datetime.timedelta(seconds=120))
                    if c.add("arrived", 1) == w:
                        c.set("go", "1")
                    c.wait(["go"])
                struct.pack_into("d", shared, 8 * (1 + i), time.clock_gettime(time.CLOCK_MONOTONIC))
            except Exception as e:  # noqa: BLE001 - report and fail the child
                sys.stderr.write("torch client: %s\n" % e)
                rc = 1
            try:
                os.eventfd_write(stamped, 1)
                if not select.select([leave], [], [], 120)[0]:
                    raise TimeoutError("not let go within 120 s")
                os.eventfd_read(leave)
            except Exception as e:  # noqa: BLE001
                sys.stderr.write("torch client: %s\n" % e)
                rc = 1
            os._exit(rc)
    s = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=120), wait_for_workers=False)
    struct.pack_into("d", shared, 0, float(s.port))
    t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
    os.eventfd_write(go, w)
    seen, deadline = 0, time.monotonic() + 120
    while seen < w and time.monotonic() < deadline:  # as store_bench.cc: a look every 2 ms
        time.sleep(0.002)
        try:
            seen += os.eventfd_read(stamped)
        except BlockingIOError:
            pass
    os.eventfd_write(leave, w)
    failed = sum(1 for _ in range(w) if os.wait()[1] != 0)
    elapsed = max(struct.unpack_from("%dd" % w, shared, 8)) - t0
    for fd in (go, stamped, leave):
        os.close(fd)
    return elapsed, failed


def dlaunch(binary, *args, env=None):
    out = subprocess.run([binary, *map(str, args)], check=True, capture_output=True, text=True,
                         env=dict(os.environ, **(env or {}))).stdout
    vals = {}
    for line in out.splitlines():
        name, _, value = line.partition(" ")
        if name == "error":
            raise SystemExit("dlaunch store_bench: " + line)
        vals[name] = float(value.split()[0])
    return vals


def median_of(runs, key=None):
    return statistics.median(runs if key is None else [r[key] for r in runs])


def main():
    # Bind every symbol at load, in this process and in store_bench: else
    # each forked child runs the dynamic linker on its first calls (14% of
    # the children's CPU at W = 1024), on both sides, which is not the store.
    if os.environ.get("LD_BIND_NOW") != "1":
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, LD_BIND_NOW="1"))
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../build")
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    binary = os.path.join(build, "bin", "store_bench")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    load_before = os.getloadavg()
    rows = []
    d_runs, t_runs = [], []
    for _ in range(repeat):
        d_runs.append(dlaunch(binary, "ops", N_OPS))
        t_runs.append(torch_ops(N_OPS))
    for op in ("set", "get", "add"):
        du, tu = median_of(d_runs, op + "_us"), median_of(t_runs, op + "_us")
        rows.append(("%s (1 client, %d ops)" % (op, N_OPS), "%.1f us  %7.0f/s" % (du, 1e6 / du),
                     "%.1f us  %7.0f/s" % (tu, 1e6 / tu), "%.2fx ops/s" % (tu / du)))
    for w in WIDTHS:
        for mode, name in (("barrier", "barrier, %d processes" % w),
                           ("cold", "  dlaunch, first malloc after fork timed"),
                           ("addwait", "  dlaunch as add + wait, %d processes" % w),
                           ("wakeup", "  floor: wake %d processes, no store" % w),
                           ("echo", "  floor: Store::barrier's round trips, bare echo")):
            d_s, t_s, failed = [], [], 0
            for _ in range(repeat):
                if mode == "cold":
                    d_s.append(dlaunch(binary, "barrier", w, env={"DL_STORE_BENCH_COLD": "1"})["barrier_s"])
                else:
                    d_s.append(dlaunch(binary, mode, w)["barrier_s"])
                if mode in ("echo", "addwait", "cold"):
                    continue  # dlaunch-only rows
                elapsed, f = torch_barrier(w, use_store=(mode == "barrier"))
                t_s.append(elapsed)
                failed += f
            ds = median_of(d_s)
            if mode in ("echo", "addwait", "cold"):
                rows.append((name, "%.3f s" % ds, "", ""))
                continue
            ts = median_of(t_s)
            note = "" if not failed else "  (%d torch clients failed)" % failed
            ratio = "%.2fx faster" % (ts / ds) if mode == "barrier" else ""
            rows.append((name, "%.3f s" % ds, "%.3f s%s" % (ts, note), ratio))
    head = ("measure (median of %d)" % repeat, "dlaunch store", "torch TCPStore", "dlaunch vs torch")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
    fmt = "| " + " | ".join("%-" + str(x) + "s" for x in widths) + " |"
    print("load average before: %.2f %.2f %.2f" % load_before)
    print(fmt % head)
    print("|-" + "-|-".join("-" * x for x in widths) + "-|")
    for r in rows:
        print(fmt % r)
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
