#!/usr/bin/env python3
"""dlaunch bench vs OpenMPI vs torch gloo: all_reduce / all_gather / broadcast
on float32, the same sizes, printed side by side with ratios.

One host (default): N local ranks. dlaunch's numbers come from
build/bin/dlcoll-bench, which forks N ranks that join through env:// exactly
as under `dlaunch -n N dlaunch bench`, and binds rank r to CPU r as mpirun
does by default (column `dlaunch`; `--unbound` adds `dlaunch-nobind`).
OpenMPI runs mpi_bench.c under mpirun, plain (`ompi`) and with glibc's mmap
threshold pinned (`ompi-tuned`: -x MALLOC_MMAP_MAX_=0 -x
MALLOC_TRIM_THRESHOLD_=4294967296, which stops a fresh mmap+page-fault of
OpenMPI's message-sized temporary on every call above 32 MiB).

Two hosts (--hosts 2): a namespace cluster (tests/cluster/cluster.sh, needs
root), one rank per host, everything launched inside h0 over the cluster's
sshds: `dlaunch -n 2 --npernode 1 ... dlaunch bench`, `mpirun --host A,B
--mca plm_rsh_args "-F <ssh_config>" --bind-to none --mca pml ob1 --mca btl
tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0`
(--bind-to none: by default each host's orted binds its rank to "its" core 0,
the same CPU for both namespace hosts), and gloo started by dlaunch
(GLOO_SOCKET_IFNAME=eth0). Two limits are measured per op, interleaved with
the runs: one TCP stream h0 -> h1 (`1stream`, the bound for broadcast) and
two streams at once, h0 -> h1 and h1 -> h0, per direction (`2way`, the bound
for all_reduce and all_gather, which send both ways at once); the table adds
busbw(dlaunch) as a percentage of each.

Every configuration runs --repeat times, interleaved; the table shows the
median time per size. Ratios: busbw(dlaunch) / busbw(anchor) from 64 KiB up
('b'), time(anchor) / time(dlaunch) below ('t'); > 1 means dlaunch is faster.

  bench/collectives/compare.py --build build-coll --ranks 2 4 --repeat 3
  bench/collectives/compare.py --build build-coll --hosts 2 --repeat 3
"""
import argparse, json, os, shlex, statistics, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0}
SIZES = [8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20]
MALLOC = ["-x", "MALLOC_MMAP_MAX_=0", "-x", "MALLOC_TRIM_THRESHOLD_=4294967296"]


def run(cmd, timeout=1800):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        sys.stderr.write(f"warning: {' '.join(cmd)[:300]} exited {out.returncode}: {out.stderr[-1500:]}\n")
    return out.stdout


def iters_for(size):
    # As mpi_bench.c: 200 below 1 MiB, 20 below 64 MiB, 5 from there.
    return 5 if size >= (64 << 20) else 20 if size >= (1 << 20) else 200


def json_rows(text):
    return {d["size"]: d["time_us"] for d in (json.loads(l) for l in text.splitlines() if l.startswith("{\"op\""))}


class Local:
    def __init__(self, build, n):
        self.build, self.n = build, n

    def ours(self, op, sizes, bind=True):
        res = {}
        for s in sizes:
            out = run([os.path.join(self.build, "bin", "dlcoll-bench"), "-n", str(self.n), "--bind",
                       "core" if bind else "none", "--op", op, "-b", str(s), "-e", str(s), "--iters",
                       str(iters_for(s)), "--warmup", "2", "-c", "0", "--json"])
            if "{" in out:
                for r in json.loads(out[out.index("{"):])["rows"]:
                    res[r["size"]] = r["out_of_place"]["time_us"]
        return res

    def mpi(self, exe, op, sizes, tuned):
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(self.n)] + (MALLOC if tuned else [])
        return json_rows(run(cmd + [exe, op, ",".join(map(str, sizes)) + ","]))

    def gloo(self, op, sizes):
        return json_rows(run(["/usr/bin/python3", os.path.join(HERE, "gloo_bench.py"), op,
                              ",".join(map(str, sizes)), str(self.n)]))


