#!/usr/bin/env python3
"""Checks the rules of docs/design.md "Architecture" that a compiler does not:

1. Layers point down: a source folder includes only itself and folders in
   lower BANDS; folders of one band never include each other. The top-level
   CMakeLists.txt builds the folders in an order that goes up the bands.
2. The control protocol has one typed home: outside control/, no production
   file reads a control message's type or fields by a string ("t", or a
   message name used as a JSON value).
3. A production file is never named like a test.
4. Records are typed: JSON is read and written through wire/record.h.
   nlohmann::json, and reads of a field by a string key (.at("k"),
   .value("k", ...), .contains("k")), appear only in JSON_ADAPTERS: the one
   function that parses a foreign format, torch's error file.
5. Third-party libraries stay behind their adapters: each one's headers
   (<pmix...>, <libssh/...>, <hwloc.h>, <nccl.h>, <cuda...>) are included
   only where HEADER_FENCES lets them.
6. A build without an optional library is a file of its own that CMake
   picks (mpi/pmix_none.cc, rendezvous/pmix_client_none.cc): no source
   tests DLAUNCH_HAVE_PMIX with the preprocessor.

Usage: check_architecture.py SOURCE_DIR PRINT_PROTOCOL_REFERENCE; prints each
violation, exits 1 if any. The second argument is the built program that
prints control::protocol_reference() (tests/control/print_protocol_reference.cc,
build/bin/print_protocol_reference), whence the control messages' names:
the protocol itself, not a copy of it. Its ctest passes both.
"""
import os
import re
import subprocess
import sys

# Bottom up, as drawn in docs/design.md "Architecture".
BANDS = [["errors"], ["wire"], ["control", "hostfiles"], ["rendezvous", "mpi", "machine", "remote"], ["agent", "collectives"],
         ["launcher"], ["doctor"], ["cli", "demo"]]
BAND = {f: i for i, band in enumerate(BANDS) for f in band}
LAYERS = [f for band in BANDS for f in band]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
# {"t", ...}, ["t"], .at("t"), value("t"
TYPE_KEY = re.compile(r'(\{\s*"t"\s*,|\[\s*"t"\s*\]|\.at\(\s*"t"\s*\)|value\(\s*"t"\s*,)')


# The only production files that may use nlohmann::json or read a field by
# a string key (.at("k"), .value("k", ...), .contains("k")), and why.
JSON_ADAPTERS = {
    # TORCHELASTIC_ERROR_FILE is torch's format, whose "message" is a string
    # or an object: parsed in summarize_torch_error() alone.
    "agent/rank_environment.cc": "torch's error file",
}
NLOHMANN = re.compile(r"nlohmann")
KEYED_READ = re.compile(r'\.(at|value|contains)\(\s*"')


def json_problems(rel, lines):
    """Rule 4 for one production file: [(line number, why)]. Comments are
    not code: only what precedes a line's "//" is looked at."""
    if rel in JSON_ADAPTERS:
        return []
    out = []
    for n, line in enumerate(lines, 1):
        code = line.split("//", 1)[0]
        if NLOHMANN.search(code):
            out.append((n, "uses nlohmann::json outside JSON_ADAPTERS: make the record a struct of wire/record.h"))
        elif KEYED_READ.search(code):
            out.append((n, "reads a field by a string key: decode a struct of wire/record.h instead"))
    return out


# Rule 5: (what the headers are, the include they match, the only places
# that may include them: folders ending in "/" or files).
HEADER_FENCES = [
    ("libpmix", re.compile(r"^\s*#\s*include\s+<pmix"), ["mpi/pmix/", "rendezvous/pmix_client.cc"]),
    ("hwloc", re.compile(r"^\s*#\s*include\s+<hwloc"), ["mpi/pmix/"]),
    ("libssh", re.compile(r"^\s*#\s*include\s+<libssh/"), ["remote/ssh/"]),
    ("NCCL", re.compile(r"^\s*#\s*include\s+<(nccl|rccl)"), ["collectives/nccl/"]),
    # dlaunch-nccl-check, the doctor's NCCL probe, is a program of its own
    # that links the CUDA runtime (doctor/CMakeLists.txt).
    ("the CUDA runtime", re.compile(r"^\s*#\s*include\s+<cuda"), ["collectives/nccl/", "doctor/nccl_check_main.cc"]),
]
HAVE_PMIX = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b.*\bDLAUNCH_HAVE_PMIX\b")


