# A rank that probes torch's c10d store under dlaunch (tests/torch/c10d_store_test.cc).
#   listeners  the rank's own listening TCP ports before and after
#              init_process_group("gloo"), and MASTER_PORT; then an all_reduce
#   absent     the last rank never calls init_process_group (sleeps); the others do
#   survive    rank 0 sets a key through its TCPStore client and exits; rank 1
#              waits until rank 0's process is gone, then reads the key
#   unknown    no torch: VALIDATE and ADD init/ 1 (what a rank's TCPStore
#              client sends first), then query type 42, on MASTER_PORT
#   stranger   no torch: VALIDATE, then query type 42 without counting itself
#              in (a process that is none of the job's ranks); then prints
#              that the job still runs
#   own        as Intel's oneCCL examples: RANK/WORLD_SIZE from PMI_RANK/PMI_SIZE,
#              MASTER_ADDR/MASTER_PORT set by the script to $PROBE_ADDR/$PROBE_PORT
#              (each kept when unset), then env:// init (60 s timeout) and an
#              all_reduce; says whether the rank listens on the port it chose
# The last argument is the test's marker (it only names the processes).
import os
import socket
import struct
import sys
import time

mode = sys.argv[1]
if mode == "own":
    os.environ["RANK"], os.environ["WORLD_SIZE"] = os.environ["PMI_RANK"], os.environ["PMI_SIZE"]
    os.environ["MASTER_ADDR"] = os.environ.get("PROBE_ADDR", os.environ["MASTER_ADDR"])
    os.environ["MASTER_PORT"] = os.environ.get("PROBE_PORT", os.environ["MASTER_PORT"])
rank = int(os.environ["RANK"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])


def own_listening_ports():
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = []
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN, ours
                    ports.append(int(cols[1].split(":")[1], 16))
    return sorted(ports)


def deadline_wait(cond, what, seconds=60):
    until = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > until:
            sys.exit("rank %d: timed out after %d s waiting for %s" % (rank, seconds, what))
        time.sleep(0.05)


VALIDATE = struct.pack("<BI", 0, 0x3C85F7CE)
ADD_INIT = bytes([4]) + struct.pack("<Q", 5) + b"init/" + struct.pack("<q", 1)

if mode == "unknown":
    s = socket.create_connection((addr, port), timeout=60)
    s.sendall(VALIDATE + ADD_INIT)
    s.recv(8)
    s.sendall(bytes([42]))
    s.recv(1)  # the store closes the connection; the job ends before any timeout
    time.sleep(60)
    sys.exit(0)

if mode == "stranger":
    s = socket.create_connection((addr, port), timeout=60)
    s.sendall(VALIDATE + bytes([42]))
    s.recv(1)  # the store closes this connection only
    time.sleep(1)
    print("c10d stranger rank=%d still running" % rank, flush=True)
    sys.exit(0)

import datetime  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

if mode == "listeners":
    print("c10d listeners-before rank=%d ports=%s master_port=%d" % (rank, own_listening_ports(), port), flush=True)
    dist.init_process_group("gloo")
    t = torch.ones(1)
    dist.all_reduce(t)
    print("c10d listeners-after rank=%d ports=%s master_port=%d sum=%d" % (rank, own_listening_ports(), port, int(t.item())),
          flush=True)
    dist.destroy_process_group()
elif mode == "absent":
    if rank == int(os.environ["WORLD_SIZE"]) - 1:
        time.sleep(120)
    else:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
elif mode == "survive":
    store = dist.TCPStore(addr, port, int(os.environ["WORLD_SIZE"]), False, datetime.timedelta(seconds=60))
    if rank == 0:
        store.set("survive/value", "from rank 0")
        store.set("survive/pid", str(os.getpid()))
        sys.exit(0)
    pid = int(store.get("survive/pid"))
    deadline_wait(lambda: not os.path.exists("/proc/%d" % pid), "rank 0 (pid %d) to exit" % pid)
    print("c10d survive rank=%d value=%s" % (rank, store.get("survive/value").decode()), flush=True)
elif mode == "own":
    start = time.monotonic()
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    t = torch.ones(1)
    dist.all_reduce(t)
    print("c10d own rank=%d sum=%d listens=%d addr=%s port=%d seconds=%.1f" %
          (rank, int(t.item()), port in own_listening_ports(), addr, port, time.monotonic() - start), flush=True)
    dist.destroy_process_group()
