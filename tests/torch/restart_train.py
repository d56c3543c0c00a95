#!/usr/bin/python3
"""A gloo DDP training run that checkpoints every step and resumes from it:
the --max-restarts tests' job (tests/torch/restart_test.cc).

    restart_train.py CKPT_DIR [--fail-rank R --fail-step S] [MARKER]

Every rank appends "RUN rank=R restart=N master_port=P leftover=L" to
CKPT_DIR/runs.R when it starts (N is TORCHELASTIC_RESTART_COUNT; L says
whether a key the rank set in the store on MASTER_PORT on an earlier attempt
is still there, "na" unless dlaunch serves that store), loads CKPT_DIR/ckpt.pt if there is one
(model, optimizer and the last finished step) and trains the remaining
steps. After each step rank 0 writes the checkpoint (to a temporary file,
then renamed), and a barrier makes sure every rank knows it was written. On
the first attempt (restart count 0), with --fail-rank, rank R leaves with
os._exit(1) right after step S's checkpoint: the launcher must restart the
job, which then resumes at step S + 1. At the end every rank prints

  FINAL rank=R restart=N resumed_from=K sha256=HEX

where sha256 covers the final parameters' bytes: a run that was interrupted
and resumed must print the same hash as one that never was (with two
ranks, whose gradient sum does not depend on the order gloo adds them in;
see restart_test.cc). Extra argv
words are ignored (the tests put a marker there to find us in ps).
"""
import datetime
import faulthandler
import hashlib
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 12
SAMPLES = 256
FEATURES = 8


def arg(name):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else None


def leftover(rank, restart):
    """With the store dlaunch serves: whether this rank's key of an earlier
    attempt is still there ("yes" or "no"), leaving one for the next."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return "na"
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), None, False,
                          datetime.timedelta(seconds=60), wait_for_workers=False)
    # torch 1.13's Python TCPStore has no check(): the count says it.
    return "yes" if store.add("leftover/%d" % rank, 1) > 1 else "no"


def main():
    faulthandler.dump_traceback_later(float(os.environ.get("DDP_TRAIN_WATCHDOG_S", "150")), exit=True)
    torch.set_num_threads(1)
    ckpt_dir = sys.argv[1]
    restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    # dlaunch says it twice (torchrun only the first way): both must agree.
    assert os.environ.get("DLAUNCH_RESTART_COUNT", str(restart)) == str(restart)
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    with open(os.path.join(ckpt_dir, "runs.%d" % rank), "a") as f:
        f.write("RUN rank=%d restart=%d master_port=%s leftover=%s\n" %
                (rank, restart, os.environ["MASTER_PORT"], leftover(rank, restart)))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    path = os.path.join(ckpt_dir, "ckpt.pt")
    start = 0
    if os.path.exists(path):
        state = torch.load(path)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"] + 1
    ddp = DDP(model)
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    y = torch.tanh(x @ torch.randn(FEATURES, 1, generator=g))
    x, y = x[rank::world], y[rank::world]
    fail_rank, fail_step = arg("--fail-rank"), arg("--fail-step")
    for step in range(start, STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        if rank == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, path + ".tmp")
            os.replace(path + ".tmp", path)
        dist.barrier()
        if restart == 0 and rank == fail_rank and step == fail_step:
            print("rank %d fails after step %d" % (rank, step), flush=True)
            os._exit(1)
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    print("FINAL rank=%d restart=%d resumed_from=%d sha256=%s" % (rank, restart, start, h.hexdigest()), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # torch 1.13's destructors may hang at exit (see ddp_train.py)


if __name__ == "__main__":
    main()