def fence_problems(rel, lines):
    """Rules 5 and 6 for one production file: [(line number, why)]."""
    out = []
    for n, line in enumerate(lines, 1):
        for what, include, allowed in HEADER_FENCES:
            if include.match(line) and not any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in allowed):
                out.append((n, f"includes {what}'s headers, which only {', '.join(allowed)} may include"))
        if HAVE_PMIX.match(line):
            out.append((n, "tests DLAUNCH_HAVE_PMIX: put the build without libpmix in a file of its own that CMake "
                           "picks (as mpi/pmix_none.cc)"))
    return out


def message_types(program):
    """Every control message's name, from the table that `program` prints
    (control::protocol_reference()): "agent -> launcher  hello  {...}" names
    hello. Raises OSError or CalledProcessError when it does not run."""
    table = subprocess.run([program], check=True, capture_output=True, text=True, timeout=60).stdout
    return sorted({m.group(1) for m in re.finditer(r"^\S+ -> \S+ {2}(\w+) {2}\{", table, re.M)})


def sources(root, folder):
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for f in sorted(files):
            if f.endswith((".cc", ".h", ".c")):
                yield os.path.join(dirpath, f)


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root, program = sys.argv[1], sys.argv[2]
    try:
        types = message_types(program)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"check_architecture: cannot read the control messages from {program}: {e}; build it with "
              "`cmake --build build --target print_protocol_reference`", file=sys.stderr)
        return 2
    cmake = open(os.path.join(root, "CMakeLists.txt")).read()
    m = re.search(r"set\(dlaunch_all_folders ([^)]*)\)", cmake)
    problems = []
    if not types:
        problems.append(f"{program}: printed no control message (expected lines like 'agent -> launcher  hello  {{...}}')")
    type_name = re.compile(r'(==|!=)\s*"(' + "|".join(types) + r')"|"t"\s*,\s*"(' + "|".join(types) + r')"')
    order = m.group(1).split() if m else []
    if sorted(order) != sorted(LAYERS) or [BAND[f] for f in order] != sorted(BAND[f] for f in order):
        problems.append("CMakeLists.txt: dlaunch_all_folders does not go up the bands of scripts/check_architecture.py")
    for folder in LAYERS:
        below = {f for f in LAYERS if BAND[f] < BAND[folder]} | {folder}
        for path in sources(root, folder):
            rel = os.path.relpath(path, root)
            name = os.path.basename(path)
            if re.search(r"(^test_|_test\.(cc|h|c)$)", name):
                problems.append(f"{rel}: a production file named like a test")
            lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
            problems += [f"{rel}:{n}: {why}" for n, why in json_problems(rel, lines)]
            problems += [f"{rel}:{n}: {why}" for n, why in fence_problems(rel, lines)]
            for n, line in enumerate(lines, 1):
                inc = INCLUDE.match(line)
                if inc and inc.group(1) in LAYERS and inc.group(1) not in below:
                    problems.append(f"{rel}:{n}: {folder}/ includes {inc.group(1)}/, which is not in a lower band")
                if folder != "control" and (TYPE_KEY.search(line) or type_name.search(line)):
                    problems.append(f"{rel}:{n}: reads a control message by string outside control/: {line.strip()}")
    for p in problems:
        print(p)
    print(f"check_architecture: {len(problems)} problem(s) in {len(LAYERS)} folders, {len(BANDS)} bands, "
          f"{len(types)} control messages")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
