# dlaunch's hook for Python ranks (docs/hangs.md), first on their PYTHONPATH.
# Installed once beside dlaunch (share/dlaunch/python); the job's own
# directory is DLAUNCH_PYTHON_DIR, which this hook makes on first use (a job
# without Python ranks never has one). On SIGQUIT the interpreter's fault
# handler writes every thread's stack to a file there, which the agent reads;
# the rank goes on running. torch's error files (TORCHELASTIC_ERROR_FILE) go
# there too, and an uncaught exception that torch's @record did not write is
# written there in its format, so the verdict names it (ModuleNotFoundError:
# No module named 'x' (at train.py:3)) for any Python rank. Then the
# sitecustomize module this one shadows (if any) runs as it would have.
def _dlaunch_stack_hook():
    import os, sys
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.environ.get("DLAUNCH_PYTHON_DIR") or here
    try:
        import faulthandler, signal
        try:
            os.mkdir(out, 0o700)
        except FileExistsError:
            pass
        f = open(os.path.join(out, "py.%d.stack" % os.getpid()), "w")
        faulthandler.register(signal.SIGQUIT, file=f, all_threads=True, chain=False)
        faulthandler._dlaunch_stack_file = f
    except Exception:
        pass
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    import importlib.machinery, importlib.util
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is not None and spec.loader is not None:
        mod = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = mod
        spec.loader.exec_module(mod)
def _dlaunch_error_hook():
    import os, sys
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    previous = sys.excepthook
    def write_uncaught(kind, value, tb):
        try:
            if not os.path.exists(path):  # @record wrote it first: its text stands
                import json, time, traceback
                text = "".join(traceback.format_exception(kind, value, tb))
                message = {"message": "%s: %s" % (kind.__name__, value),
                           "extraInfo": {"py_callstack": text, "timestamp": str(int(time.time()))}}
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "w") as f:
                    json.dump({"message": message}, f)
        except Exception:
            pass
        previous(kind, value, tb)
    sys.excepthook = write_uncaught
_dlaunch_stack_hook()
_dlaunch_error_hook()
del _dlaunch_stack_hook, _dlaunch_error_hook
