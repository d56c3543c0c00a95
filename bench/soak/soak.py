#!/usr/bin/env python3
"""The soak (docs/benchmarks.md, "Soak"): N real launches of mixed sizes, each
checked, none may hang, nothing may be left.

Each launch is a function of (seed, index) alone, so `--replay S:I` reruns one.
A launch is either local (`dlaunch -n R`, R = 1..64 forked ranks) or simulated
multi-host (`--launcher sim`: one real dlaunch-agent per host on this
machine, H = 2..32 hosts x R ranks, flat or through the launch tree with
--fanout 4). Every rank prints numbered lines; in some launches one rank
exits 3 on purpose. Checked per launch: the exit code (0, or 3 with the
verdict line naming that rank), every rank's lines whole and in order (all
of them where the job succeeds), and the launch ending within --bound
(else it is a hang: killed, its replay command printed). Run as root, each
launch gets a private /tmp and /dev/shm (bind mounts in a mount namespace
of its own) that must be empty after it; every --check-every launches and
at the end no process of the soak may be left (each carries SOAK_RUN in its
environment).
Last line: soak launches=N hangs=H wrong=W leftovers=L seed=S
"""
import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

LOCAL_SIZES = [1, 2, 4, 8, 16, 32, 64]
SIM_SIZES = [(2, 4), (4, 4), (8, 2), (8, 4), (16, 2), (16, 4), (32, 1), (32, 4)]
PAD = "x" * 60  # a spliced line loses its tail or gains another's
FAIL_CODE = 3


def make_launch(seed, index):
    """(kind, hosts, ranks_per_host, fanout, lines, failing_rank or -1)."""
    rng = random.Random(f"{seed}:{index}")
    if rng.random() < 0.6:
        hosts, per_host, fanout, kind = 1, rng.choice(LOCAL_SIZES), 0, "local"
    else:
        hosts, per_host = rng.choice(SIM_SIZES)
        fanout = 4 if hosts >= 8 and rng.random() < 0.5 else 0
        kind = "sim"
    lines = rng.choice([1, 5, 20])
    ranks = hosts * per_host
    failing = rng.randrange(ranks) if rng.random() < 0.15 else -1
    return kind, hosts, per_host, fanout, lines, failing


def size_name(launch):
    kind, hosts, per_host, fanout, _, _ = launch
    if kind == "local":
        return f"local {per_host}"
    return f"sim {hosts}x{per_host}" + (" tree" if fanout else "")


def command(bindir, launch, mark):
    kind, hosts, per_host, fanout, lines, failing = launch
    argv = [f"{bindir}/dlaunch", "--mpi", "none", "--kill-grace", "2"]
    if kind == "local":
        argv += ["-n", str(per_host)]
    else:
        argv += ["--launcher", "sim", "--fanout", str(fanout), "--gpus-per-node", "0",
                 "-H", ",".join(f"sim{h}:{per_host}" for h in range(hosts))]
    script = ('i=0; while [ $i -lt $0 ]; do echo "soak $RANK $i $1 ' + PAD + '"; i=$((i+1)); done; '
              f'[ "$RANK" = "$2" ] && exit {FAIL_CODE}; exit 0')
    return argv + ["sh", "-c", script, str(lines), mark, str(failing)]


def check_output(out, err, code, launch, mark):
    """'' when the launch ended as it must, else what is wrong."""
    _, hosts, per_host, _, lines, failing = launch
    want = FAIL_CODE if failing >= 0 else 0
    if code != want:
        return f"exit {code}, expected {want}"
    if failing >= 0 and not re.search(rf"rank {failing} on \S+ \(pid \d+\) exited with code {FAIL_CODE}", err):
        return f"no verdict naming rank {failing} and code {FAIL_CODE}"
    line_re = re.compile(rf"^soak (\d+) (\d+) {re.escape(mark)} {PAD}$")
    seen = {}
    for l in out.splitlines():
        if mark not in l:
            continue
        m = line_re.match(l)
        if not m:
            return f"a spliced line: {l!r}"
        r, i = int(m.group(1)), int(m.group(2))
        if i != len(seen.setdefault(r, [])):
            return f"rank {r}: line {len(seen[r])} is number {i} (lost or repeated lines)"
        seen[r].append(i)
    # A failing launch's other ranks are stopped midway: their lines so far count.
    for r in range(hosts * per_host):
        n = len(seen.get(r, []))
        if (failing < 0 or r == failing) and n != lines:
            return f"rank {r} printed {n} of {lines} lines"
    return ""


def is_root():
    return os.geteuid() == 0 and shutil.which("unshare") is not None


def run_one(bindir, launch, mark, run_id, index, private, bound):
    """(seconds, code or None when it hung, out, err)."""
    env = dict(os.environ, SOAK_RUN=run_id, SOAK_LAUNCH=str(index))
    argv = command(bindir, launch, mark)
    if launch[0] == "sim":
        env["DLAUNCH_SIM"] = "1"
    tmp, shm = f"{private}/tmp", f"{private}/shm"
    if is_root():
        # A mount namespace of its own whose /tmp and /dev/shm are ours to check.
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                'mount --bind "$1" /dev/shm && mount --bind "$0" /tmp && shift && exec "$@"', tmp, shm] + argv
    else:
        env["TMPDIR"] = tmp
    start = time.monotonic()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = p.communicate(timeout=bound)
        code = p.returncode
    except subprocess.TimeoutExpired:
        # Its session, then whatever of it left the session (it holds our pipes).
        os.killpg(p.pid, signal.SIGKILL)
        left_processes(run_id, kill=True)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            out, err = b"", b"(its output pipes stayed open after it was killed)"
        code = None
    return time.monotonic() - start, code, out.decode(errors="replace"), err.decode(errors="replace")


