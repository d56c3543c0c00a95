#!/usr/bin/env python3
"""A GPU job that hangs the way real ones do: every rank but the last enters
all_reduce on a CUDA tensor; the last rank sleeps in `load_batch` instead.
Run under `dlaunch --timeout S`: dlaunch's report must name the sleeper and
group the others in all_reduce. Uses gloo (two ranks may share one GPU)."""
import os
import time

import torch
import torch.distributed as dist


def load_batch():
    time.sleep(600)


def train_step(x):
    dist.all_reduce(x)


def main():
    dev = int(os.environ.get("DLAUNCH_GPUS", "0").split(",")[0])
    torch.cuda.set_device(dev)
    dist.init_process_group("gloo")
    x = torch.ones(1024, device="cuda")
    print("rank %s ready on cuda:%d" % (os.environ["RANK"], dev), flush=True)
    if dist.get_rank() == dist.get_world_size() - 1:
        load_batch()
    train_step(x)


if __name__ == "__main__":
    main()