class Cluster:
    """Two namespace hosts; commands run inside h0."""

    def __init__(self, build, hosts):
        self.build, self.n = os.path.abspath(build), hosts
        out = run([os.path.join(SRC, "tests/cluster/cluster.sh"), "up", "--hosts", str(hosts), "--owner",
                   str(os.getpid())], timeout=120)
        env = dict(l.split("=", 1) for l in out.split() if "=" in l)
        self.id, self.dir = env["DL_CLUSTER_ID"], env["DL_CLUSTER_DIR"].rstrip("/")
        self.addrs = [l.split()[0] for l in open(self.dir + "/hostfile")]
        self.cfg = self.dir + "/ssh_config"

    def down(self):
        run([os.path.join(SRC, "tests/cluster/cluster.sh"), "down", self.id], timeout=120)

    def exec(self, cmd, host="h0", timeout=1800):
        return run([os.path.join(SRC, "tests/cluster/cluster.sh"), "exec", self.id, host, "--", "sh", "-c", cmd],
                   timeout=timeout)

    def dlaunch(self, args):
        return (f"{self.build}/bin/dlaunch -n {self.n} --npernode 1 --hostfile {self.dir}/hostfile "
                f"--ssh-config {self.cfg} {args}")

    def ours(self, op, sizes, bind=True):
        res = {}
        for s in sizes:
            out = self.exec(self.dlaunch(f"-x DLAUNCH_SOCKET_IFNAME=eth0 {self.build}/bin/dlaunch bench --op {op} "
                                         f"-b {s} -e {s} --iters {iters_for(s)} --warmup 2 -c 0 --json </dev/null"))
            if "{" in out:
                for r in json.loads(out[out.index("{"):])["rows"]:
                    res[r["size"]] = r["out_of_place"]["time_us"]
        return res

    def mpi(self, exe, op, sizes, tuned):
        # --bind-to none: by default mpirun binds each host's first rank to
        # that host's core 0, and the namespace hosts share one machine's
        # cores, so both ranks would share CPU 0 (4 ms per 8-byte all_reduce
        # instead of tens of microseconds). dlaunch does not bind either.
        # pml ob1: the TCP BTL, never UCX or an MTL that ignores --mca btl.
        mca = (f"--mca plm_rsh_args {shlex.quote('-F ' + self.cfg)} --bind-to none --mca pml ob1 "
               f"--mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0")
        cmd = (f"mpirun --allow-run-as-root -np {self.n} --host {','.join(self.addrs[:self.n])} {mca} "
               f"{' '.join(MALLOC) if tuned else ''} {exe} {op} {','.join(map(str, sizes))}, </dev/null")
        return json_rows(self.exec(cmd))

    def gloo(self, op, sizes):
        return json_rows(self.exec(self.dlaunch(
            f"-x GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 {HERE}/gloo_bench.py {op} {','.join(map(str, sizes))} env "
            "</dev/null")))

    def stream(self, seconds=3, both=False):
        """One TCP stream h0 -> h1, GB/s, measured by the receiver; with
        both=True, a second stream h1 -> h0 at the same time and the mean of
        the two directions (what all_reduce and all_gather, which send both
        ways at once, can reach per direction)."""
        script = os.path.join(tempfile.mkdtemp(), "stream.py")
        with open(script, "w") as f:
            f.write(STREAM)
        port = 20000 + os.getpid() % 20000
        ways = [("h0", "h1", 1)] + ([("h1", "h0", 0)] if both else [])
        rxs = [subprocess.Popen([os.path.join(SRC, "tests/cluster/cluster.sh"), "exec", self.id, dst, "--",
                                 "/usr/bin/python3", script, "rx", str(port + i)], stdout=subprocess.PIPE, text=True)
               for i, (_, dst, _) in enumerate(ways)]
        txs = [subprocess.Popen([os.path.join(SRC, "tests/cluster/cluster.sh"), "exec", self.id, src, "--", "sh", "-c",
                                 f"sleep 0.5; /usr/bin/python3 {script} tx {port + i} {self.addrs[to]} {seconds}"])
               for i, (src, _, to) in enumerate(ways)]
        for t in txs:
            t.wait(timeout=60)
        rates = [float(rx.communicate(timeout=60)[0].strip() or "nan") for rx in rxs]
        return statistics.mean(rates)

STREAM = r'''
import socket, sys, time
if sys.argv[1] == "rx":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", int(sys.argv[2]))); s.listen(1); c, _ = s.accept()
    buf = bytearray(4 << 20); mv = memoryview(buf); n = 0; t0 = None
    while True:
        k = c.recv_into(mv)
        if not k: break
        if t0 is None: t0 = time.perf_counter()
        n += k
    print(n / (time.perf_counter() - t0) / 1e9)
else:
    c = socket.create_connection((sys.argv[3], int(sys.argv[2])))
    buf = bytes(4 << 20); end = time.perf_counter() + float(sys.argv[4])
    while time.perf_counter() < end: c.sendall(buf)
    c.close()
'''


