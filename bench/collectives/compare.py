#!/usr/bin/env python3
"""dlaunch bench vs OpenMPI (plain and with glibc's mmap threshold pinned) vs
torch gloo, on one host: all_reduce / all_gather / broadcast, float32, the
same sizes, printed side by side with busbw ratios (dlaunch / anchor) and
8-byte latency ratios. Until `dlaunch -n N dlaunch bench` exists, the
dlaunch numbers come from build*/bin/dlcoll-bench, which forks N ranks that
join through env:// exactly as under dlaunch.

  bench/collectives/compare.py --build build-coll --ranks 2 4 --ops all_reduce
"""
import argparse, json, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0}


def lines(cmd, **kw):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, **kw)
    if out.returncode != 0:
        sys.stderr.write(f"warning: {' '.join(cmd[:6])}... exited {out.returncode}: {out.stderr[-800:]}\n")
    return out.stdout


def ours(build, op, n, lo, hi, f):
    out = lines([os.path.join(build, "bin", "dlcoll-bench"), "-n", str(n), "--op", op, "-b", str(lo), "-e", str(hi),
                 "-f", str(f), "--iters", "10", "--warmup", "2", "--json"])
    doc = json.loads(out[out.index("{"):])
    if doc["wrong"]:
        sys.stderr.write(f"error: dlaunch bench found {doc['wrong']} wrong elements\n")
    return {r["size"]: r["out_of_place"]["time_us"] for r in doc["rows"]}


def mpi(exe, op, n, lo, hi, f, tuned):
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n)]
    if tuned:
        cmd += ["-x", "MALLOC_MMAP_MAX_=0", "-x", "MALLOC_TRIM_THRESHOLD_=4294967296"]
    out = lines(cmd + [exe, op, str(lo), str(hi), str(f)])
    return {d["size"]: d["time_us"] for d in map(json.loads, filter(None, out.splitlines()))}


def gloo(op, n, lo, hi, f):
    out = lines(["/usr/bin/python3", os.path.join(HERE, "gloo_bench.py"), op, str(lo), str(hi), str(f), str(n)])
    return {d["size"]: d["time_us"] for d in map(json.loads, (l for l in out.splitlines() if l.startswith("{")))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build-coll")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--ops", nargs="+", default=["all_reduce", "all_gather", "broadcast"])
    ap.add_argument("-b", type=int, default=8)
    ap.add_argument("-e", type=int, default=256 << 20)
    ap.add_argument("-f", type=int, default=8)
    ap.add_argument("--no-gloo", action="store_true")
    a = ap.parse_args()
    exe = os.path.join(tempfile.mkdtemp(), "mpi_bench")
    subprocess.run(["mpicc", "-O2", "-o", exe, os.path.join(HERE, "mpi_bench.c")], check=True)
    for op in a.ops:
        for n in a.ranks:
            cols = {"dlaunch": ours(a.build, op, n, a.b, a.e, a.f),
                    "ompi": mpi(exe, op, n, a.b, a.e, a.f, False),
                    "ompi-tuned": mpi(exe, op, n, a.b, a.e, a.f, True)}
            if not a.no_gloo:
                cols["gloo"] = gloo(op, n, a.b, a.e, a.f)
            fac = FACTOR[op](n)
            names = list(cols)
            print(f"\n## {op}, {n} ranks, float32, one host: busbw GB/s (time us below 64 KiB); ratio = dlaunch / anchor")
            print(f"{'size':>11} " + " ".join(f"{c:>18}" for c in names) + " " +
                  " ".join(f"{'x ' + c:>14}" for c in names[1:]))
            for size in sorted(cols["dlaunch"]):
                cells, vals = [], {}
                for c in names:
                    t = cols[c].get(size)
                    if t is None:
                        cells.append(f"{'-':>18}")
                        continue
                    bw = size / t / 1e3 * fac
                    vals[c] = (t, bw)
                    cells.append(f"{bw:8.3f} {t:9.1f}us")
                ratios = []
                for c in names[1:]:
                    if c in vals and "dlaunch" in vals:
                        small = size < 65536
                        r = vals[c][0] / vals["dlaunch"][0] if small else vals["dlaunch"][1] / max(vals[c][1], 1e-12)
                        ratios.append(f"{r:13.2f}{'t' if small else 'b'}")
                    else:
                        ratios.append(f"{'-':>14}")
                print(f"{size:>11} " + " ".join(cells) + " " + " ".join(ratios))
    print("\nratios: 'b' = busbw(dlaunch)/busbw(anchor), 't' = time(anchor)/time(dlaunch); > 1 means dlaunch is faster")


if __name__ == "__main__":
    main()
