"""Error tables of the bundled calibration profiles against the published measurements, for
docs/latency-model.md: per (engine, GPU, precision, metric) the median absolute error before
(optionally: a previous model's predictions), on held-out points and after fitting, plus the
per-operator errors. Refits exactly as `make profiles` does (about a minute).

    python benchmarks/latency_errors.py [--previous PREDICTIONS.json]

``--previous`` takes ``{"<csv row>": prediction}`` from an older planner (how the "before"
column of the docs was made: see the docs)."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from planner.latency.calibration import calibrate, read_measurements, select
from planner.latency.operators import markdown_table, read_operator_points
from planner.latency.profile import Profile
from planner.paths import data_dir

# (profile, engine, gpu, vendor, with operator timings, holdout): as the Makefile's profiles
FITS = [
    ("trtllm-default", "trtllm", None, None, True, 0.3),
    ("vllm-default", "vllm", None, "NVIDIA", True, 0.0),
    ("vllm-mi300x", "vllm", "MI300X", None, False, 0.3),
    ("sglang-default", "sglang", None, None, True, 0.3),
]


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", type=Path, help="older model's predictions by CSV row")
    args = parser.parse_args()
    previous = json.loads(args.previous.read_text()) if args.previous else {}
    points, excluded = read_measurements(data_dir() / "reference" / "published_latency.csv")
    kernels = read_operator_points()
    print(
        "| profile | engine | GPU | precision | metric | points (held out) | previous model "
        "| held-out | after fit |"
    )
    print("|---|---|---|---|---|---:|---:|---:|---:|")
    reports = {}
    for name, engine, gpu, vendor, ops, holdout in FITS:
        chosen = select(points, engine=engine, gpu=gpu, vendor=vendor)
        report = calibrate(
            chosen,
            Profile(name, engine, gpu),
            excluded=excluded,
            holdout=holdout,
            operators=kernels if ops else [],
        )
        reports[name] = report
        for group in report.summary()["by_group"]:
            olds = []
            for p in report.points:
                key = (p.engine, p.gpu, p.precision, p.metric)
                if key != tuple(group[k] for k in ("engine", "gpu", "precision", "metric")):
                    continue
                old = previous.get(str(p.row))
                if old is not None:
                    olds.append(abs(old / p.value - 1))
            print(
                f"| {name} | {group['engine']} | {group['gpu']} | {group['precision']} | "
                f"{group['metric']} | {group['points']} ({group['test_points']}) | "
                f"{pct(statistics.median(olds)) if olds else 'n/a'} | "
                f"{pct(group['heldout_test'])} | {pct(group['after'])} |"
            )
    print()
    print(
        "| profile | points | held-out points | held-out median | held-out MAPE | "
        "after median | after MAPE | worst after |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, report in reports.items():
        s = report.summary()
        h, a = s["heldout_test"], s["after_all"]
        print(
            f"| {name} | {s['points']} | {h['points']} | {pct(h['median_ape'])} | "
            f"{pct(h['mape'])} | {pct(a['median_ape'])} | {pct(a['mape'])} | "
            f"{a['worst_point']} ({pct(a['worst_ape'])}) |"
        )
    print()
    print("Operator timings under trtllm-default (after fitting):\n")
    print(markdown_table(reports["trtllm-default"].operators_after))


if __name__ == "__main__":
    main()
