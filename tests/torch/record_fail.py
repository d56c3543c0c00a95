#!/usr/bin/python3
"""A job whose rank 1 fails with an exception under torch's @record.

torch.distributed.elastic.multiprocessing.errors.record writes the exception
(type, message, traceback) to $TORCHELASTIC_ERROR_FILE; the test checks that
dlaunch's verdict line names it and the line below marked RAISED-HERE. Rank 0
sleeps (argv[1] seconds, the test's marker) until dlaunch tears it down.
"""
import os
import sys
import time

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def check_lr(lr):
    if lr <= 0:
        raise ValueError("learning rate must be positive, got %g" % lr)  # RAISED-HERE


@record
def main():
    print("RECORD rank=%s torchelastic=%d" % (os.environ["RANK"], dist.is_torchelastic_launched()), flush=True)
    if os.environ["RANK"] == "1":
        check_lr(-0.5)
    time.sleep(float(sys.argv[1]))


if __name__ == "__main__":
    main()
