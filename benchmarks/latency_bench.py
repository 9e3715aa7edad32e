"""Benchmark: latency-model predictions per second (the simulator prices every iteration).

Prices N decode steps (and N prefills, N mixed iterations) of random batch sizes and context
lengths in one vectorized call, repeated, and reports predictions per second. Target: at least
1,000,000 decode-step predictions per second.

    python benchmarks/latency_bench.py [--n 1000000] [--repeat 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from planner.latency.catalog import load_catalog
from planner.latency.model import Deployment, LatencyModel
from planner.latency.profile import choose_profile, load_bundled_profiles

TARGET_PER_S = 1_000_000


def best_rate(fn: Callable[[], object], n: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return n / min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="predictions per call")
    parser.add_argument("--repeat", type=int, default=5, help="calls; the fastest counts")
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args()

    catalog = load_catalog()
    results = {}
    rng = np.random.default_rng(0)
    batch = rng.integers(1, 257, args.n).astype(np.float64)
    context = batch * rng.integers(100, 8000, args.n)
    chunk = rng.integers(16, 8193, args.n).astype(np.float64)
    for gpu, model, precision, tp in [
        ("H100-SXM", "llama-3.1-8b", "fp8", 1),
        ("H100-SXM", "llama-3.1-70b", "bf16", 4),
        ("A100-80GB", "mixtral-8x7b", "bf16", 2),
    ]:
        deployment = Deployment(
            catalog.gpus.get(gpu), catalog.models.get(model), catalog.precisions.get(precision), tp
        )
        lat = LatencyModel(deployment, choose_profile(load_bundled_profiles(), gpu))
        label = f"{model} {precision} on {tp}x{gpu}"
        calls: dict[str, Callable[[], object]] = {
            "decode_per_s": functools.partial(lat.decode_time, batch, context),
            "prefill_per_s": functools.partial(lat.prefill_time, chunk),
            "mixed_per_s": functools.partial(
                lat.mixed_time, chunk, context / batch, batch, context
            ),
        }
        results[label] = {key: best_rate(call, args.n, args.repeat) for key, call in calls.items()}
    print(f"{'deployment':40s} {'decode/s':>14s} {'prefill/s':>14s} {'mixed/s':>14s}")
    for label, r in results.items():
        print(
            f"{label:40s} {r['decode_per_s']:>14,.0f} {r['prefill_per_s']:>14,.0f} "
            f"{r['mixed_per_s']:>14,.0f}"
        )
    slowest = min(r["decode_per_s"] for r in results.values())
    verdict = "met" if slowest >= TARGET_PER_S else "MISSED"
    print(f"target >= {TARGET_PER_S:,} decode predictions/s: {verdict} (slowest {slowest:,.0f})")
    if args.json:
        machine = {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "cpu": platform.processor(),
        }
        args.json.write_text(
            json.dumps({"machine": machine, "n": args.n, "results": results}, indent=2)
        )


if __name__ == "__main__":
    main()
