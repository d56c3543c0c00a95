# The chaos run's torch job: `python3 chaos_torch.py LINES MARK READY_DIR`. gloo over
# env:// (dlaunch's MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), LINES
# checked all_reduces, one every 50 ms, and after each the line
# "chaos RANK I a=0 MARK" (the shell job's), so a lost or spliced line shows
# as in any other job. Once its process group is up, each rank makes
# READY_DIR/ready.RANK: the fault then hits the collectives, not the imports.
import os
import sys
import time

import torch
import torch.distributed as dist

lines, mark, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()
open(os.path.join(ready, f"ready.{rank}"), "w").close()
for i in range(lines):
    t = torch.tensor([rank + i], dtype=torch.int64)
    dist.all_reduce(t)
    if t.item() != size * (size - 1) // 2 + size * i:
        sys.exit(f"chaos_torch: rank {rank} step {i}: the sum is {t.item()}")
    print(f"chaos {rank} {i} a=0 {mark}", flush=True)
    time.sleep(0.05)
dist.destroy_process_group()
