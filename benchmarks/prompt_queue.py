"""The prompt queue behind the least-loaded router: the screen's fit against the simulator.

Reproduces the tables of docs/recommender.md ("The prompt queue and the fleet's size"), from
which ``prompt_queue`` in ``planner/recommend/screen.py`` is fitted:

1. For five deployments, fleets of 1, 2, 4 and 8 replicas at 15%, 30% and 50% of a replica's
   full-batch throughput (Poisson arrivals, Azure conversation lengths, ``--requests`` each):
   the share of arrivals that wait for prompts ahead (TTFT over the prompt's own prefill by more
   than two decode steps) and their mean wait beyond that, each as a ratio to one replica's at
   the same load, against the screen's ratios.
2. For five (deployment, load) points on 1 to 8 replicas: the screen's capacity at the
   simulated P99 TTFT as a ratio to the simulated load (1: the screen predicts the simulator's
   P99 TTFT exactly at that load; below 1: conservative).

    python benchmarks/prompt_queue.py [--requests 20000] [--fleet-requests 40000] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
import pandas as pd
from screen_accuracy import CASES, SAMPLE

from planner.latency.model import LatencyModel
from planner.latency.profile import choose_profile, load_bundled_profiles
from planner.recommend.screen import (
    COUNT_SCALE,
    Capacity,
    Lengths,
    jsq_smoothing,
    prompt_queue,
    replica_capacity,
)
from planner.simulate.fleet import FleetConfig
from planner.simulate.metrics import SLO
from planner.simulate.run import ServingSpec, simulate
from planner.simulate.workload import synthetic
from planner.workload.rates import RateCurve

SWEEP_CASES = (0, 1, 6, 7, 8)  # indexes into screen_accuracy.CASES
LOADS = (0.15, 0.3, 0.5)  # shares of a replica's full-batch throughput
FLEETS = (1, 2, 4, 8)
COUNTS = (0.5, 1.0, 2.0, 4.0, 8.0)  # arrivals a window expects, for the index of dispersion
FLEET_POINTS = ((7, 2.11), (7, 0.5), (7, 0.3), (4, 15.0), (8, 1.5), (0, 1.5), (3, 4.0))


def lengths() -> Lengths:
    frame = pd.read_csv(SAMPLE)
    return Lengths(
        frame["ContextTokens"].to_numpy(np.int64), frame["GeneratedTokens"].to_numpy(np.int64)
    )


def model_of(spec: ServingSpec) -> LatencyModel:
    return LatencyModel(spec.deployment(), choose_profile(load_bundled_profiles(), spec.gpu))


def screen(
    spec: ServingSpec, model: LatencyModel, sample: Lengths, slo: SLO, replicas: int = 1
) -> Capacity:
    """The screen's capacity of one replica of ``spec`` in a fleet of ``replicas``."""
    return replica_capacity(
        model,
        sample,
        slo,
        max_seqs=spec.deployment().max_seqs,
        chunked_prefill=spec.chunked_prefill,
        replicas=replicas,
        admission=spec.admission_policy()[0],
        watermark=spec.watermark(),
    )


def served(
    spec: ServingSpec, sample: Lengths, rps: float, replicas: int, requests: int
) -> pd.DataFrame:
    """Every request of ``requests`` Poisson arrivals at ``rps`` per replica (seed 1)."""
    hours = requests / (rps * replicas * 3600.0)
    curve = RateCurve(
        datetime(2025, 1, 6, tzinfo=UTC), np.full(math.ceil(hours), rps * replicas * 3600.0)
    )
    workload = synthetic(curve, sample.inputs, sample.outputs, seed=1).window(0.0, hours * 3600)
    profile = choose_profile(load_bundled_profiles(), spec.gpu)
    with TemporaryDirectory() as folder:
        out = Path(folder) / "requests.parquet"
        fleet = FleetConfig(replicas={"on-demand": replicas})
        simulate(workload, spec, fleet, profile, slos={}, requests_out=out)
        return pd.read_parquet(out)


def waiting(spec: ServingSpec, frame: pd.DataFrame, model: LatencyModel) -> tuple[float, float]:
    """(share of arrivals that waited for prompts ahead, their mean wait beyond the cut)."""
    own = model.profile.request_overhead_ms * 1e-3 + np.asarray(
        model.prefill_time(frame["input_tokens"].to_numpy(np.float64))
    )
    beyond = frame["ttft_s"].to_numpy() - own
    # the iteration in progress and a chunk's ride-along delay every arrival by up to a step
    cut = 2 * float(model.decode_time(1.0, float(frame["input_tokens"].mean())))
    waited = beyond[beyond > cut]
    return len(waited) / len(beyond), float(waited.mean() - cut) if len(waited) else 0.0


def dispersion(frame: pd.DataFrame, mean_count: float) -> float:
    """Index of dispersion of each replica's arrivals in windows expecting ``mean_count`` of
    them (20,000 random windows per replica), averaged over the replicas."""
    rng = np.random.default_rng(0)
    span = float(frame["arrival_s"].max() - frame["arrival_s"].min())
    window = mean_count * span * frame["replica"].nunique() / len(frame)
    indexes = []
    for _, arrivals in frame.groupby("replica")["arrival_s"]:
        times = np.sort(arrivals.to_numpy())
        starts = rng.uniform(times[0], times[-1] - window, 20_000)
        counts = np.searchsorted(times, starts + window) - np.searchsorted(times, starts)
        indexes.append(counts.var() / counts.mean())
    return float(np.mean(indexes))


