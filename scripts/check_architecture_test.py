#!/usr/bin/env python3
"""Rules 4, 5 and 6 of check_architecture.py on made-up files: they refuse
what they must and let the adapters through. Exits 1 if any verdict is
wrong."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_architecture as ca  # noqa: E402

CASES = [
    # (file, its lines, the line numbers refused)
    ("doctor/facts.cc", ['#include <nlohmann/json.hpp>', 'int x = 1;'], [1]),
    ("launcher/node_group.cc", ['auto j = nlohmann::json::parse(s);', 'int r = j.at("rank");'], [1, 2]),
    ("launcher/job.cc", ['std::string s = x.value_or("");', 'auto v = m.at("k");', 't.find("(LWP ")',
                         '// not nlohmann::json: wire/record.h', 'if (f.contains("x")) {}'], [2, 5]),
    ("collectives/bench/bench_command.cc", ['nlohmann::json j;', 'auto v = j.value("wrong", 0);'], [1, 2]),
    ("agent/rank_environment.cc", ['nlohmann::json j;', 'j.at("message");', 'j.contains("extraInfo");'], []),
]

# Rules 5 and 6: third-party headers behind their adapters, no
# DLAUNCH_HAVE_PMIX in the preprocessor.
FENCE_CASES = [
    ("mpi/mpi_job.cc", ['#include <pmix_server.h>', '#include "mpi/pmix/pmix_server.h"'], [1]),
    ("mpi/pmix/server_spawn.cc", ['#include <pmix.h>', '#include <hwloc.h>'], []),
    ("rendezvous/pmix_client.cc", ['#include <pmix.h>'], []),
    ("rendezvous/bootstrap.cc", ['#  include <pmix.h>'], [1]),
    ("launcher/job.cc", ['#include <libssh/libssh.h>', '#include <hwloc.h>', '// #include <nccl.h>'], [1, 2]),
    ("remote/ssh/session.cc", ['#include <libssh/libssh.h>'], []),
    ("collectives/nccl/communicator.cc", ['#include <nccl.h>', '#include <cuda_runtime.h>'], []),
    ("doctor/nccl_check_main.cc", ['#include <cuda_runtime.h>', '#include <nccl.h>'], [2]),
    ("doctor/gpu.cc", ['#include <cuda_runtime.h>'], [1]),
    ("agent/agent.cc", ['#if DLAUNCH_HAVE_PMIX', '#endif', '#ifdef DLAUNCH_HAVE_PMIX', '// not #if DLAUNCH_HAVE_PMIX'],
     [1, 3]),
]


def main():
    wrong = 0
    for check, cases in ((ca.json_problems, CASES), (ca.fence_problems, FENCE_CASES)):
        for rel, lines, want in cases:
            got = [n for n, _ in check(rel, lines)]
            if got != want:
                print(f"{check.__name__}: {rel}: refused lines {got}, expected {want}")
                wrong += 1
    total = len(CASES) + len(FENCE_CASES)
    print(f"check_architecture_test: {total - wrong} of {total} cases right")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
