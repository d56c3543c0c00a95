#!/usr/bin/env python3
"""The job of bench/restart/host-loss.sh: a small DDP (gloo) training that
checkpoints after every step, run the same way under dlaunch and torchrun.

    ddp_ckpt.py DIR               a rank (RANK, WORLD_SIZE, MASTER_ADDR/PORT: env://)
    ddp_ckpt.py --reference       the same training in one process: the uninterrupted result

Every rank appends one line per event to DIR/stamps, each one write
(O_APPEND), so ranks on every host of the namespace cluster (one file
system) can share the file:
    pystart RANK WORLD HOST TIME   first thing, before torch is imported (the bench
                                   writes "start" before that: stamp_exec.c)
    term RANK WORLD HOST TIME      SIGTERM came (from the launcher's teardown)
    error RANK WORLD HOST TIME     a collective failed (a peer is gone)
    done RANK WORLD HOST TIME      the training ended
TIME is time.time(). Rank 0 writes DIR/ckpt.pt after each step (atomically:
a temporary file, then rename) and DIR/result at the end.

The training is a least-squares fit of a 16-input linear layer in float64,
STEPS steps of plain SGD (no optimizer state) on a global batch of 48 rows
that depends only on the step: each rank takes 48 / WORLD_SIZE of them, and
DDP's mean of the ranks' gradients is the mean over the whole batch, so a
world of 8 or of 6 ranks (after shrinking), restarted from any step's
checkpoint, computes what one process computes, up to the order of
floating-point sums. HOSTLOSS_STEPS (40), HOSTLOSS_STEP_S (0.2: the sleep
per step, so a fault lands mid-training) and HOSTLOSS_GLOO_TIMEOUT (30 s:
how long a collective waits for a peer that says nothing; torch's default is
30 minutes) change it. With HOSTLOSS_RELEASE=FILE and HOSTLOSS_HOLD_STEP=K
the ranks hold before step K (after K checkpointed steps) until FILE exists,
still talking (a broadcast every STEP_S): the bench's moment for the fault.
"""
import os
import sys
import time

T0 = time.time()
STEPS = int(os.environ.get("HOSTLOSS_STEPS", "40"))
STEP_S = float(os.environ.get("HOSTLOSS_STEP_S", "0.2"))
HOLD_STEP = int(os.environ.get("HOSTLOSS_HOLD_STEP", "-1"))
BATCH, INPUTS = 48, 16


def batch(torch, step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(BATCH, INPUTS, generator=g, dtype=torch.float64)
    w = torch.arange(1, INPUTS + 1, dtype=torch.float64) / INPUTS
    y = (x @ w).unsqueeze(1) + 0.01 * torch.randn(BATCH, 1, generator=g, dtype=torch.float64)
    return x, y


def model_of(torch):
    m = torch.nn.Linear(INPUTS, 1, dtype=torch.float64)
    with torch.no_grad():
        m.weight.zero_()
        m.bias.zero_()
    return m


def result_of(m):
    return "%.12e" % (float(m.weight.sum()) + float(m.bias.sum()))


def reference():
    import torch
    m = model_of(torch)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    for step in range(STEPS):
        x, y = batch(torch, step)
        loss = ((m(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(result_of(m))


def hold(torch, dist, rank, d, release):
    """Until the file `release` exists (rank 0 looks; a broadcast tells the
    others, so every rank keeps talking to its peers, as in training), at
    most 600 s. Rank 0 first writes DIR/holding."""
    if rank == 0:
        open(os.path.join(d, "holding"), "w").close()
    for _ in range(int(600 / max(STEP_S, 0.01))):
        flag = torch.tensor([1.0 if rank == 0 and os.path.exists(release) else 0.0])
        dist.broadcast(flag, 0)
        if flag.item():
            return
        time.sleep(STEP_S)


def rank_main(d):
    import signal
    import threading
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    host = os.uname().nodename
    path = os.path.join(d, "stamps")

    def stamp(what, t=None):
        line = "%s %d %d %s %.6f\n" % (what, rank, world, host, time.time() if t is None else t)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, line.encode())
        os.close(fd)

    stamp("pystart", T0)
    # SIGTERM is taken by a thread of its own (blocked here, before torch
    # starts threads that would inherit it unblocked): a rank whose main
    # thread waits in a collective still says at once that it was told to stop.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def on_term():
        signal.sigwait({signal.SIGTERM})
        stamp("term")
        os._exit(143)

    threading.Thread(target=on_term, daemon=True).start()

    from datetime import timedelta
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    release = os.environ.get("HOSTLOSS_RELEASE", "")
    timeout = timedelta(seconds=float(os.environ.get("HOSTLOSS_GLOO_TIMEOUT", "30")))
    m = model_of(torch)
    first = 0
    ckpt = os.path.join(d, "ckpt.pt")
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        m.load_state_dict(state["model"])
        first = state["step"]
    try:
        dist.init_process_group("gloo", timeout=timeout)
        ddp = DDP(m)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        lo, hi = rank * BATCH // world, (rank + 1) * BATCH // world
        for step in range(first, STEPS):
            if step == HOLD_STEP and release:
                hold(torch, dist, rank, d, release)
            x, y = batch(torch, step)
            loss = ((ddp(x[lo:hi]) - y[lo:hi]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0:
                tmp = "%s.tmp.%d" % (ckpt, os.getpid())
                torch.save({"model": m.state_dict(), "step": step + 1}, tmp)
                os.replace(tmp, ckpt)
            time.sleep(STEP_S)
        dist.barrier()
    except RuntimeError as e:  # gloo: a peer reset the connection or timed out
        stamp("error")
        print("rank %d on %s: %s" % (rank, host, str(e).splitlines()[0]), file=sys.stderr)
        os._exit(1)
    if rank == 0:
        with open(os.path.join(d, "result"), "w") as f:
            f.write("%s world=%d first_step=%d\n" % (result_of(m), world, first))
    stamp("done")
    dist.destroy_process_group()


if __name__ == "__main__":
    if sys.argv[1:] == ["--reference"]:
        reference()
    elif len(sys.argv) == 2:
        rank_main(sys.argv[1])
    else:
        sys.exit("usage: ddp_ckpt.py DIR | --reference")
