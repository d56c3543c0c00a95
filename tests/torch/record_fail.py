#!/usr/bin/python3
"""A job whose rank 1 fails with an exception under torch's @record.

torch.distributed.elastic.multiprocessing.errors.record writes the exception
(type, message, traceback) to $TORCHELASTIC_ERROR_FILE; the test checks that
dlaunch's verdict line names it and the line below marked RAISED-HERE. Rank 0
sleeps (argv[1] seconds, the test's marker) until dlaunch tears it down.
Rank 1 raises only after rank 0 has printed its line (a file beside the two
ranks, named by their agent's pid), so that the teardown never finds rank 0
still importing torch.
"""
import os
import sys
import tempfile
import time

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def check_lr(lr):
    if lr <= 0:
        raise ValueError("learning rate must be positive, got %g" % lr)  # RAISED-HERE


@record
def main():
    print("RECORD rank=%s torchelastic=%d" % (os.environ["RANK"], dist.is_torchelastic_launched()), flush=True)
    flag = os.path.join(tempfile.gettempdir(), "dlaunch-record-test-%d" % os.getppid())
    if os.environ["RANK"] == "0":
        open(flag, "w").close()
    if os.environ["RANK"] == "1":
        deadline = time.monotonic() + 60
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.01)
        if os.path.exists(flag):
            os.unlink(flag)
        check_lr(-0.5)
    time.sleep(float(sys.argv[1]))


if __name__ == "__main__":
    main()
