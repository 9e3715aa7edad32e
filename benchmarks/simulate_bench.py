"""Benchmark: simulated requests per second of wall time, and a week of traffic.

1. One continuously batched replica (llama-3.1-8b FP8 on an H100, chunked prefill) serving
   Poisson arrivals with Azure-conversation-like lengths: simulated requests per wall second
   (target: at least 100,000 per core).
2. One week at 20 requests/s (about 12 million requests) on a fleet of 4 replicas, per-request
   results streamed to Parquet: wall time (target: under 3 minutes) and peak memory, measured
   in a child process.

    python benchmarks/simulate_bench.py [--requests 300000] [--week] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from planner.latency.profile import choose_profile, load_bundled_profiles
from planner.simulate.fleet import FleetConfig
from planner.simulate.run import ServingSpec, simulate
from planner.simulate.workload import Workload

SERVING = ServingSpec(gpu="H100-SXM", model="llama-3.1-8b", precision="fp8")


def poisson_workload(n: int, rate: float, seed: int = 0) -> Workload:
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    # lognormal lengths shaped like the Azure conversation trace (means ~1155 in, ~211 out)
    inputs = np.clip(rng.lognormal(np.log(1155) - 0.405, 0.9, n), 1, 16000).astype(np.int64)
    outputs = np.clip(rng.lognormal(np.log(211) - 0.36, 0.85, n), 1, 2000).astype(np.int64)
    return Workload(
        start=datetime(2024, 1, 1, tzinfo=UTC),
        arrival_s=arrivals,
        input_tokens=inputs,
        output_tokens=outputs,
        class_index=np.zeros(n, dtype=np.int16),
        classes=("default",),
    )


def run(n: int, rate: float, replicas: int, out: Path | None) -> dict[str, Any]:
    workload = poisson_workload(n, rate)
    profile = choose_profile(load_bundled_profiles(), "H100-SXM")
    fleet = FleetConfig(replicas={"on-demand": replicas})
    result = simulate(workload, SERVING, fleet, profile, requests_out=out)
    summary = result.summary["all"]
    return {
        "requests": n,
        "rate_rps": rate,
        "replicas": replicas,
        "simulated_hours": result.simulated_s / 3600,
        "wall_s": result.wall_s,
        "requests_per_wall_s": n / result.wall_s,
        "p99_ttft_ms": summary["ttft"]["p99"] * 1e3,
        "p50_tpot_ms": summary["tpot"]["p50"] * 1e3,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300_000)
    parser.add_argument("--week", action="store_true", help="also simulate a week at 20 req/s")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # n rate replicas
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.child:
        n, rate, replicas = int(args.child[0]), float(args.child[1]), int(args.child[2])
        with tempfile.TemporaryDirectory() as folder:
            print(json.dumps(run(n, rate, replicas, Path(folder) / "requests.parquet")))
        return
    results = []
    for n, rate, replicas in [(args.requests, 10.0, 1), (args.requests, 20.0, 1)]:
        results.append(run(n, rate, replicas, None))
    if args.week:
        began = time.perf_counter()
        child = subprocess.run(
            [sys.executable, __file__, "--child", str(7 * 24 * 3600 * 20), "20", "4"],
            capture_output=True,
            text=True,
            check=True,
        )
        week = json.loads(child.stdout.strip().splitlines()[-1])
        week["process_wall_s"] = time.perf_counter() - began
        results.append(week)
    columns = ("requests", "rate", "replicas", "sim h", "wall s", "req/wall s", "P99 TTFT ms")
    print(" ".join(f"{c:>11}" for c in (*columns, "peak MiB")))
    for r in results:
        cells = (
            f"{r['requests']:,}",
            f"{r['rate_rps']:g}",
            str(r["replicas"]),
            f"{r['simulated_hours']:.1f}",
            f"{r['wall_s']:.1f}",
            f"{r['requests_per_wall_s']:,.0f}",
            f"{r['p99_ttft_ms']:.1f}",
            f"{r['peak_rss_mib']:.0f}",
        )
        print(" ".join(f"{c:>11}" for c in cells))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
