# dlaunch's hook for Python ranks (docs/hangs.md), first on their PYTHONPATH.
# Installed once beside dlaunch (share/dlaunch/python); the job's own
# directory is DLAUNCH_PYTHON_DIR, which this hook makes on first use (a job
# without Python ranks never has one). On SIGQUIT the interpreter's fault
# handler writes every thread's stack to a file there, which the agent reads;
# the rank goes on running. torch's error files (TORCHELASTIC_ERROR_FILE) go
# there too, and an uncaught exception that torch's @record did not write is
# written there in its format, so the verdict names it (ModuleNotFoundError:
# No module named 'x' (at train.py:3)) for any Python rank. torch's
# rendezvous uses dlaunch's c10d store only at the address dlaunch serves it
# (docs/rendezvous.md). Then the sitecustomize module this one shadows (if
# any) runs as it would have. Nothing here may appear in a traceback or fail
# a program: each part returns before the program's own code runs or calls it.
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
        if os.path.exists(path):  # @record wrote it first: its text stands
            return
        import json, time, traceback
        text = "".join(traceback.format_exception(kind, value, tb))
        message = {"message": "%s: %s" % (kind.__name__, value),
                   "extraInfo": {"py_callstack": text, "timestamp": str(int(time.time()))}}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"message": message}, f)
    # The hook is max(kind, value, tb, key=receiver.send): builtins only, so
    # no function of ours is entered outside a try. A Ctrl-C still pending
    # when the program's last error rises (a forwarded SIGINT that came while
    # torch waited in C++) raises at the first Python frame entered: here the
    # receiver's resumption, inside its try, where it is dropped (the program
    # is ending with its own error). No error of the hook's (a closed
    # stderr, a half-torn-down interpreter) reaches the user either.
    def receiver():
        while True:
            try:
                value = yield 0
                if isinstance(value, BaseException):
                    for step in (write_uncaught, previous):
                        try:
                            step(type(value), value, value.__traceback__)
                        except BaseException:
                            pass
            except GeneratorExit:  # the interpreter's end closes it
                return
            except BaseException:
                pass
    receive = receiver()
    next(receive)
    import functools
    sys.excepthook = functools.partial(max, key=receive.send)
def _dlaunch_torch_store_hook():
    # TORCHELASTIC_USE_AGENT_STORE=True makes torch's env:// and tcp://
    # rendezvous connect every rank, rank 0 too, to a store at their address.
    # That store is dlaunch's at DLAUNCH_TORCH_STORE (host:port) only: a script
    # that picks its own address (oneCCL's examples set 127.0.0.1:29500) would
    # wait on a port nobody serves. There torch is told it has no agent store,
    # so its rank 0 hosts one, as under mpirun. The patch replaces torch's
    # predicate, which torch calls and which returns before torch connects,
    # once torch.distributed.rendezvous is imported (seen at the next import).
    import os, sys
    served = os.environ.get("DLAUNCH_TORCH_STORE", "")
    served_host, _, served_port = served.rpartition(":")
    served_host = served_host.strip("[]")
    if not served_host or not served_port:
        return

    def same_host(host):
        if host == served_host:
            return True
        try:
            import socket
            def addresses(h):
                return {a[4][0] for a in socket.getaddrinfo(h, None, proto=socket.IPPROTO_TCP)}
            return bool(addresses(host) & addresses(served_host))
        except Exception:  # unresolvable: torch's connect says so either way
            return True

    def served_only_there(original):
        def _torchelastic_use_agent_store():
            use = original()
            if use:
                try:
                    caller = sys._getframe(1)
                    if caller.f_code.co_name == "_create_c10d_store":
                        host, port = caller.f_locals.get("hostname"), caller.f_locals.get("port")
                        use = str(port) == served_port and same_host(str(host))
                except Exception:
                    pass
            return use
        _torchelastic_use_agent_store.__wrapped__ = original
        return _torchelastic_use_agent_store

    class _DlaunchTorchStoreFinder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            try:
                mod = sys.modules.get("torch.distributed.rendezvous")
                if mod is None or getattr(getattr(mod, "__spec__", None), "_initializing", False):
                    return None
                # A new list: the import that called this still walks the old one.
                sys.meta_path = [f for f in sys.meta_path if f is not _DlaunchTorchStoreFinder]
                original = getattr(mod, "_torchelastic_use_agent_store", None)
                if callable(original):
                    mod._torchelastic_use_agent_store = served_only_there(original)
            except Exception:
                pass
            return None
    sys.meta_path.insert(0, _DlaunchTorchStoreFinder)
_dlaunch_stack_hook()
_dlaunch_error_hook()
_dlaunch_torch_store_hook()
del _dlaunch_stack_hook, _dlaunch_error_hook, _dlaunch_torch_store_hook
