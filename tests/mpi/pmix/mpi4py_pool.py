"""mpi4py's MPIPoolExecutor (3 spawned workers) under dlaunch -n 1: squares
0..9 on the workers and prints "pool ok" when every result is right. Under
`python3 -m mpi4py.futures` the workers are the job's own ranks instead. An
error the pool raises is printed as "pool failed: <type>: <message>", exit 3.
The first argument, a test's marker, goes onto the spawned workers' command
line too (python3 -X <marker>), so that a test can look for leftovers."""
import sys

from mpi4py.futures import MPIPoolExecutor


def square(x):
    return x * x


if __name__ == "__main__":
    try:
        extra = {"python_args": ["-X", "dltest=" + sys.argv[1]]} if len(sys.argv) > 1 else {}
        with MPIPoolExecutor(max_workers=3, **extra) as pool:
            got = list(pool.map(square, range(10), timeout=60))
    except Exception as e:  # the refusal, whatever mpi4py wraps it in
        print(f"pool failed: {type(e).__name__}: {e}", flush=True)
        sys.exit(3)
    want = [x * x for x in range(10)]
    print("pool ok" if got == want else f"pool BAD: {got}", flush=True)
    sys.exit(0 if got == want else 1)
