#!/usr/bin/env python3
"""A GPU job that fails once and is restarted (`dlaunch --max-restarts`):
each rank takes FRACTION of its GPU's memory, meets the others (nccl, or
gloo when ranks share a GPU), and on the first attempt rank 0 exits 1. The
next attempt can only take the same memory again if every process of the
first one is gone and the driver has freed its memory, which is what a
restart must guarantee on a GPU node. Each rank prints

  RESTART rank=R attempt=N held_gb=X OK

  gpu_restart.py [--backend nccl|gloo] [--fraction F]
"""
import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="nccl")
    ap.add_argument("--fraction", type=float, default=0.4)
    a = ap.parse_args()
    attempt = int(os.environ.get("DLAUNCH_RESTART_COUNT", os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
    rank = int(os.environ["RANK"])
    dev = int(os.environ.get("DLAUNCH_GPUS", os.environ["LOCAL_RANK"]).split(",")[0])
    torch.cuda.set_device(dev)
    free, total = torch.cuda.mem_get_info(dev)
    want = int(total * a.fraction)
    try:
        held = torch.empty(want, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        sys.stdout.write("RESTART rank=%d attempt=%d FAILED: cannot take %.1f GB, %.1f GB free of %.1f: "
                         "an earlier attempt still holds the GPU\n" % (rank, attempt, want / 1e9, free / 1e9, total / 1e9))
        sys.exit(1)
    dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=60))
    x = torch.ones(1024, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    if attempt == 0 and rank == 0:
        sys.stdout.write("RESTART rank=0 attempt=0 failing on purpose\n")
        sys.stdout.flush()
        os._exit(1)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.write("RESTART rank=%d attempt=%d held_gb=%.1f OK\n" % (rank, attempt, held.numel() / 1e9))


if __name__ == "__main__":
    main()
