"""Held-out accuracy of the simulator on the bundled serving measurements under load.

    python benchmarks/accuracy.py                     # the tables of docs/accuracy.md (~1 min)
    python benchmarks/accuracy.py --write-json        # also data/calibration/accuracy.json
    python benchmarks/accuracy.py --before OLD.json   # also the same runs under older profiles
    python benchmarks/accuracy.py --refit             # refit every fold first (~1 h on 1 core)

Each configuration (engine, GPU, model, precision, TP of one data set) is predicted by the
profile fitted without it (data/calibration/serving_folds.json); data sets an engine's profile
was never fitted on are predicted by the bundled profile. ``--before`` takes a profiles file
(e.g. ``git show f8f36af:data/calibration/profiles.json > old.json``, the profiles before
issue 37) and predicts every run with it: nothing of these data sets was fitted there.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import date
from pathlib import Path

from planner.latency.calibration import Measurement, read_measurements, select
from planner.latency.profile import (
    FIT_BOUNDS,
    Profile,
    bundled_profiles_path,
    choose_profile,
    load_bundled_profiles,
)
from planner.latency.serving_data import bundled_runs
from planner.latency.serving_points import ServingRun
from planner.latency.uncertainty import gpu_class
from planner.paths import data_dir
from planner.simulate.accuracy import (
    FITTED_ON,
    Fold,
    accuracy_groups,
    capacity_errors,
    fitted_runs,
    fold_errors,
    fold_groups,
    folds_path,
    load_folds,
    refit_group,
    refit_profile,
    save_folds,
    summary_rows,
)
from planner.simulate.serving_fit import SERVING_FIT_PARAMS, RunError, run_errors

ROOT = Path(__file__).resolve().parent.parent
STATS_SHOWN = ("mean", "p50", "p95", "p99", "p90")


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%" if value == value else "—"


def table(rows: Sequence[dict[str, object]]) -> str:
    lines = [
        "| data set | metric | stat | load | points | median abs | P90 abs | median signed |",
        "|---|---|---|---|--:|--:|--:|--:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['metric']} | {r['stat']} | {r['load']} | {r['points']} "
            f"| {_pct(r['median_abs'])} | {_pct(r['p90_abs'])} | {_pct(r['median_signed'])} |"  # type: ignore[arg-type]
        )
    return "\n".join(lines)


def capacity_table(errors: Sequence[RunError], runs: Sequence[object]) -> str:
    rows = capacity_errors(errors, runs)  # type: ignore[arg-type]
    over = [r for r in rows if r["error"] > 0.10]
    by_set: dict[str, list[float]] = {}
    for r in rows:
        by_set.setdefault(str(r["dataset"]), []).append(float(r["error"]))
    lines = [
        "| data set | sweeps | median abs | P90 abs | worst over | over +10% |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    import numpy as np

    for name, values in sorted(by_set.items()):
        a = np.abs(values)
        lines.append(
            f"| {name} | {len(values)} | {_pct(float(np.median(a)))} | "
            f"{_pct(float(np.percentile(a, 90)))} | {_pct(max(values))} | "
            f"{sum(v > 0.10 for v in values)} |"
        )
    text = "\n".join(lines)
    if over:
        text += "\n\nSweeps whose capacity is over-predicted by more than 10%:\n" + "\n".join(
            f"- {r['sweep']}: {_pct(float(r['error']))} at {r['clients']:g} clients" for r in over
        )
    return text


# engine -> (the bundled profile refitted under load, which GPUs' offline points anchor it,
# GPU-specific profiles of that engine the refit replaces)
REFITS = {
    "trtllm": ("trtllm-default", None, ("trtllm-h100-sxm",)),
    "vllm": ("vllm-default", "nvidia", ()),
}


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def fold_starts() -> dict[str, Profile]:
    """The profiles every fold starts from, per engine, as the folds file keeps them."""
    if not folds_path().exists():
        return {}
    payload = json.loads(folds_path().read_text(encoding="utf-8"))
    return {e: Profile.from_dict(p) for e, p in payload.get("starts", {}).items()}


FOLDS = {"trtllm": 4, "vllm": 2}  # folds of configurations held out together, per engine


def _fit_job(
    engine: str, held_out: tuple[str, ...], start: dict[str, object], max_evaluations: int
) -> tuple[tuple[str, ...], list[Fold] | Profile]:
    """One fit, in a worker process: the engine's whole profile (``held_out`` empty) or one
    fold. Reads the bundled data itself (cheap), so only names and numbers cross processes."""
    vendor = REFITS[engine][1]
    published, _ = read_measurements(data_dir() / "reference" / "published_latency.csv")
    points = select(published, engine=engine, gpu=None, vendor=vendor)
    runs = bundled_runs()
    profile = Profile.from_dict(start)
    if not held_out:
        train = fitted_runs(runs, engine)
        return held_out, refit_profile(train, profile, points, max_evaluations=max_evaluations)
    return held_out, refit_group(runs, profile, held_out, points, max_evaluations=max_evaluations)


def refit_bundled(
    runs: Sequence[ServingRun],
    bundled: list[Profile],
    max_evaluations: int,
    warm: dict[str, dict[str, float]],
    keep_folds: bool = False,
) -> list[Profile]:
    """Refit each engine's bundled profile under load (anchored by its offline points) and
    its folds, two fits at a time; write the profiles into data/calibration/profiles.json and
    the folds into serving_folds.json.

    Every fold starts from the profile as it was before any serving fit (fitted on the offline
    points only), so nothing a fold holds out reaches it through its start; the whole profile
    may start from ``warm`` (a previous fit's parameters), as it is never held out."""
    from concurrent.futures import ProcessPoolExecutor

    path = bundled_profiles_path()
    payload = json.loads(path.read_text(encoding="utf-8"))
    jobs: list[tuple[str, tuple[str, ...], dict[str, object], int]] = []
    starts = fold_starts()
    for engine, (name, _, _) in REFITS.items():
        # the folds' start: the profile before any serving fit, kept in the folds file
        before = starts.get(engine) or next(p for p in bundled if p.name == name)
        whole = before
        if engine in warm:
            whole = before.with_params(**{k: warm[engine][k] for k in SERVING_FIT_PARAMS})
        jobs.append((engine, (), whole.to_dict(), 2 * max_evaluations))
        configurations = sorted({r.configuration for r in fitted_runs(runs, engine)})
        for group in fold_groups(configurations, FOLDS[engine]) if not keep_folds else []:
            jobs.append((engine, tuple(group), before.to_dict(), max_evaluations))
    folds: list[Fold] = list(load_folds().values()) if keep_folds else []
    fitted: dict[str, Profile] = {}
    with ProcessPoolExecutor(max_workers=2) as pool:
        futures = {pool.submit(_fit_job, *job): job for job in jobs}
        for future, (engine, held_out, _, _) in futures.items():
            _, result = future.result()
            _say(f"fitted {engine} " + (f"without {', '.join(held_out)}" if held_out else "whole"))
            if isinstance(result, Profile):
                fitted[engine] = result
            else:
                folds += result
    for engine, (name, _, replaced) in REFITS.items():
        train = fitted_runs(runs, engine)
        entries = [e for e in payload["profiles"] if e["profile"]["name"] not in replaced]
        for entry in entries:
            if entry["profile"]["name"] == name:
                entry.update(
                    profile=replace(fitted[engine], name=name).to_dict(),
                    fitted_at=str(date.today()),
                    sources=[
                        *sorted({f"data/reference/{_file_of(r)}" for r in train}),
                        "data/reference/published_latency.csv",
                    ],
                    fitted=list(SERVING_FIT_PARAMS),
                    bounds={k: list(FIT_BOUNDS[k]) for k in SERVING_FIT_PARAMS},
                    points=len(train),
                )
        payload["profiles"] = entries
    save_folds(
        folds_path(),
        folds,
        {
            engine: starts.get(engine) or next(p for p in bundled if p.name == REFITS[engine][0])
            for engine in REFITS
        },
        f"serving fits holding configurations out ({FOLDS} folds per engine, each from the "
        f"profile before any serving fit), {date.today()}, benchmarks/accuracy.py --refit",
    )
    fitted_sets = [r for r in runs if r.dataset in FITTED_ON.get(r.engine, ())]
    errors = fold_errors(fitted_sets, {f.held_out: f for f in folds}, bundled)
    for entry in payload["profiles"]:
        engine = entry["profile"]["engine"]
        if entry["profile"]["name"] in {v[0] for v in REFITS.values()}:
            entry["heldout_test"] = heldout_summary([e for e in errors if e.run.engine == engine])
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return load_bundled_profiles()


def _file_of(run: ServingRun) -> str:
    return "vllm_h100_under_load.csv" if run.dataset == "vllm-h100" else "serving_under_load.csv"


def heldout_summary(errors: Sequence[RunError]) -> dict[str, object]:
    """The ``heldout_test`` block of a profiles file: latency statistics, absolute errors."""
    import numpy as np

    latency = [e for e in errors if not e.metric.startswith("output") and e.error == e.error]
    by_metric: dict[str, list[float]] = {}
    for e in latency:
        by_metric.setdefault(e.metric.split("_")[0].replace("itl", "tpot"), []).append(abs(e.error))
    values = [abs(e.error) for e in latency]
    return {
        "points": len(values),
        "method": "leave-one-configuration-out replays of serving runs under load",
        "mape": float(np.mean(values)),
        "median_ape": float(np.median(values)),
        "by_metric": {
            m: {"points": len(v), "mape": float(np.mean(v)), "median_ape": float(np.median(v))}
            for m, v in sorted(by_metric.items())
        },
    }


def _offline_median(points: Sequence[Measurement], profiles: list[Profile], engine: str) -> float:
    """Median absolute relative error of ``points``, each under its GPU's profile."""
    import numpy as np

    from planner.latency.calibration import log_errors

    errors = [
        float(np.expm1(log_errors([p], choose_profile(profiles, p.gpu, engine))[0])) for p in points
    ]
    return float(np.median(np.abs(errors)))


def offline_table(bundled: list[Profile], before: Path | None) -> str:
    """The offline published points (published_latency.csv) under the bundled profiles, which
    are anchored by them (in sample), and under the older profiles (``--before``)."""
    points, _ = read_measurements(data_dir() / "reference" / "published_latency.csv")
    old = None
    if before is not None:
        payload = json.loads(before.read_text(encoding="utf-8"))
        old = [Profile.from_dict(e["profile"]) for e in payload["profiles"]]
    lines = [
        "#### Offline published points (published_latency.csv; the anchor, so in sample)\n",
        "| engine | points | median abs now | median abs before |",
        "|---|--:|--:|--:|",
    ]
    for engine in ("trtllm", "vllm", "sglang"):
        chosen = [p for p in points if p.engine == engine]
        now = _offline_median(chosen, bundled, engine)
        then = _pct(_offline_median(chosen, old, engine)) if old else "—"
        lines.append(f"| {engine} | {len(chosen)} | {_pct(now)} | {then} |")
    return "\n".join(lines)


DOC = ROOT / "docs" / "accuracy.md"
BEGIN, END = "<!-- accuracy.py:begin -->", "<!-- accuracy.py:end -->"


def write_doc(text: str) -> None:
    """Replace the generated tables of docs/accuracy.md (between its markers)."""
    doc = DOC.read_text(encoding="utf-8")
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    DOC.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-json", action="store_true", help="write accuracy.json")
    parser.add_argument("--write-doc", action="store_true", help="update docs/accuracy.md")
    parser.add_argument("--before", type=Path, help="also predict every run with these profiles")
    parser.add_argument("--refit", action="store_true", help="refit every fold first")
    parser.add_argument(
        "--keep-folds",
        action="store_true",
        help="with --refit: refit only the bundled profiles, keeping the stored folds",
    )
    parser.add_argument("--max-evaluations", type=int, default=200)
    parser.add_argument(
        "--warm-start",
        type=Path,
        nargs="*",
        default=[],
        help="profile JSON files (Profile.to_dict) to start an engine's refit from",
    )
    args = parser.parse_args(argv)
    began = time.perf_counter()
    runs = bundled_runs()
    bundled = load_bundled_profiles()
    if args.refit:
        warm = {}
        for path in args.warm_start:
            params = json.loads(path.read_text(encoding="utf-8"))
            warm[params["engine"]] = params
        bundled = refit_bundled(runs, bundled, args.max_evaluations, warm, args.keep_folds)
    folds_by = load_folds()
    errors = fold_errors(runs, folds_by, bundled)
    report = [
        "### Held out (planner's profiles after issue 37)\n",
        table(summary_rows(errors, runs)),
        "\n#### Capacity (throughput at the load where the measured one peaked)\n",
        capacity_table(errors, runs),
    ]
    if args.before is not None:
        payload = json.loads(args.before.read_text(encoding="utf-8"))
        old = [Profile.from_dict(e["profile"]) for e in payload["profiles"]]
        used = [r for r in runs if not r.excluded]
        before = run_errors(used, lambda r: choose_profile(old, r.gpu, r.engine))
        report += [
            f"\n### Before ({args.before.name}: every run is held out there)\n",
            table(summary_rows(before, runs)),
            "\n#### Capacity before\n",
            capacity_table(before, runs),
        ]
    report += ["\n" + offline_table(bundled, args.before)]
    text = "\n".join(report)
    print(text)
    if args.write_doc:
        write_doc(text)
    if args.write_json:
        out = ROOT / "data" / "calibration" / "accuracy.json"
        payload = {
            "generated": str(date.today()),
            "method": (
                "leave-one-configuration-out: each configuration predicted by a profile fitted "
                "without it (data/calibration/serving_folds.json); signed relative errors "
                "(predicted - measured) / measured of the simulator's replay of each run"
            ),
            "sources": [
                "data/reference/serving_under_load.csv",
                "data/reference/vllm_h100_under_load.csv",
            ],
            "groups": accuracy_groups(errors, gpu_class),
        }
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        tmp.replace(out)
        print(f"\nwrote {out.relative_to(ROOT)}", file=sys.stderr)
    print(f"\n({time.perf_counter() - began:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
