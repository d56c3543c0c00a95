#!/usr/bin/env python3
"""Rule 4 of check_architecture.py on made-up files: it refuses what it must
and lets the adapters through. Exits 1 on the first wrong verdict."""
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


def main():
    wrong = 0
    for rel, lines, want in CASES:
        got = [n for n, _ in ca.json_problems(rel, lines)]
        if got != want:
            print(f"{rel}: refused lines {got}, expected {want}")
            wrong += 1
    print(f"check_architecture_test: {len(CASES) - wrong} of {len(CASES)} cases right")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
