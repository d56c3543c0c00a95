# The chaos run's torch job: `python3 chaos_torch.py LINES MARK`. gloo over
# env:// (dlaunch's MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), LINES
# checked all_reduces, one every 50 ms, and after each the line
# "chaos RANK I a=0 MARK" (the shell job's), so a lost or spliced line shows
# as in any other job.
import sys
import time

import torch
import torch.distributed as dist

lines, mark = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()
for i in range(lines):
    t = torch.tensor([rank + i], dtype=torch.int64)
    dist.all_reduce(t)
    if t.item() != size * (size - 1) // 2 + size * i:
        sys.exit(f"chaos_torch: rank {rank} step {i}: the sum is {t.item()}")
    print(f"chaos {rank} {i} a=0 {mark}", flush=True)
    time.sleep(0.05)
dist.destroy_process_group()
