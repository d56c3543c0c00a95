"""mpi4py collectives for the PMIx tests: bcast, scatter, gather, allreduce,
each checked against values computed independently; exits 1 on a mismatch.
Expected size comes from argv[1] (or WORLD_SIZE)."""
import os
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
want = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("WORLD_SIZE", size))
errors = []
if size != want:
    errors.append(f"size {size}, expected {want}")
if "RANK" in os.environ and int(os.environ["RANK"]) != rank:
    errors.append(f"rank {rank}, expected {os.environ['RANK']}")
obj = comm.bcast({"root": "hello", "n": 42} if rank == 0 else None, root=0)
if obj != {"root": "hello", "n": 42}:
    errors.append(f"bcast got {obj!r}")
part = comm.scatter([i * i for i in range(size)] if rank == 0 else None, root=0)
if part != rank * rank:
    errors.append(f"scatter got {part}, expected {rank * rank}")
gathered = comm.gather(rank + 100, root=0)
if rank == 0 and gathered != [r + 100 for r in range(size)]:
    errors.append(f"gather got {gathered}")
total = comm.allreduce(rank + 1, op=MPI.SUM)
if total != size * (size + 1) // 2:
    errors.append(f"allreduce got {total}, expected {size * (size + 1) // 2}")
comm.Barrier()
print(f"mpi4py rank {rank} of {size} {'BAD ' + '; '.join(errors) if errors else 'ok'}", flush=True)
sys.exit(1 if errors else 0)
