"""Benchmark: whole-process time of a small `planner simulate` run, and what its imports cost.

The run is issue 31's: 10,000 requests of the bundled Azure conversation sample's lengths at a
steady 1 request/s (``--rates`` of 3,600 an hour, ``--tokens-from`` the ingested sample) on
Llama-2-70B, TP2 on A100-80GB. The simulation itself takes a few hundredths of a second, so the
process's time is almost all start-up: Python, the CLI, and whatever the command imports.

Each checkout (this one, and ``--baseline DIR``: another checkout of planner, e.g. a
``git worktree`` of an older commit, run through this same Python with ``PYTHONPATH=DIR``) runs
the command ``--runs`` times, interleaved, after one warm-up; the median and min of CPU time
(user + system of the child, from ``getrusage``) and wall time are printed, then the ten
heaviest top-level imports of one run (``python -X importtime``).

    python benchmarks/simulate_startup_bench.py [--runs 10] [--baseline /tmp/base] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "samples" / "azure_llm_conv_2023.csv.gz"
RUN = (
    "simulate", "--rates", "{rates}", "--tokens-from", "conv", "--requests", "10000",
    "--model", "llama-2-70b", "--gpu", "A100-80GB", "--tp", "2",
)  # fmt: skip
CLI = "from planner.cli import main; main()"


def _env(home: Path, checkout: Path | None) -> dict[str, str]:
    env = dict(os.environ, PLANNER_HOME=str(home), COLUMNS="120")
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    return env


def _command(rates: Path, *, importtime: bool = False) -> list[str]:
    flags = ["-X", "importtime"] if importtime else []
    return [sys.executable, *flags, "-c", CLI, *(a.format(rates=rates) for a in RUN)]


def measure(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """CPU seconds (user + system) and wall seconds of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env, cwd=env["PLANNER_HOME"], stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def heaviest_imports(rates: Path, env: dict[str, str], count: int = 10) -> list[tuple[str, float]]:
    """The top-level imports of one run (those nothing else imported first), heaviest first,
    with their cumulative milliseconds."""
    done = subprocess.run(
        _command(rates, importtime=True),
        env=env, cwd=env["PLANNER_HOME"], capture_output=True, text=True, check=True,
    )  # fmt: skip
    top = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _self, cumulative, name = line[len("import time:") :].split("|")
        if not name.startswith("  "):  # depth 0: one space after the bar
            top.append((name.strip(), int(cumulative) / 1000))
    return sorted(top, key=lambda item: -item[1])[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each checkout (10)")
    parser.add_argument("--baseline", type=Path, help="another planner checkout to compare")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    checkouts: dict[str, Path | None] = {"this checkout": None}
    if args.baseline is not None:
        checkouts["baseline"] = args.baseline.resolve()
    with tempfile.TemporaryDirectory() as scratch:
        # a run's working directory is its home: `python -c` puts the working directory first on
        # sys.path, which would shadow the checkout being measured
        home, rates = Path(scratch, "home"), Path(scratch, "rates.csv")
        home.mkdir()
        rates.write_text("ds,y\n" + "".join(f"2024-01-01T{h:02d}:00:00,3600\n" for h in range(4)))
        envs = {name: _env(home, checkout) for name, checkout in checkouts.items()}
        subprocess.run(
            [sys.executable, "-c", CLI, "ingest", str(SAMPLE), "--name", "conv"],
            check=True, env=envs["this checkout"], cwd=scratch, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        for env in envs.values():
            measure(_command(rates), env)  # warm the file cache and byte code
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in envs}
        for _ in range(args.runs):
            for name, env in envs.items():
                runs[name].append(measure(_command(rates), env))
        imports = {name: heaviest_imports(rates, env) for name, env in envs.items()}
    results: list[dict[str, Any]] = []
    print(f"{'checkout':<14} {'CPU median':>10} {'min':>7} {'wall median':>12} {'min':>7}")
    for name, measured in runs.items():
        cpu, wall = [c for c, _ in measured], [w for _, w in measured]
        row = {
            "checkout": name,
            "runs": args.runs,
            "cpu_median_s": round(statistics.median(cpu), 3),
            "cpu_min_s": round(min(cpu), 3),
            "wall_median_s": round(statistics.median(wall), 3),
            "wall_min_s": round(min(wall), 3),
            "heaviest_imports_ms": imports[name],
        }
        results.append(row)
        print(
            f"{name:<14} {row['cpu_median_s']:>9.3f}s {row['cpu_min_s']:>6.3f}s "
            f"{row['wall_median_s']:>11.3f}s {row['wall_min_s']:>6.3f}s"
        )
    for row in results:
        print(f"\n{row['checkout']}: heaviest top-level imports (cumulative ms)")
        for module, ms in row["heaviest_imports_ms"]:
            print(f"  {ms:>8.1f}  {module}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
