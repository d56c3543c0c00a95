#!/usr/bin/python3
"""dlaunch's TCP store vs torch.distributed.TCPStore, measured in one run.

Run with Debian's python (torch 1.13):  /usr/bin/python3 bench/store/store_bench.py [BUILD_DIR]
Both stores are measured the same way:
  ops:     one client, server in the same process (a background thread, as
           torch's is_master=True), N sequential set/get/add on loopback.
  barrier: W client *processes* forked first (torch's after `import torch`)
           and blocked on a pipe; then the server starts in the parent and
           its port is written to the pipe (the clock starts). Each child
           connects, add("arrived", 1), the last sets "go", all wait(["go"])
           and exit. Time until every child has exited.
"""
import datetime
import os
import resource
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


def torch_barrier(w):
    # Children first (see store_bench.cc), blocked on a pipe until the port.
    rfd, wfd = os.pipe()
    pids = []
    for _ in range(w):
        pid = os.fork()
        if pid == 0:
            os.close(wfd)
            rc = 0
            try:
                port = int.from_bytes(os.read(rfd, 2), "little")
                c = dist.TCPStore("127.0.0.1", port, None, False, datetime.timedelta(seconds=120))
                if c.add("arrived", 1) == w:
                    c.set("go", "1")
                c.wait(["go"])
            except Exception as e:  # noqa: BLE001 - report and fail the child
                sys.stderr.write("torch client: %s\n" % e)
                rc = 1
            os._exit(rc)
        pids.append(pid)
    os.close(rfd)
    s = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=120), wait_for_workers=False)
    t0 = time.perf_counter()
    for _ in range(w):
        os.write(wfd, s.port.to_bytes(2, "little"))
    failed = sum(1 for p in pids if os.waitpid(p, 0)[1] != 0)
    elapsed = time.perf_counter() - t0
    os.close(wfd)
    return elapsed, failed


def dlaunch(binary, *args):
    out = subprocess.run([binary, *map(str, args)], check=True, capture_output=True, text=True).stdout
    vals = {}
    for line in out.splitlines():
        name, _, value = line.partition(" ")
        if name == "error":
            raise SystemExit("dlaunch store_bench: " + line)
        vals[name] = float(value)
    return vals


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../build")
    binary = os.path.join(build, "bin", "store_bench")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    rows = []
    d = dlaunch(binary, "ops", N_OPS)
    t = torch_ops(N_OPS)
    for op in ("set", "get", "add"):
        du, tu = d[op + "_us"], t[op + "_us"]
        rows.append(("%s (1 client, %d ops)" % (op, N_OPS), "%.1f us  %7.0f/s" % (du, 1e6 / du),
                     "%.1f us  %7.0f/s" % (tu, 1e6 / tu), "%.2fx ops/s" % (tu / du)))
    for w in WIDTHS:
        ds = dlaunch(binary, "barrier", w)["barrier_s"]
        ts, failed = torch_barrier(w)
        note = "" if not failed else "  (%d torch clients failed)" % failed
        rows.append(("barrier, %d processes" % w, "%.3f s" % ds, "%.3f s%s" % (ts, note), "%.2fx faster" % (ts / ds)))
    head = ("measure", "dlaunch store", "torch TCPStore", "dlaunch vs torch")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
    fmt = " | ".join("%-" + str(x) + "s" for x in widths)
    print(fmt % head)
    print("-+-".join("-" * x for x in widths))
    for r in rows:
        print(fmt % r)


if __name__ == "__main__":
    main()
