#!/usr/bin/env python3
"""Where a local job's time goes: runs `dlaunch -n N PROGRAM` under strace
(seccomp-bpf: only the syscalls named below stop the process, so the others
run at full speed) and cuts each run at the syscalls that mark its phases:

  exec+load      launcher execve -> its first getrandom (ld.so mapped and
                 relocated the libraries, static constructors ran)
  setup          -> the agent's fork (options, token, control and store
                 servers)
  agent start    the local agent, forked from dlaunch:
                 the fork -> its command line read (it waits while dlaunch
                 sets up its job); an exec'd one (DLAUNCH_LOCAL_AGENT=exec):
                 its execve -> its first connect or hello
  hello          -> the launcher receives the agent's hello (with a connect:
                 handshake, probes)
  launch msg     -> the agent has the launch message
  fork ranks     -> the last rank's fork returned in the agent
  ranks run      -> the last rank's exit_group (exec of PROGRAM, its run)
  exit report    -> the launcher sends bye (exits reported and counted)
  teardown       -> the launcher's exit_group (agent leaves, cleanup)

Usage: bench/launch/phases.py [--bin build/bin] [--runs 15] [--n 1 64] [-- dlaunch options]
Prints the median of each phase in ms, and the median total (strace's own
cost included: read totals from bench/launch/run.sh, phases from here).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

TRACED = "execve,clone,clone3,vfork,connect,sendto,sendmsg,writev,recvfrom,exit_group,getrandom,read"
LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")


def parse(path):
    events = []  # (pid, t, call, text)
    unfinished = {}
    for raw in open(path, errors="replace"):
        m = LINE.match(raw.rstrip("\n"))
        if not m:
            continue
        pid, t, rest = int(m.group(1)), float(m.group(2)), m.group(3)
        if rest.startswith("<... "):
            name = rest[5:].split(" ", 1)[0]
            head = unfinished.pop(pid, name + "(")
            rest = head + " " + rest.split("resumed>", 1)[-1]
            # the time a call returned is what matters for recv/connect
        elif rest.endswith("<unfinished ...>"):
            unfinished[pid] = rest[: -len("<unfinished ...>")]
            if not rest.startswith(("clone", "execve", "exit_group", "sendto", "sendmsg", "writev")):
                continue
        call = rest.split("(", 1)[0]
        events.append((pid, t, call, rest))
    return events


def phases(events, n):
    if not events:
        return None
    launcher = events[0][0]
    t0 = events[0][1]

    def first(pred, after=0.0):
        for e in events:
            if e[1] >= after and pred(e):
                return e
        return None

    def last(pred):
        out = None
        for e in events:
            if pred(e):
                out = e
        return out

    loaded = first(lambda e: e[0] == launcher and e[2] == "getrandom")
    forked = first(lambda e: e[0] == launcher and e[2] in ("clone", "clone3", "vfork") and "CLONE_THREAD" not in e[3]
                   and re.search(r"= \d+$", e[3]))
    if not forked:
        return None
    agent_exec = first(lambda e: e[2] == "execve" and "dlaunch-agent" in e[3])
    if agent_exec:
        # An exec'd agent (DLAUNCH_LOCAL_AGENT=exec): it starts at its exec
        # and is ready at its first connect or read.
        agent = agent_exec[0]
        a_conn = first(lambda e: e[0] == agent and (e[2] in ("connect", "recvfrom") or
                                                    (e[2] in ("sendto", "sendmsg") and '\\"hello\\"' in e[3])),
                       agent_exec[1])
    else:
        # The local agent forked from dlaunch: it starts at
        # the fork and waits for its command line while dlaunch sets up its job.
        agent = int(re.search(r"= (\d+)$", forked[3]).group(1))
        agent_exec = forked
        a_conn = first(lambda e: e[0] == agent and e[2] == "read" and "--control-fd" in e[3], forked[1])
    hello = first(lambda e: e[0] == launcher and e[2] == "recvfrom" and '\\"hello\\"' in e[3])
    launch_sent = first(lambda e: e[0] == launcher and e[2] in ("sendto", "sendmsg", "writev") and '\\"env\\"' in e[3])
    launch_got = first(lambda e: e[0] == agent and e[2] == "recvfrom" and '\\"env\\"' in e[3])
    # The agent's threads (ranks are cloned from its spawn threads too).
    agent_tids = {agent}
    for e in events:
        if e[0] in agent_tids and e[2] in ("clone", "clone3") and "CLONE_THREAD" in e[3]:
            m = re.search(r"= (\d+)$", e[3])
            if m:
                agent_tids.add(int(m.group(1)))
    rank_forks = [e for e in events if e[0] in agent_tids and e[2] in ("clone", "clone3", "vfork") and
                  "CLONE_THREAD" not in e[3] and re.search(r"= \d+$", e[3]) and e[1] >= launch_got[1]]
    rank_pids = {int(re.search(r"= (\d+)$", e[3]).group(1)) for e in rank_forks}
    rank_exits = [e for e in events if e[0] in rank_pids and e[2] == "exit_group"]
    bye = first(lambda e: e[0] == launcher and e[2] in ("sendto", "sendmsg", "writev") and '\\"bye\\"' in e[3])
    end = last(lambda e: e[0] == launcher and e[2] == "exit_group")
    if not all([loaded, forked, a_conn, hello, launch_sent, launch_got, bye, end]) or len(rank_forks) < n or not rank_exits:
        return None
    marks = [
        ("exec+load", t0, loaded[1]),
        ("setup", loaded[1], forked[1]),
        ("agent start (fork/exec -> ready)", agent_exec[1], a_conn[1]),
        ("hello", a_conn[1], hello[1]),
        ("launch msg", hello[1], launch_got[1]),
        ("fork ranks", launch_got[1], rank_forks[-1][1]),
        ("ranks run", rank_forks[-1][1], max(e[1] for e in rank_exits)),
        ("exit report", max(e[1] for e in rank_exits), bye[1]),
        ("teardown", bye[1], end[1]),
        ("total", t0, end[1]),
    ]
    out = {k: (b - a) * 1000 for k, a, b in marks}
    if agent_exec is not forked:
        out["(launcher waits for agent exec)"] = (agent_exec[1] - forked[1]) * 1000
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "../../build/bin"))
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--n", type=int, nargs="+", default=[1, 64])
    ap.add_argument("--program", default="/bin/true")
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    results = {}
    for n in a.n:
        rows = []
        for _ in range(a.runs):
            with tempfile.NamedTemporaryFile(suffix=".strace") as f:
                cmd = ["strace", "--seccomp-bpf", "-f", "-ttt", "-s", "48", "-e", "trace=" + TRACED, "-o", f.name,
                       os.path.join(a.bin, "dlaunch")] + a.extra + ["-n", str(n), a.program]
                subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               check=True)
                p = phases(parse(f.name), n)
                if p:
                    rows.append(p)
        if not rows:
            print(f"N={n}: no run could be parsed", file=sys.stderr)
            continue
        results[n] = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        results[n]["runs"] = len(rows)
    keys = list(next(iter(results.values())).keys())
    print(f"{'phase (median ms)':<34}" + "".join(f"{'N=' + str(n):>10}" for n in results))
    for k in keys:
        print(f"{k:<34}" + "".join(f"{results[n][k]:>10.2f}" if k != "runs" else f"{results[n][k]:>10d}"
                                   for n in results))


if __name__ == "__main__":
    main()
