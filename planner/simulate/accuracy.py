"""How wrong the simulator is, held out: each configuration of each bundled serving data set is
predicted by a profile fitted without any of its points, and the errors are summarized the way
docs/accuracy.md and the error bars (planner.latency.uncertainty) read them.

The fold profiles are stored (``data/calibration/serving_folds.json``) with the configurations
each was fitted on, so the check is quick (one replay of every run) and anyone can see that no
point used in a fit is counted as held out; ``refit_group`` recomputes one fold
(``benchmarks/accuracy.py --refit``, all of them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from planner.latency.calibration import Measurement, log_errors
from planner.latency.profile import Profile, ProfileError, choose_profile
from planner.latency.serving_points import ServingRun
from planner.paths import data_dir
from planner.simulate.serving_fit import (
    SERVING_FIT_PARAMS,
    RunError,
    fit_serving,
    run_errors,
)

# engine -> the data sets its bundled profile is fitted on (the others are only predicted)
FITTED_ON: dict[str, tuple[str, ...]] = {
    "trtllm": ("nim-genaiperf", "nim-docs", "mlperf-llama2-70b"),
    "vllm": ("vllm-h100",),
}
TAIL_STATS = ("p90", "p95", "p99")  # pooled in the error bars' groups (accuracy_groups)
HIGH_LOAD = 0.9  # a run at or above this share of its sweep's measured capacity is "high load"
MAX_FOLDS_BYTES = 4 * 1024 * 1024
ANCHOR_SHARE = 0.25  # weight of the offline measurements against the serving runs in a fit


def folds_path() -> Path:
    return data_dir() / "calibration" / "serving_folds.json"


@dataclass(frozen=True)
class Fold:
    """A profile fitted without one configuration, and what it was fitted on."""

    held_out: str
    profile: Profile
    trained_on: tuple[str, ...]


def fitted_runs(runs: Iterable[ServingRun], engine: str) -> list[ServingRun]:
    """The used runs an engine's bundled profile is fitted on."""
    datasets = FITTED_ON.get(engine, ())
    return [r for r in runs if r.engine == engine and r.dataset in datasets and not r.excluded]


def anchor(
    points: Sequence[Measurement], serving_residuals: int
) -> Callable[[Profile], np.ndarray] | None:
    """The offline measurements (published_latency.csv) an engine's profile keeps matching
    while it is fitted under load: their log errors, weighted to count as
    :data:`ANCHOR_SHARE` of the serving residuals (so B200, FP4 or MoE points, which no serving
    run covers, still hold the parameters only they inform)."""
    if not points:
        return None
    weight = math.sqrt(ANCHOR_SHARE * serving_residuals / len(points))
    return lambda profile: weight * log_errors(points, profile)


def refit_profile(
    runs: Sequence[ServingRun],
    start: Profile,
    points: Sequence[Measurement] = (),
    *,
    max_evaluations: int | None = None,
) -> Profile:
    """``start`` fitted on ``runs`` (serving under load) anchored by ``points``."""
    residuals = sum(len(r.measured) for r in runs)
    return fit_serving(
        runs,
        start,
        SERVING_FIT_PARAMS,
        max_evaluations=max_evaluations,
        extra=anchor(points, residuals),
    )


def fold_groups(configurations: Sequence[str], groups: int) -> list[list[str]]:
    """``configurations`` dealt round robin (sorted) into at most ``groups`` folds: each fold
    holds its configurations out together, so a fold sees none of its data; with as many
    groups as configurations, leave-one-configuration-out."""
    ordered = sorted(configurations)
    count = max(1, min(groups, len(ordered)))
    return [ordered[i::count] for i in range(count)]


def refit_group(
    runs: Sequence[ServingRun],
    start: Profile,
    held_out: Sequence[str],
    points: Sequence[Measurement] = (),
    *,
    max_evaluations: int | None = None,
) -> list[Fold]:
    """One fold: ``start`` fitted on the engine's runs outside ``held_out`` (anchored by the
    offline ``points``, which hold none of the serving runs), for each configuration held out."""
    train = [r for r in fitted_runs(runs, start.engine) if r.configuration not in held_out]
    profile = refit_profile(train, start, points, max_evaluations=max_evaluations)
    trained = tuple(sorted({r.configuration for r in train}))
    return [Fold(configuration, profile, trained) for configuration in held_out]


