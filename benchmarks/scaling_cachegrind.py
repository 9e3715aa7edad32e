"""Benchmark: instructions and cache misses per simulated request, 1 to 1,000 replicas.

Wall and CPU time on a shared 2-core VM swing by up to 1.4x between runs of the same case, so
the fleet's per-request cost is also counted, deterministically, with valgrind's cachegrind:
instructions, L1 data misses and (with the cache set to this machine's 1 MB L2 per core,
``--ll``) misses that leave L2. Each fleet size runs twice under cachegrind, with ``--extra``
more requests the second time, at ``--per-replica-rps`` per replica (the arrivals and lengths
of ``simulate_bench.py --scaling``); the difference over the difference in requests cancels
the interpreter's start, the imports and the fleet's set-up, leaving what one more request
costs. Printed per size: instructions, L1 and L2 misses per request, each as a ratio to one
replica; then the functions that account for most of the largest fleet's surplus over one
replica, by instructions and by L2 misses.

    python benchmarks/scaling_cachegrind.py [--replicas 1,60,1000] [--extra 100000]
        [--top 12] [--json OUT]

Needs valgrind; the runs go two at a time (about 10 minutes on this machine at the defaults).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from simulate_bench import fleet_sizes

HERE = Path(__file__).resolve().parent
EVENTS = ("Ir", "D1mr", "D1mw", "DLmr", "DLmw")
CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
import simulate_bench
from planner.simulate import engine
n, replicas, rps = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
print(engine.IMPLEMENTATION, simulate_bench.replica_cpu(n, rps * replicas, replicas)["wakeups"])
"""


def counted(n: int, replicas: int, rps: float, ll: str, out: Path) -> dict[str, Any]:
    """One run of ``n`` requests on ``replicas`` under cachegrind: per-function event totals."""
    done = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=yes",
            "--D1=32768,8,64",
            f"--LL={ll}",
            f"--cachegrind-out-file={out}",
            sys.executable,
            "-c",
            CHILD,
            str(HERE),
            str(n),
            str(replicas),
            str(rps),
        ],
        # one BLAS thread: its idle workers spin, counted as the process's instructions
        env={**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"scaling_cachegrind: the run of {n} on {replicas} failed:\n{done.stderr}")
    build, wakeups = done.stdout.split()
    return {"build": build, "wakeups": int(wakeups), "functions": functions(out)}


def functions(path: Path) -> dict[str, Counter[str]]:
    """Event totals per function of a cachegrind output file (``fn=`` blocks of line counts)."""
    names: list[str] = []
    totals: dict[str, Counter[str]] = {}
    current: Counter[str] | None = None
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith("fn="):
            current = totals.setdefault(line[3:], Counter())
        elif current is not None and line[:1].isdigit():
            for name, value in zip(names, line.split()[1:], strict=False):
                current[name] += int(value)
    return totals


def per_request(small: dict[str, Any], big: dict[str, Any], extra: int) -> dict[str, Any]:
    """What one more request costs: the two runs' difference over ``extra`` requests."""
    by_function: dict[str, dict[str, float]] = {}
    for name in set(small["functions"]) | set(big["functions"]):
        a = small["functions"].get(name, Counter())
        b = big["functions"].get(name, Counter())
        by_function[name] = {event: (b[event] - a[event]) / extra for event in EVENTS}
    total = {event: sum(f[event] for f in by_function.values()) for event in EVENTS}
    return {
        "build": big["build"],
        "instructions": total["Ir"],
        "l1_misses": total["D1mr"] + total["D1mw"],
        "l2_misses": total["DLmr"] + total["DLmw"],
        "wakeups": (big["wakeups"] - small["wakeups"]) / extra,
        "functions": by_function,
    }


def cost(counts: dict[str, float], event: str) -> float:
    """``Ir``, or the read and write misses of a cache level (``D1``, ``DL``) together."""
    return counts["Ir"] if event == "Ir" else counts[f"{event}mr"] + counts[f"{event}mw"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--replicas", type=fleet_sizes, default="1,60,1000", help="fleet sizes, comma-separated"
    )
    parser.add_argument("--per-replica-rps", type=float, default=5.0)
    parser.add_argument("--extra", type=int, default=100_000, help="requests between the runs")
    parser.add_argument("--ll", default="1048576,16,64", help="the cache behind L1: size,ways,line")
    parser.add_argument("--top", type=int, default=12, help="functions of the surplus shown")
    parser.add_argument("--json", type=Path, help="also write the counts here")
    args = parser.parse_args()
    sizes: list[int] = args.replicas
    if shutil.which("valgrind") is None:
        sys.exit("scaling_cachegrind: needs valgrind (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="cachegrind-") as tmp:
        jobs = []
        for replicas in sizes:
            # the first run already past the fleet's warm-up: 100 requests a replica
            small = max(20_000, 100 * replicas)
            jobs += [(small, replicas), (small + args.extra, replicas)]
        print(f"{len(jobs)} runs under cachegrind, two at a time ...", file=sys.stderr)
        with ThreadPoolExecutor(max_workers=2) as pool:
            runs = list(
                pool.map(
                    lambda job: counted(
                        job[0], job[1], args.per_replica_rps, args.ll, Path(tmp) / f"{job}.out"
                    ),
                    jobs,
                )
            )
    results = {
        replicas: per_request(runs[2 * k], runs[2 * k + 1], args.extra)
        for k, replicas in enumerate(sizes)
    }
    one = results[sizes[0]]
    print(
        f"per simulated request ({args.per_replica_rps:g} requests/s per replica, "
        f"{one['build']} build; ratio to {sizes[0]} replica(s))"
    )
    print(
        f"{'replicas':>8} {'instructions':>18} {'L1 misses':>14} {'L2 misses':>12} {'wake-ups':>9}"
    )
    for replicas, r in results.items():
        ratios = [
            r[key] / max(one[key], 1e-9) for key in ("instructions", "l1_misses", "l2_misses")
        ]
        print(
            f"{replicas:>8} {r['instructions']:>10,.0f} ({ratios[0]:.2f})"
            f" {r['l1_misses']:>7.0f} ({ratios[1]:.2f}) {r['l2_misses']:>5.1f} ({ratios[2]:.2f})"
            f" {r['wakeups']:>9.2f}"
        )
    largest = results[sizes[-1]]
    surplus = {
        name: {
            event: largest["functions"][name][event]
            - one["functions"].get(name, dict.fromkeys(EVENTS, 0.0))[event]
            for event in EVENTS
        }
        for name in largest["functions"]
    }
    top: list[dict[str, Any]] = []
    for event, label in (("Ir", "instructions"), ("DL", "L2 misses")):
        print(f"\nthe surplus of {sizes[-1]} replicas over {sizes[0]}, per request, by {label}:")
        print(f"{'instructions':>12} {'L1 misses':>10} {'L2 misses':>10}  function")
        ranked = sorted(surplus.items(), key=lambda item: -abs(cost(item[1], event)))
        for name, s in ranked[: args.top]:
            print(f"{s['Ir']:>12,.0f} {cost(s, 'D1'):>10.1f} {cost(s, 'DL'):>10.2f}  {name[:90]}")
            top.append({"by": label, "function": name, **s})
    if args.json:
        totals = {
            str(k): {key: v for key, v in r.items() if key != "functions"}
            for k, r in results.items()
        }
        args.json.write_text(json.dumps({"per_request": totals, "surplus": top}, indent=2))


if __name__ == "__main__":
    main()
