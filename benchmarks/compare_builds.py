"""Benchmark: the compiled replica loop of two or more commits, paired, on one machine.

Timings on a shared 2-core VM swing by up to 1.4x between runs of the same code, so a change
to the simulator is judged by paired runs: each commit is checked out in a git worktree and
its ``engine.py`` compiled there (``setup.py build_ext --inplace``), then the commits take turns
(order reversed every round), each run in a fresh interpreter, on the ``--scaling`` load of
``simulate_bench.py`` (``--requests`` at 5 requests/s per replica): CPU microseconds per
request of the fleet's run. Printed per commit and fleet size: best and median; per pair of
commits: the ratio of the bests and the median of the paired ratios (above 1: the later
commit is faster); and each commit's cost at the largest fleet against one replica.

Each child runs from an empty directory with only its worktree on ``PYTHONPATH`` and checks
that the engine it imported is that worktree's, compiled: run from a checkout, Python puts the
current directory ahead of ``PYTHONPATH`` and every commit would silently run the checkout's
build.

    python benchmarks/compare_builds.py REV [REV ...] [--replicas 1,60,1000] [--requests N]
        [--rounds 10] [--json OUT]

A REV is anything git names (a commit, a tag, HEAD~2); ``.`` is the working tree as it is.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from simulate_bench import fleet_sizes

REPO = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys
from pathlib import Path
root = Path(sys.argv[1])
from planner.simulate import engine
if engine.IMPLEMENTATION != "compiled" or not Path(engine.__file__).is_relative_to(root):
    sys.exit(f"ran {engine.IMPLEMENTATION} {engine.__file__}, not the build in {root}")
sys.path.insert(0, str(root / "benchmarks"))
import simulate_bench
n, replicas = int(sys.argv[2]), int(sys.argv[3])
print(json.dumps(simulate_bench.replica_cpu(n, 5.0 * replicas, replicas)))
"""


def prepare(rev: str, workdir: Path) -> Path:
    """A compiled checkout of ``rev`` (``.``: this working tree, built in place)."""
    if rev == ".":
        root = REPO
    else:
        root = workdir / rev.replace("/", "_")
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(root), rev],
            check=True,
        )
    subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=root,
        check=True,
        capture_output=True,
    )
    return root


def measure(root: Path, requests: int, replicas: int, scratch: Path) -> float:
    """CPU µs per request of one fresh interpreter's fleet run on ``root``'s build."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("PLANNER_PURE_PYTHON", None)
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", CHILD, str(root), str(requests), str(replicas)],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"compare_builds: the run on {root} failed:\n{done.stderr.strip()}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return float(result["cpu_s"]) / requests * 1e6


def compare(
    revs: list[str], sizes: list[int], requests: int, rounds: int
) -> dict[str, dict[int, list[float]]]:
    runs: dict[str, dict[int, list[float]]] = {rev: {n: [] for n in sizes} for rev in revs}
    with tempfile.TemporaryDirectory(prefix="compare-builds-") as tmp:
        workdir = Path(tmp)
        scratch = workdir / "cwd"
        scratch.mkdir()
        roots: dict[str, Path] = {}
        try:
            for rev in revs:
                print(f"building {rev} ...", file=sys.stderr)
                roots[rev] = prepare(rev, workdir)
            for round_ in range(rounds):
                print(f"round {round_ + 1}/{rounds}", file=sys.stderr)
                order = revs if round_ % 2 == 0 else revs[::-1]
                for replicas in sizes:
                    for rev in order:
                        runs[rev][replicas].append(measure(roots[rev], requests, replicas, scratch))
        finally:
            for root in roots.values():
                if root != REPO:
                    subprocess.run(
                        ["git", "-C", str(REPO), "worktree", "remove", "--force", str(root)],
                        check=False,
                    )
    return runs


def report(runs: dict[str, dict[int, list[float]]], sizes: list[int]) -> dict[str, Any]:
    revs = list(runs)
    summary: dict[str, Any] = {"us_per_request": runs, "pairs": [], "largest_vs_one": {}}
    print(f"{'replicas':>8} {'commit':>12} {'best us':>8} {'median us':>9}")
    for replicas in sizes:
        for rev in revs:
            values = runs[rev][replicas]
            print(f"{replicas:>8} {rev:>12} {min(values):>8.2f} {statistics.median(values):>9.2f}")
        for earlier, later in itertools.pairwise(revs):
            a, b = runs[earlier][replicas], runs[later][replicas]
            pair = {
                "replicas": replicas,
                "from": earlier,
                "to": later,
                "best_ratio": min(a) / min(b),
                "median_paired_ratio": statistics.median(x / y for x, y in zip(a, b, strict=True)),
            }
            summary["pairs"].append(pair)
            print(
                f"{'':>8} {earlier} -> {later}: best {pair['best_ratio']:.3f}x, "
                f"median paired {pair['median_paired_ratio']:.3f}x"
            )
    if len(sizes) > 1:
        one, largest = sizes[0], sizes[-1]
        for rev in revs:
            ratio = min(runs[rev][largest]) / min(runs[rev][one])
            summary["largest_vs_one"][rev] = ratio
            print(f"{rev}: {largest} replicas against {one}, best of each: {ratio:.2f}x")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revs", nargs="+", help="commits to compare, oldest first; '.': this tree")
    parser.add_argument(
        "--replicas", type=fleet_sizes, default="1,60,1000", help="fleet sizes, comma-separated"
    )
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", type=Path, help="also write the runs and ratios here")
    args = parser.parse_args()
    sizes: list[int] = args.replicas
    if len(set(args.revs)) != len(args.revs):
        parser.error("each commit once")
    runs = compare(args.revs, sizes, args.requests, args.rounds)
    summary = report(runs, sizes)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