def sweep(sample: Lengths, requests: int) -> list[dict[str, Any]]:
    rows = []
    for index in SWEEP_CASES:
        spec = CASES[index]
        model = model_of(spec)
        full = screen(spec, model, sample, SLO(ttft_s=None, tpot_s=None)).max_rps
        mean_prefill = float(np.mean(model.prefill_time(sample.inputs.astype(np.float64))))
        for load in LOADS:
            rps = load * full
            rho = np.array([rps * mean_prefill])
            alone_share, alone_backlog = (float(x[0]) for x in prompt_queue(rho, np.ones(1), 1))
            lone = waiting(spec, served(spec, sample, rps, 1, requests), model)
            for replicas in FLEETS[1:]:
                share, backlog = (float(x[0]) for x in prompt_queue(rho, np.ones(1), replicas))
                frame = served(spec, sample, rps, replicas, requests)
                measured = waiting(spec, frame, model)
                smoothing = jsq_smoothing(replicas)
                rows.append(
                    {
                        "deployment": describe(spec),
                        "rps": round(rps, 3),
                        "rho": round(float(rho[0]), 3),
                        "replicas": replicas,
                        "share_vs_1": round(measured[0] / lone[0], 3),
                        "screen_share_vs_1": round(share / alone_share, 3),
                        "wait_vs_1": round(measured[1] / lone[1], 3),
                        "screen_wait_vs_1": round(backlog / alone_backlog, 3),
                        "dispersion": [round(dispersion(frame, m), 3) for m in COUNTS],
                        "screen_dispersion": [
                            round(1 - smoothing * m / (m + COUNT_SCALE), 3) for m in COUNTS
                        ],
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    return rows


def fleet_sizes(sample: Lengths, requests: int) -> list[dict[str, Any]]:
    rows = []
    for index, rps in FLEET_POINTS:
        spec = CASES[index]
        model = model_of(spec)
        for replicas in FLEETS:
            frame = served(spec, sample, rps, replicas, requests)
            ttft = float(np.quantile(frame["ttft_s"], 0.99))
            capacity = screen(spec, model, sample, SLO(ttft_s=ttft, tpot_s=None), replicas)
            rows.append(
                {
                    "deployment": describe(spec),
                    "rps": rps,
                    "replicas": replicas,
                    "sim_p99_ttft_s": round(ttft, 3),
                    "ratio": round(capacity.rps / rps, 3),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def describe(spec: ServingSpec) -> str:
    return f"{spec.model} {spec.precision} TP{spec.tp} on {spec.gpu}" + (
        "" if spec.chunked_prefill else ", no chunked prefill"
    )


def print_tables(sweep_rows: list[dict[str, Any]], fleet_rows: list[dict[str, Any]]) -> None:
    print(
        "\n| deployment | rho | replicas | waiting share vs 1 replica: simulated / screen "
        "| mean wait vs 1 replica: simulated / screen |"
    )
    print("|---|---:|---:|---|---|")
    for r in sweep_rows:
        print(
            f"| {r['deployment']} | {r['rho']:.2f} | {r['replicas']} | "
            f"{r['share_vs_1']:.2f} / {r['screen_share_vs_1']:.2f} | "
            f"{r['wait_vs_1']:.2f} / {r['screen_wait_vs_1']:.2f} |"
        )
    share_errors = [r["screen_share_vs_1"] / r["share_vs_1"] - 1 for r in sweep_rows]
    wait_errors = [r["screen_wait_vs_1"] / r["wait_vs_1"] - 1 for r in sweep_rows]
    print(
        f"\nscreen / simulated, waiting share: mean {np.mean(share_errors):+.1%}, "
        f"worst {max(share_errors, key=abs):+.1%}; mean wait: mean {np.mean(wait_errors):+.1%}, "
        f"worst {max(wait_errors, key=abs):+.1%}"
    )
    print("\nindex of dispersion of a replica's arrivals, windows expecting", COUNTS, "of them:")
    print("| replicas | simulated: mean (range over deployments and loads) | screen |")
    print("|---:|---|---|")
    for replicas in FLEETS[1:]:
        rows = [r for r in sweep_rows if r["replicas"] == replicas]
        measured = np.array([r["dispersion"] for r in rows])
        cells = ", ".join(
            f"{mean:.2f} ({low:.2f}-{high:.2f})"
            for mean, low, high in zip(
                measured.mean(axis=0), measured.min(axis=0), measured.max(axis=0), strict=True
            )
        )
        screen = ", ".join(f"{x:.2f}" for x in rows[0]["screen_dispersion"])
        print(f"| {replicas} | {cells} | {screen} |")
    print(
        "\n| deployment, load per replica | " + " | ".join(f"{n} replicas" for n in FLEETS) + " |"
    )
    print("|---|" + "---|" * len(FLEETS))
    for i in range(0, len(fleet_rows), len(FLEETS)):
        group = fleet_rows[i : i + len(FLEETS)]
        cells = " | ".join(f"{r['sim_p99_ttft_s']:.3f} s: {r['ratio']:.2f}" for r in group)
        print(f"| {group[0]['deployment']}, {group[0]['rps']} req/s | {cells} |")
    ratios = [r["ratio"] for r in fleet_rows if r["replicas"] > 1]
    print(f"\n2-8 replicas: screen capacity / load {min(ratios):.2f}-{max(ratios):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="per sweep simulation")
    parser.add_argument("--fleet-requests", type=int, default=40_000, help="per fleet point")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sample = lengths()
    sweep_rows = sweep(sample, args.requests)
    fleet_rows = fleet_sizes(sample, args.fleet_requests)
    print_tables(sweep_rows, fleet_rows)
    if args.json:
        args.json.write_text(
            json.dumps({"sweep": sweep_rows, "fleet_sizes": fleet_rows}, indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