def table(title, cols, fac, sizes, extra="", limits=None):
    """limits: {name: GB/s}; adds columns busbw(dlaunch) / limit from 64 KiB up."""
    names, limits = list(cols), limits or {}
    print(f"\n## {title}: busbw GB/s and time; ratio = dlaunch vs anchor{extra}")
    print(f"| {'size':>9} | " + " | ".join(f"{c:>20}" for c in names) + " | " +
          " | ".join(f"{'x ' + c:>13}" for c in names[1:] if c != "dlaunch-nobind") +
          "".join(f" | {'of ' + l:>13}" for l in limits) + " |")
    print("|" + "---:|" * (1 + len(names) + len([c for c in names[1:] if c != "dlaunch-nobind"]) + len(limits)))
    for size in sizes:
        cells, vals = [], {}
        for c in names:
            t = cols[c].get(size)
            if t is None:
                cells.append(f"{'-':>20}")
                continue
            bw = size / t / 1e3 * fac
            vals[c] = (t, bw)
            cells.append(f"{bw:7.3f} {t:10.1f}us")
        ratios = []
        for c in names[1:]:
            if c == "dlaunch-nobind":
                continue
            if c in vals and "dlaunch" in vals:
                small = size < 65536
                r = vals[c][0] / vals["dlaunch"][0] if small else vals["dlaunch"][1] / max(vals[c][1], 1e-12)
                ratios.append(f"{r:12.2f}{'t' if small else 'b'}")
            else:
                ratios.append(f"{'-':>13}")
        for l, bw in limits.items():
            ok = "dlaunch" in vals and size >= 65536 and bw > 0
            ratios.append(f"{vals['dlaunch'][1] / bw * 100:11.0f}%b" if ok else f"{'-':>13}")
        label = f"{size >> 20}M" if size >= 1 << 20 else f"{size >> 10}K" if size >= 1 << 10 else str(size)
        print(f"| {label:>9} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")


def median_cols(runs):
    out = {}
    for name, samples in runs.items():
        sizes = set().union(*[s.keys() for s in samples]) if samples else set()
        out[name] = {z: statistics.median([s[z] for s in samples if z in s]) for z in sizes}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build-coll")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--hosts", type=int, default=1, help="2: one rank on each of 2 namespace hosts")
    ap.add_argument("--ops", nargs="+", default=["all_reduce", "all_gather", "broadcast"])
    ap.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-gloo", action="store_true")
    ap.add_argument("--unbound", action="store_true", help="also run dlaunch's ranks without CPU binding")
    a = ap.parse_args()
    exe = os.path.join(tempfile.mkdtemp(prefix="dlcoll-mpi-"), "mpi_bench")
    subprocess.run(["mpicc", "-O2", "-o", exe, os.path.join(HERE, "mpi_bench.c")], check=True)
    print(f"# load before: {open('/proc/loadavg').read().strip()} on {os.cpu_count()} CPUs")
    envs = [Cluster(a.build, a.hosts)] if a.hosts > 1 else [Local(a.build, n) for n in a.ranks]
    try:
        for op in a.ops:
            for env in envs:
                runs = {"dlaunch": [], "ompi": [], "ompi-tuned": []}
                if a.unbound:
                    runs["dlaunch-nobind"] = []
                if not a.no_gloo:
                    runs["gloo"] = []
                one, two = [], []
                for _ in range(a.repeat):
                    if a.hosts > 1:
                        # The limits, interleaved with the runs they bound.
                        one.append(env.stream())
                        two.append(env.stream(both=True))
                    runs["dlaunch"].append(env.ours(op, a.sizes))
                    runs["ompi"].append(env.mpi(exe, op, a.sizes, False))
                    runs["ompi-tuned"].append(env.mpi(exe, op, a.sizes, True))
                    if a.unbound:
                        runs["dlaunch-nobind"].append(env.ours(op, a.sizes, bind=False))
                    if not a.no_gloo:
                        runs["gloo"].append(env.gloo(op, a.sizes))
                limits = {}
                if a.hosts > 1:
                    limits = {"1stream": statistics.median(one), "2way": statistics.median(two)}
                    print(f"\n# {op}: one TCP stream h0 -> h1 (1stream): median {limits['1stream']:.3f} GB/s of "
                          f"{', '.join(f'{x:.3f}' for x in one)}; two streams at once, h0 -> h1 and h1 -> h0 "
                          f"(2way), per direction: median {limits['2way']:.3f} GB/s of "
                          f"{', '.join(f'{x:.3f}' for x in two)}")
                cols = median_cols(runs)
                where = f"{env.n} ranks on {env.n} namespace hosts (TCP over veth)" if a.hosts > 1 else \
                    f"{env.n} ranks, one host"
                sizes = sorted(cols["dlaunch"]) or a.sizes
                table(f"{op}, {where}, float32, median of {a.repeat}", cols, FACTOR[op](env.n), sizes,
                      limits=limits)
                sys.stdout.flush()
    finally:
        if a.hosts > 1:
            envs[0].down()
    print(f"\n# load after: {open('/proc/loadavg').read().strip()}")
    print("# ratios: 'b' = busbw(dlaunch)/busbw(anchor), 't' = time(anchor)/time(dlaunch); > 1: dlaunch faster")


if __name__ == "__main__":
    main()
