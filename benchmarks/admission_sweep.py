"""Served throughput near capacity under each admission policy, in 0.5% load steps.

Reproduces the tables of docs/simulator.md ("Admission policies"): a fleet of ``--replicas``
replicas of a catalog deployment (default: llama-3.1-8b FP8 on H100-SXM, sized as vLLM sizes it)
with Poisson arrivals at a share of the latency model's saturation rate, from ``--low`` to
``--high`` in ``--step`` steps. For each step and policy it prints the output tokens per second
finished while requests still arrive (the served throughput) and the preemptions. A cliff is a
step that loses served throughput while the load grows.

    python benchmarks/admission_sweep.py [--requests 20000] [--replicas 2] [--low 0.78]
        [--high 0.82] [--step 0.005] [--input 1000] [--output 1000]
"""

from __future__ import annotations

import argparse
import itertools
from datetime import UTC, datetime

import numpy as np

from planner.latency.catalog import load_catalog
from planner.latency.engines import deploy, get_engine
from planner.latency.model import LatencyModel
from planner.latency.profile import choose_profile, load_bundled_profiles
from planner.latency.serving import saturation_qps
from planner.simulate.engine import VLLM_WATERMARK, EngineConfig, RooflineStepTimes
from planner.simulate.fleet import Fleet, FleetConfig
from planner.simulate.workload import Workload

POLICIES = {
    "preempt, no watermark (before)": ("preempt", 0.0),
    f"preempt, {VLLM_WATERMARK:.0%} watermark": ("preempt", VLLM_WATERMARK),
    "no_evict": ("no_evict", 0.0),
}


def served(
    workload: Workload, times: RooflineStepTimes, config: EngineConfig, replicas: int
) -> tuple[float, int]:
    """(output tokens/s finished while requests arrive, preemptions) of one run."""
    chunks: list[dict[str, np.ndarray]] = []
    Fleet(
        workload, times, config, FleetConfig(replicas={"on-demand": replicas}), chunks.append
    ).run()
    columns = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
    window = float(workload.arrival_s[-1])
    done = columns["finish_s"] <= window
    return float(columns["output_tokens"][done].sum() / window), int(columns["preemptions"].sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="H100-SXM")
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--precision", default="fp8")
    parser.add_argument("--engine", default="vllm", help="whose sizing (memory, batch limits)")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--input", type=int, default=1000, help="mean prompt tokens (+-50%)")
    parser.add_argument("--output", type=int, default=1000, help="mean output tokens (geometric)")
    parser.add_argument("--low", type=float, default=0.78)
    parser.add_argument("--high", type=float, default=0.82)
    parser.add_argument("--step", type=float, default=0.005)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    catalog = load_catalog()
    deployment = deploy(
        get_engine(args.engine),
        catalog.gpus.get(args.gpu),
        catalog.models.get(args.model),
        catalog.precisions.get(args.precision),
    )
    model = LatencyModel(deployment, choose_profile(load_bundled_profiles(), args.gpu))
    capacity = saturation_qps(model, args.input, args.output, deployment.max_seqs)
    times = RooflineStepTimes(model, deployment.max_seqs)
    rng = np.random.default_rng(args.seed)
    n = args.requests
    gaps = rng.exponential(1.0, n)
    inputs = rng.integers(args.input // 2, args.input * 3 // 2, n).astype(np.int64)
    outputs = rng.geometric(1 / args.output, n).astype(np.int64)
    print(
        f"{args.replicas} x {args.model} {args.precision} on {args.gpu} ({args.engine} sizing): "
        f"{deployment.kv_capacity_tokens:,} KV tokens, {deployment.max_seqs} sequences, "
        f"saturation {capacity:.3f} req/s a replica; {n:,} requests"
    )
    loads = np.arange(args.low, args.high + args.step / 2, args.step)
    table: dict[str, list[tuple[float, int]]] = {}
    for label, (admission, watermark) in POLICIES.items():
        config = EngineConfig(
            max_seqs=deployment.max_seqs,
            max_batched_tokens=deployment.max_batched_tokens,
            kv_capacity_tokens=deployment.kv_capacity_tokens,
            admission=admission,
            watermark=watermark,
        )
        table[label] = []
        for load in loads:
            arrival = np.cumsum(gaps / (capacity * args.replicas * load))
            arrival -= arrival[0]
            workload = Workload(
                start=datetime(2026, 1, 1, tzinfo=UTC),
                arrival_s=arrival,
                input_tokens=inputs,
                output_tokens=outputs,
                class_index=np.zeros(n, np.int16),
                classes=("default",),
            )
            table[label].append(served(workload, times, config, args.replicas))
    print("| load | " + " | ".join(table) + " |")
    print("|---|" + "---|" * len(table))
    for i, load in enumerate(loads):
        cells = " | ".join(f"{rows[i][0]:,.0f} ({rows[i][1]:,})" for rows in table.values())
        print(f"| {load:.3f} | {cells} |")
    for label, rows in table.items():
        worst = min(b[0] / a[0] - 1 for a, b in itertools.pairwise(rows))
        print(f"{label}: worst step {worst:+.1%}, {sum(p for _, p in rows):,} preemptions")


if __name__ == "__main__":
    main()