def save_folds(path: Path, folds: Sequence[Fold], starts: dict[str, Profile], note: str) -> None:
    """The folds, with the profile each engine's folds started from (refits start there)."""
    payload = {
        "note": note,
        "starts": {engine: profile.to_dict() for engine, profile in starts.items()},
        "folds": [
            {
                "held_out": f.held_out,
                "trained_on": list(f.trained_on),
                "profile": f.profile.to_dict(),
            }
            for f in folds
        ],
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def load_folds(path: Path | None = None) -> dict[str, Fold]:
    """The stored folds, by held-out configuration."""
    path = path or folds_path()
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FOLDS_BYTES + 1)
        if len(raw) > MAX_FOLDS_BYTES:
            raise ValueError("larger than 4 MiB")
        payload = json.loads(raw)
        folds = [
            Fold(f["held_out"], Profile.from_dict(f["profile"]), tuple(f["trained_on"]))
            for f in payload["folds"]
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ProfileError(f"{path}: not a readable folds file ({exc})") from None
    return {f.held_out: f for f in folds}


def fold_errors(
    runs: Sequence[ServingRun], folds: dict[str, Fold], bundled: Sequence[Profile]
) -> list[RunError]:
    """Every used run predicted by the fold that left its configuration out, or, where its
    engine's profile was never fitted on its data set, by the bundled profile."""

    def profile_for(run: ServingRun) -> Profile:
        if run.dataset in FITTED_ON.get(run.engine, ()):
            return folds[run.configuration].profile
        return choose_profile(list(bundled), run.gpu, run.engine)

    return run_errors([r for r in runs if not r.excluded], profile_for)


def sweep_of(run: ServingRun) -> str:
    """One sweep: a configuration at one input/output shape, over its loads."""
    return f"{run.configuration}/{run.input_tokens:g}-{run.output_tokens:g}"


def capacities(runs: Iterable[ServingRun]) -> dict[str, float]:
    """Each sweep's measured capacity: its highest output throughput."""
    out: dict[str, float] = {}
    for run in runs:
        tput = run.measured.get("output_tokens_per_s")
        if tput is not None and run.load_kind == "concurrency":
            out[sweep_of(run)] = max(out.get(sweep_of(run), 0.0), tput)
    return out


def load_band(run: ServingRun, capacity: dict[str, float]) -> str:
    """ "high" at or above 90% of the sweep's measured capacity, "low" below, "" unknown."""
    tput = run.measured.get("output_tokens_per_s")
    top = capacity.get(sweep_of(run))
    if tput is None or not top:
        return ""
    return "high" if tput >= HIGH_LOAD * top else "low"


def metric_and_stat(name: str) -> tuple[str, str]:
    """("ttft", "p95") of "ttft_p95"; ITL is the per-token time; throughput is "capacity"."""
    if name == "output_tokens_per_s":
        return "throughput", "mean"
    metric, _, stat = name.partition("_")
    return ("tpot" if metric == "itl" else metric), stat


def _abs_stats(errors: Sequence[float]) -> dict[str, float]:
    values = np.abs(np.asarray(errors, dtype=np.float64))
    finite = values[np.isfinite(values)]
    return {
        "points": len(values),
        "median_abs": float(np.median(finite)) if len(finite) else math.nan,
        "p90_abs": float(np.percentile(finite, 90)) if len(finite) else math.nan,
        "median_signed": float(np.median(np.asarray(errors)[np.isfinite(errors)]))
        if len(finite)
        else math.nan,
    }


def summary_rows(errors: Sequence[RunError], runs: Sequence[ServingRun]) -> list[dict[str, Any]]:
    """Per data set, metric, statistic and load band (all, low, high): the held-out median and
    90th percentile of the absolute error, and the median signed error."""
    capacity = capacities(runs)
    groups: dict[tuple[str, str, str, str], list[float]] = {}
    for e in errors:
        metric, stat = metric_and_stat(e.metric)
        band = load_band(e.run, capacity)
        for b in ("all", band):
            if b:
                groups.setdefault((e.run.dataset, metric, stat, b), []).append(e.error)
    return [
        {"dataset": d, "metric": m, "stat": s, "load": b, **_abs_stats(v)}
        for (d, m, s, b), v in sorted(groups.items())
    ]


def capacity_errors(errors: Sequence[RunError], runs: Sequence[ServingRun]) -> list[dict[str, Any]]:
    """Per sweep: the predicted throughput at the load where the measured one peaked, against
    that peak (over-prediction is what breaks a team's SLO)."""
    capacity = capacities(runs)
    out = []
    for e in errors:
        if e.metric != "output_tokens_per_s" or e.run.load_kind != "concurrency":
            continue
        if e.measured == capacity.get(sweep_of(e.run)):
            out.append(
                {
                    "dataset": e.run.dataset,
                    "sweep": sweep_of(e.run),
                    "clients": e.run.load,
                    "measured": e.measured,
                    "predicted": e.predicted,
                    "error": e.error,
                }
            )
    return out


def accuracy_groups(
    errors: Sequence[RunError], gpu_class: Callable[[str], str]
) -> list[dict[str, Any]]:
    """The error groups of data/calibration/accuracy.json (see planner.latency.uncertainty):
    per engine and GPU class, per engine, and overall, for each latency metric and statistic.

    The tail percentiles are pooled: each of the P90, P95 and P99 groups holds the errors of
    every tail percentile measured (the data sets state different ones: NIM P95, MLPerf and
    vLLM P90 and P99), so a P99 is not judged by the one data set that happens to report it."""
    keyed: dict[tuple[str, str, str, str], list[RunError]] = {}
    for e in errors:
        metric, stat = metric_and_stat(e.metric)
        if metric not in ("ttft", "tpot", "e2e") or not math.isfinite(e.error):
            continue
        engine, klass = e.run.engine, gpu_class(e.run.gpu)
        for key in ((engine, klass), (engine, "*"), ("*", "*")):
            for pooled in TAIL_STATS if stat in TAIL_STATS else (stat,):
                keyed.setdefault((*key, metric, pooled), []).append(e)
    groups = []
    for (engine, klass, metric, stat), items in sorted(keyed.items()):
        values = [round(e.error, 5) for e in items]
        stats = _abs_stats(values)
        groups.append(
            {
                "engine": engine,
                "gpu_class": klass,
                "metric": metric,
                "stat": stat,
                "points": len(values),
                "configurations": len({e.run.configuration for e in items}),
                "median_abs": round(stats["median_abs"], 5),
                "p90_abs": round(stats["p90_abs"], 5),
                "errors": values,
            }
        )
    return groups
