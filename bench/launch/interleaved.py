#!/usr/bin/env python3
"""bench/launch, interleaved: the same rows as run.sh, but every round runs
each launcher once in turn (in a new random order each round), so that a
machine whose speed drifts during the run (a shared VM) slows every row alike
instead of whichever row happened to run then. Prints the median wall time
in ms and the ratio to the fork/exec floor, and, per N, the ratio of dlaunch
to mpiexec.hydra. Last, the paired ratios: each round's time of a row over
the floor's in the same round, their median and a 95% interval for that
median (bootstrap): how sure a "within 1.3x of the floor" is, on this run.

  bench/launch/interleaved.py [--rounds 40] [--n 1 4 16 64] [--bin build/bin]
                              [--before OTHER/bin] [--rows dlaunch,mpi-none,no-pty,bare,hydra,mpirun]
                              [--extra 'NAME=DLAUNCH OPTIONS' ...]
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run_once(argv):
    """(wall ms, CPU ms) of one run, or None if it failed or ran past 60 s
    (mpirun -n 64 was seen to hang on this 2-core machine). The CPU time is
    the run's and every descendant's it waited for (wait4's rusage: the
    launcher's, its agents' and the ranks'), steadier than the wall time on
    a noisy machine."""
    # Not subprocess.run(timeout=...): with a timeout, Popen.wait polls with
    # sleeps of up to 50 ms, which quantized every time to 16/32/64 ms. A
    # timer kills the run instead and wait4 blocks.
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killer = threading.Timer(60, p.kill)
    killer.start()
    _, status, ru = os.wait4(p.pid, 0)
    dt = (time.perf_counter() - t) * 1000
    p.returncode = 0  # reaped here: keep Popen from trying again
    killer.cancel()
    ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    return (dt, (ru.ru_utime + ru.ru_stime) * 1000) if ok else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--n", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "..", "build", "bin"))
    ap.add_argument("--before", help="another build's bin dir: row dlaunch-before")
    ap.add_argument("--rows", default="dlaunch,mpi-none,hydra")
    ap.add_argument("--extra", action="append", default=[], metavar="NAME=OPTIONS",
                    help="one more dlaunch row with these options, e.g. 'pmi=--mpi pmi' (repeatable)")
    a = ap.parse_args()
    work = tempfile.mkdtemp()
    try:
        floor = os.path.join(work, "floor")
        subprocess.run(["cc", "-O2", "-o", floor, os.path.join(HERE, "floor.c")], check=True)
        os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        wanted = a.rows.split(",")
        rows = {"floor": lambda n: [floor, str(n), "/bin/true"]}
        if "dlaunch" in wanted:
            rows["dlaunch"] = lambda n: [os.path.join(a.bin, "dlaunch"), "-n", str(n), "/bin/true"]
        if a.before:
            rows["dlaunch-before"] = lambda n: [os.path.join(a.before, "dlaunch"), "-n", str(n), "/bin/true"]
        if "mpi-none" in wanted:
            rows["dlaunch --mpi none"] = lambda n: [os.path.join(a.bin, "dlaunch"), "--mpi", "none", "-n", str(n), "/bin/true"]
        if "no-pty" in wanted:
            rows["dlaunch --no-output-pty"] = lambda n: [os.path.join(a.bin, "dlaunch"), "--no-output-pty", "-n", str(n), "/bin/true"]
        if "bare" in wanted:
            rows["dlaunch bare"] = lambda n: [os.path.join(a.bin, "dlaunch"), "--mpi", "none", "--no-output-pty", "-n", str(n), "/bin/true"]
        for x in a.extra:
            name, _, opts = x.partition("=")
            rows["dlaunch " + name] = (lambda o: lambda n: [os.path.join(a.bin, "dlaunch"), *o, "-n", str(n), "/bin/true"])(opts.split())
        if "hydra" in wanted and shutil.which("mpiexec.hydra"):
            rows["mpiexec.hydra"] = lambda n: ["mpiexec.hydra", "-n", str(n), "/bin/true"]
        if "mpirun" in wanted and shutil.which("mpirun"):
            rows["mpirun"] = lambda n: ["mpirun", "--oversubscribe", "-n", str(n), "/bin/true"]
        times = {(name, n): [] for name in rows for n in a.n}
        cpu = {(name, n): [] for name in rows for n in a.n}
        per_round = {n: [] for n in a.n}  # each round's {row: wall ms}, for the paired ratios
        failed = set()
        for n in a.n:
            for name, cmd in rows.items():  # warm-up; a row that fails it is left out at this N
                if run_once(cmd(n)) is None:
                    failed.add((name, n))
            for _ in range(a.rounds):
                order = [(name, cmd) for name, cmd in rows.items() if (name, n) not in failed]
                random.shuffle(order)
                this_round = {}
                for name, cmd in order:
                    got = run_once(cmd(n))
                    if got is None:
                        failed.add((name, n))
                    else:
                        times[(name, n)].append(got[0])
                        cpu[(name, n)].append(got[1])
                        this_round[name] = got[0]
                per_round[n].append(this_round)
        load = open("/proc/loadavg").read().split()[0]
        print("median wall ms, %d interleaved rounds (x = ratio to the floor); load %s" % (a.rounds, load))
        print("%-22s" % "launcher" + "".join("%20s" % ("N=%d" % n) for n in a.n))
        def table(samples):
            for name in rows:
                cells = []
                for n in a.n:
                    if (name, n) in failed or not samples[(name, n)]:
                        cells.append("failed")
                        continue
                    m, f = statistics.median(samples[(name, n)]), statistics.median(samples[("floor", n)])
                    cells.append("%8.2f (%5.2fx)" % (m, m / f))
                print("%-22s" % name + "".join("%20s" % c for c in cells))

        table(times)
        print("median CPU ms of the run and its descendants (x = ratio to the floor)")
        table(cpu)
        if "dlaunch" in rows and "mpiexec.hydra" in rows and not any(
                (r, n) in failed for r in ("dlaunch", "mpiexec.hydra") for n in a.n):
            print("%-22s" % "dlaunch / hydra" + "".join(
                "%20.2f" % (statistics.median(times[("dlaunch", n)]) / statistics.median(times[("mpiexec.hydra", n)]))
                for n in a.n))
        print("paired wall ratio to the floor: median over rounds [95% interval of that median]")
        rng = random.Random(1)
        for name in rows:
            if name == "floor":
                continue
            cells = []
            for n in a.n:
                ratios = [r[name] / r["floor"] for r in per_round[n] if name in r and "floor" in r]
                if len(ratios) < 5:
                    cells.append("-")
                    continue
                boot = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
                cells.append("%.2f [%.2f-%.2f]" % (statistics.median(ratios), boot[50], boot[1949]))
            print("%-22s" % name + "".join("%20s" % c for c in cells))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
