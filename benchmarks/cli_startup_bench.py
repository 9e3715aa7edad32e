"""Benchmark: CPU time (user + system) of `planner` answering --version and --help.

Each command runs ``--runs`` times as a child process; its CPU time is read from
``resource.getrusage(RUSAGE_CHILDREN)`` before and after, so other load on the machine
inflates it far less than wall time. Prints the median (and min, max) per command.

    python benchmarks/cli_startup_bench.py [--runs 10] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

COMMANDS = (
    ("--version",),
    ("--help",),
    ("simulate", "--help"),
    ("bench", "--help"),
)


def planner_executable() -> str:
    found = shutil.which("planner", path=str(Path(sys.executable).parent))
    if found is None:
        raise SystemExit("no `planner` beside this Python: pip install -e . first")
    return found


def measure(command: list[str]) -> tuple[float, float]:
    """CPU seconds (user + system) and wall seconds of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each command (10)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    planner = planner_executable()
    measure([planner, "--version"])  # warm the file cache once
    results: list[dict[str, Any]] = []
    for arguments in COMMANDS:
        runs = [measure([planner, *arguments]) for _ in range(args.runs)]
        cpu = [c for c, _ in runs]
        wall = [w for _, w in runs]
        results.append(
            {
                "command": "planner " + " ".join(arguments),
                "runs": args.runs,
                "cpu_median_s": round(statistics.median(cpu), 3),
                "cpu_min_s": round(min(cpu), 3),
                "cpu_max_s": round(max(cpu), 3),
                "wall_median_s": round(statistics.median(wall), 3),
            }
        )
    print(f"{'command':<26} {'CPU median':>10} {'min':>6} {'max':>6} {'wall median':>12}")
    for r in results:
        print(
            f"{r['command']:<26} {r['cpu_median_s']:>9.3f}s {r['cpu_min_s']:>5.3f}s "
            f"{r['cpu_max_s']:>5.3f}s {r['wall_median_s']:>11.3f}s"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
