#!/usr/bin/env python3
"""The NCCL anchor for `dlaunch bench --device cuda`: torch.distributed's
nccl backend, all_reduce (in place, as torch does it) on float32 device
buffers, one rank per GPU (cuda:LOCAL_RANK), started by a launcher that sets
the env:// variables. Rank 0 prints one JSON line per size:
{"op","size","time_us"}, timed as dlaunch bench times: WARMUP calls, then
ITERS calls between two cuda synchronizations, the slowest rank's mean.

  dlaunch -n N python3 torch_nccl_bench.py SIZES [ITERS WARMUP]   (SIZES: comma-separated bytes)
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    sizes = [int(s) for s in sys.argv[1].split(",")]
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    d = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=d)
    for b in sizes:
        x = torch.ones(max(b // 4, 1), dtype=torch.float32, device=d)
        for _ in range(warmup):
            dist.all_reduce(x)
        torch.cuda.synchronize(d)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        torch.cuda.synchronize(d)
        us = torch.tensor([(time.perf_counter() - t0) / iters * 1e6], dtype=torch.float64, device=d)
        dist.all_reduce(us, op=dist.ReduceOp.MAX)
        if dist.get_rank() == 0:
            print(json.dumps({"op": "all_reduce", "size": x.numel() * 4, "time_us": us.item()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
