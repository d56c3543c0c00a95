"""mpi4py's MPIPoolExecutor (3 spawned workers) under dlaunch -n 1: squares
0..9 on the workers and prints "pool ok" when every result is right. dlaunch
refuses to spawn (docs/mpi.md, "Spawning") and ends the job; under
`python3 -m mpi4py.futures` the workers are the job's own ranks instead. An
error the pool raises is printed as "pool failed: <type>: <message>", exit 3."""
import sys

from mpi4py.futures import MPIPoolExecutor


def square(x):
    return x * x


if __name__ == "__main__":
    try:
        with MPIPoolExecutor(max_workers=3) as pool:
            got = list(pool.map(square, range(10), timeout=60))
    except Exception as e:  # the refusal, whatever mpi4py wraps it in
        print(f"pool failed: {type(e).__name__}: {e}", flush=True)
        sys.exit(3)
    want = [x * x for x in range(10)]
    print("pool ok" if got == want else f"pool BAD: {got}", flush=True)
    sys.exit(0 if got == want else 1)
