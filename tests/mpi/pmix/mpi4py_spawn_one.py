"""mpi4py's COMM_SELF.Spawn of one child, the MPIPoolExecutor idiom under
`dlaunch -n 1` with no hostfile: the parent sends the child a number, the
child sends back its square, and each prints "spawn_one <role> ok". The first
argument, a test's marker, goes onto the child's command line too, so that a
test can look for leftovers. A refused spawn prints "spawn_one failed: ...",
exit 3."""
import sys

from mpi4py import MPI

if __name__ == "__main__":
    mark = sys.argv[1] if len(sys.argv) > 1 else "-"
    parent = MPI.Comm.Get_parent()
    if parent == MPI.COMM_NULL:
        try:
            child = MPI.COMM_SELF.Spawn(sys.executable, [__file__, mark, "child"], maxprocs=1)
        except MPI.Exception as e:
            print(f"spawn_one failed: {e}", flush=True)
            sys.exit(3)
        child.send(7, dest=0)
        got = child.recv(source=0)
        child.Disconnect()
        print("spawn_one parent ok" if got == 49 else f"spawn_one parent BAD: {got}", flush=True)
        sys.exit(0 if got == 49 else 1)
    x = parent.recv(source=0)
    parent.send(x * x, dest=0)
    parent.Disconnect()
    print("spawn_one child ok", flush=True)
