#!/usr/bin/python3
"""A small, deterministic gloo DDP training run for the launcher tests.

Started by any launcher that sets torch's env:// variables (dlaunch, torchrun):
RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT. With --pmi it reads the rank and
world size the way Intel's oneCCL examples do, from PMI_RANK and PMI_SIZE,
and meets through tcp://MASTER_ADDR:MASTER_PORT instead of env://.

Every rank builds the same model from one seed, trains on its shard of one
seeded data set (samples rank, rank + W, ...), and prints one line:

  DDP rank=R world=W host=H source=env|pmi first_loss=L0 last_loss=L1 sha256=HEX sum=S

first/last loss are the all-reduced mean over the ranks; sha256 is over the
final parameters' bytes, so ranks that stayed in step print the same hash,
and two launchers that started the same world size print the same hash.
Extra argv words are ignored (the tests put a marker there to find us in ps).
"""
import datetime
import faulthandler
import hashlib
import os
import socket
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 30
SAMPLES = 512
FEATURES = 8
WATCHDOG_S = float(os.environ.get("DDP_TRAIN_WATCHDOG_S", "150"))


def say(line):
    # One write per line: under torchrun every rank shares one stdout, and
    # print() with an unbuffered stdout writes the text and its newline in
    # two writes, between which another rank's line can land.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def init():
    timeout = datetime.timedelta(seconds=60)
    if "--pmi" in sys.argv:
        # As under Intel MPI's launcher: no torchrun variables to fall back on.
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
            os.environ.pop(name, None)
        rank, world = int(os.environ["PMI_RANK"]), int(os.environ["PMI_SIZE"])
        url = "tcp://%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"])
        dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world, timeout=timeout)
    else:
        dist.init_process_group("gloo", init_method="env://", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def data(rank, world):
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    w_true = torch.randn(FEATURES, 1, generator=g)
    y = torch.tanh(x @ w_true) + 0.05 * torch.randn(SAMPLES, 1, generator=g)
    return x[rank::world], y[rank::world]


def mean_over_ranks(value, world):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return t.item() / world


def main():
    # A rank stuck anywhere (a peer that never comes, a hang at shutdown)
    # prints every thread's Python stack and exits 1 instead of hanging.
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    torch.set_num_threads(1)  # deterministic CPU math, and W processes on few cores
    rank, world = init()
    # What the launcher told torch about itself (the torchrun contract's tests read this line).
    say("ENV rank=%d torchelastic=%d omp=%s" % (rank, dist.is_torchelastic_launched(),
                                                 os.environ.get("OMP_NUM_THREADS", "unset")))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    x, y = data(rank, world)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first, last = mean_over_ranks(losses[0], world), mean_over_ranks(losses[-1], world)
    h = hashlib.sha256()
    total = 0.0
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
        total += p.detach().double().sum().item()
    source = "pmi" if "--pmi" in sys.argv else "env"
    say("DDP rank=%d world=%d host=%s source=%s first_loss=%.6f last_loss=%.6f sha256=%s sum=%.9f"
        % (rank, world, socket.gethostname(), source, first, last, h.hexdigest(), total))
    dist.barrier()
    say("DDP rank=%d barrier passed" % rank)
    dist.destroy_process_group()
    say("DDP rank=%d done" % rank)
    # torch 1.13 (Debian's) sometimes hangs here, after the group is gone, in
    # the C++ destructors of DDP's reducer and gloo's threads while the
    # interpreter unwinds (a stack dump shows only the module frame and a
    # gloo thread); seen under dlaunch and by hand, one run in five under
    # heavy load. Everything this test checks has been printed by now, so
    # leave without running those destructors.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