def left_processes(run_id, kill):
    """'PID LAUNCH ARGS' of every process whose environment holds SOAK_RUN=run_id."""
    found = []
    key = f"SOAK_RUN={run_id}".encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            if key not in env:
                continue
            launch = next((e[12:].decode() for e in env if e.startswith(b"SOAK_LAUNCH=")), "?")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
        except OSError:
            continue
        found.append(f"{pid} launch {launch}: {args}")
        if kill:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
    return found


def left_entries(private):
    out = []
    for d in ("tmp", "shm"):
        for e in os.listdir(f"{private}/{d}"):
            out.append(f"{'/tmp' if d == 'tmp' else '/dev/shm'}/{e}")
            p = f"{private}/{d}/{e}"
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else os.unlink(p)
    return out


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser(prog="bench/soak/run.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--launches", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--replay", metavar="S:I", help="rerun launch I of seed S alone")
    ap.add_argument("--bound", type=float, default=60, help="seconds a launch may take before it counts as a hang")
    ap.add_argument("--check-every", type=int, default=500, help="launches between checks for processes left")
    ap.add_argument("--bin", default=os.environ.get("DLAUNCH_BIN", ""))
    a = ap.parse_args()
    if a.launches < 1 or a.bound <= 0 or a.check_every < 1:
        ap.error("--launches, --bound and --check-every must be positive")
    indices = range(a.launches)
    if a.replay:
        m = re.fullmatch(r"(\d+):(\d+)", a.replay)
        if not m:
            ap.error(f"--replay wants SEED:INDEX, got {a.replay!r}")
        a.seed, indices = int(m.group(1)), [int(m.group(2))]
    bindir = os.path.abspath(a.bin or os.path.join(os.path.dirname(__file__), "../../build/bin"))
    for b in ("dlaunch", "dlaunch-agent"):
        if not os.access(f"{bindir}/{b}", os.X_OK):
            sys.exit(f"bench/soak: no {bindir}/{b}: build dlaunch and dlaunch-agent first (or set DLAUNCH_BIN)")
    private = tempfile.mkdtemp(prefix="dlaunch-soak-")
    os.makedirs(f"{private}/tmp"), os.makedirs(f"{private}/shm")
    os.chmod(f"{private}/tmp", 0o1777)
    if not is_root():
        print("bench/soak: not root: no private /dev/shm per launch, $TMPDIR only", file=sys.stderr)
    run_id = f"{os.getpid()}-{a.seed}"
    times, hangs, wrong, leftovers = {}, 0, 0, 0
    began = time.monotonic()

    def check_left(after):
        nonlocal leftovers
        left = left_processes(run_id, kill=True)
        if left:
            leftovers += len(left)
            print(f"leftovers after launch {after}: {len(left)} processes\n  " + "\n  ".join(left), flush=True)

    try:
        for n, i in enumerate(indices, 1):
            launch = make_launch(a.seed, i)
            mark = f"soak-{a.seed}-{i}-{os.getpid()}"
            took, code, out, err = run_one(bindir, launch, mark, run_id, i, private, a.bound)
            times.setdefault(size_name(launch), []).append(took)
            replay = f"bench/soak/run.sh --replay {a.seed}:{i}"
            if code is None:
                hangs += 1
                print(f"hang: launch {i} ({size_name(launch)}) ran past {a.bound:g} s; replay: {replay}\n"
                      f"--- its stderr:\n{err[-3000:]}---", flush=True)
                check_left(i)
            elif why := check_output(out, err, code, launch, mark):
                wrong += 1
                print(f"wrong: launch {i} ({size_name(launch)}): {why}; replay: {replay}\n"
                      f"--- its stderr:\n{err[-3000:]}---", flush=True)
            entries = left_entries(private)  # a hang's are what our SIGKILL left: not counted
            if entries and code is not None:
                leftovers += len(entries)
                print(f"leftovers of launch {i} ({size_name(launch)}): {' '.join(entries)}; replay: {replay}", flush=True)
            if n % a.check_every == 0:
                check_left(i)
                print(f"soak: {n} launches in {time.monotonic() - began:.0f} s, hangs={hangs} wrong={wrong} "
                      f"leftovers={leftovers}", flush=True)
        time.sleep(0.5)  # what a launch's exit leaves ending (an agent's last write) has ended
        check_left("the last")
    finally:
        shutil.rmtree(private, ignore_errors=True)
    print(f"{'size':<16} {'launches':>8} {'median_s':>9} {'p99_s':>8}")
    order = [f"local {r}" for r in LOCAL_SIZES] + [f"sim {h}x{r}{t}" for h, r in SIM_SIZES for t in ("", " tree")]
    for name in sorted(times, key=lambda s: order.index(s) if s in order else len(order)):
        xs = times[name]
        print(f"{name:<16} {len(xs):>8} {percentile(xs, 0.5):>9.3f} {percentile(xs, 0.99):>8.3f}")
    print(f"soak launches={len(indices)} hangs={hangs} wrong={wrong} leftovers={leftovers} seed={a.seed}")
    return 0 if hangs == wrong == leftovers == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
