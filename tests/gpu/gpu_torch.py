#!/usr/bin/env python3
"""A rank of a torch job on GPUs, as users write it: device from LOCAL_RANK,
env:// rendezvous, a backend (nccl by default). Started by dlaunch on a GPU
host (tests/gpu/device_check.sh); it needs a GPU, so no CI test runs it.

  gpu_torch.py [--backend nccl|gloo] [--device local_rank|dlaunch_gpus|default]

--device says how the rank picks its GPU: `local_rank` is
torch.cuda.set_device(LOCAL_RANK) (the torchrun idiom, what
`--gpu-bind visible` serves), `dlaunch_gpus` the first of DLAUNCH_GPUS (what a
rank sharing GPUs under --oversubscribe-gpus must do), `default` none at all
(cuda:0, what `--gpu-bind isolate` serves). Every rank checks that the
device it got is the one dlaunch bound it to (the physical GPU named by
CUDA_VISIBLE_DEVICES[DLAUNCH_GPUS[0]]), runs all_reduce, broadcast,
all_gather and a few DDP steps on it, checks the results and prints one line:

  GPU rank=R local_rank=L world=W device=cuda:D name=NAME pci=BUS visible=CVD dlaunch_gpus=G backend=B ddp_loss=X OK

or a line starting `GPU rank=R FAILED:` and exits 1.
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
    ap.add_argument("--device", default="local_rank", choices=["local_rank", "dlaunch_gpus", "default"])
    a, _ = ap.parse_known_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
    mine = os.environ.get("DLAUNCH_GPUS", "")
    if a.device == "local_rank":
        dev = local
    elif a.device == "dlaunch_gpus":
        dev = int(mine.split(",")[0])
    else:
        dev = 0
    try:
        torch.cuda.set_device(dev)
        d = torch.device("cuda", dev)
        props = torch.cuda.get_device_properties(d)
        pci = "%04x:%02x:%02x" % (props.pci_domain_id, props.pci_bus_id, props.pci_device_id)
        # The device dlaunch bound this rank to: index DLAUNCH_GPUS[0] of what it sees.
        if mine and int(mine.split(",")[0]) != dev:
            raise RuntimeError("rank uses cuda:%d but DLAUNCH_GPUS=%s" % (dev, mine))
        dist.init_process_group(a.backend, init_method="env://", timeout=datetime.timedelta(seconds=60),
                                device_id=d if a.backend == "nccl" else None)
        x = torch.full((1 << 20,), float(rank + 1), device=d)
        dist.all_reduce(x)
        want = world * (world + 1) / 2
        if x[0].item() != want or x[-1].item() != want:
            raise RuntimeError("all_reduce gave %s, want %s" % (x[0].item(), want))
        y = torch.full((4096,), float(rank), device=d)
        dist.broadcast(y, src=world - 1)
        if y[7].item() != world - 1:
            raise RuntimeError("broadcast gave %s" % y[7].item())
        parts = [torch.empty(8, device=d) for _ in range(world)]
        dist.all_gather(parts, torch.full((8,), float(rank), device=d))
        if [p[0].item() for p in parts] != [float(r) for r in range(world)]:
            raise RuntimeError("all_gather gave %s" % [p[0].item() for p in parts])
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 8).to(d), device_ids=[dev])
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = torch.Generator(device="cpu").manual_seed(rank)
        for _ in range(5):
            xb = torch.randn(32, 64, generator=g).to(d)
            loss = model(xb).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        lt = loss.detach().clone()
        dist.all_reduce(lt)
        torch.cuda.synchronize(d)
        dist.barrier()
        dist.destroy_process_group()
        sys.stdout.write("GPU rank=%d local_rank=%d world=%d device=cuda:%d name=%s pci=%s visible=%s dlaunch_gpus=%s "
                         "backend=%s ddp_loss=%.6f OK\n" % (rank, local, world, dev, props.name.replace(" ", "_"),
                                                           pci, cvd, mine, a.backend, lt.item() / world))
    except Exception as e:  # one line a test can read, then a failing exit
        sys.stdout.write("GPU rank=%d FAILED: %s: %s (visible=%s dlaunch_gpus=%s)\n" % (rank, type(e).__name__,
                                                                                         str(e).splitlines()[0] if str(e) else "", cvd, mine))
        sys.stdout.flush()
        sys.exit(1)


if __name__ == "__main__":
    main()
