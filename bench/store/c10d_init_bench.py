#!/usr/bin/python3
"""torch's init_process_group("gloo") under dlaunch: the store dlaunch serves
(--torch-store served, the default) against torch's own TCPStore in rank 0
(--torch-store rank0), measured in one run on this host.

Run with Debian's python (torch 1.13):
    /usr/bin/python3 bench/store/c10d_init_bench.py [BUILD_DIR [REPEAT [WORLDS]]]
e.g. bench/store/c10d_init_bench.py build 3 2,4,8,16

  init:   each rank stamps the wall clock once torch is imported (ready) and
          once init_process_group("gloo") and one barrier have returned
          (done); a job's init time is its last done minus its last ready:
          the rendezvous itself, without the ranks' staggered imports.
  unused: the wall time of `dlaunch -n W /bin/true` (no rank touches either
          store): what serving the store costs a job that does not use it.
Every measure runs REPEAT times (unused: 10 x REPEAT), served and rank0
alternating which goes first; the table shows medians and served/rank0
(below 1: the served store is faster).
"""
import os
import statistics
import subprocess
import sys
import time

RANK = r"""
import os, sys, time
import torch.distributed as dist
ready = time.time()
dist.init_process_group("gloo")
dist.barrier()
print("stamp %d %.6f %.6f" % (dist.get_rank(), ready, time.time()), flush=True)
dist.destroy_process_group()
"""


def dlaunch(build, world, mode, argv):
    cmd = [os.path.join(build, "bin", "dlaunch"), "-n", str(world), "--torch-store", mode] + argv
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit("dlaunch -n %d --torch-store %s failed (%d):\n%s" % (world, mode, r.returncode, r.stderr))
    return r.stdout, wall


def init_seconds(build, world, mode):
    out, _ = dlaunch(build, world, mode, ["/usr/bin/python3", "-c", RANK])
    stamps = [line.split()[2:4] for line in out.splitlines() if line.startswith("stamp ")]
    if len(stamps) != world:
        sys.exit("expected %d stamps, got %d:\n%s" % (world, len(stamps), out))
    return max(float(d) for _, d in stamps) - max(float(r) for r, _ in stamps)


def unused_seconds(build, world, mode):
    return dlaunch(build, world, mode, ["/bin/true"])[1]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    worlds = [int(w) for w in (sys.argv[3] if len(sys.argv) > 3 else "2,4,8,16").split(",")]
    print("%-8s %5s %12s %12s %14s" % ("measure", "ranks", "served_ms", "rank0_ms", "served/rank0"))
    for what, fn in (("init", init_seconds), ("unused", unused_seconds)):
        for w in worlds:
            got = {"served": [], "rank0": []}
            # A dlaunch of /bin/true takes ~15 ms: ten times the runs. The
            # order alternates, so neither mode always runs first.
            for i in range(repeat * (10 if what == "unused" else 1)):
                for mode in (("served", "rank0") if i % 2 == 0 else ("rank0", "served")):
                    got[mode].append(fn(build, w, mode))
            s, r = statistics.median(got["served"]), statistics.median(got["rank0"])
            print("%-8s %5d %12.1f %12.1f %14.2f" % (what, w, s * 1e3, r * 1e3, s / r), flush=True)


if __name__ == "__main__":
    main()
