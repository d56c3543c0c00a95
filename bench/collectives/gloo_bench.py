"""The torch gloo anchor: all_reduce / all_gather / broadcast on float32 with
torch.distributed's gloo backend (env:// rendezvous), same sizes as dlaunch
bench; rank 0 prints one JSON line per size: {"op","size","time_us"}.
Run: /usr/bin/python3 gloo_bench.py OP SIZES NRANKS   (SIZES: comma-separated bytes;
spawns NRANKS local ranks), or under a launcher that sets RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT: gloo_bench.py OP SIZES env"""
import json, os, sys, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, n, op, sizes, port):
    if port:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=n)
    for b in sizes:
        count = b // 4 // n * n if op == "all_gather" else b // 4
        x = torch.ones(count, dtype=torch.float32)
        parts = [torch.empty(count // n) for _ in range(n)]
        iters = 3 if b >= (64 << 20) else 10 if b >= (1 << 20) else 100
        def once():
            if op == "all_reduce":
                dist.all_reduce(x)
            elif op == "all_gather":
                dist.all_gather(parts, x[: count // n])
            else:
                dist.broadcast(x, 0)
        once()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            once()
        us = torch.tensor([(time.perf_counter() - t0) * 1e6 / iters], dtype=torch.float64)
        dist.all_reduce(us, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(json.dumps({"op": op, "size": count * 4, "time_us": us.item()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    op, sizes = sys.argv[1], [int(x) for x in sys.argv[2].split(",")]
    if sys.argv[3] == "env":
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), op, sizes, None)
    else:
        port = 20000 + os.getpid() % 20000
        mp.spawn(worker, args=(int(sys.argv[3]), op, sizes, port), nprocs=int(sys.argv[3]))
