"""Fit a calibration profile to measured latencies (``planner calibrate``): the request is
checked, the measurement files (and per-operator timings) read, the profile to start from and
the one in use now are taken from the store's and the bundled profiles, the fit runs
(:func:`planner.latency.calibration.calibrate`), and a fit no worse than the profile in use
(or any, with ``force``) is stored, and written into ``export`` when asked.

``planner calibrate --serving`` (:func:`calibrate_serving`): serving results under load (any
file ``planner bench import`` reads) become runs the simulator replays as they ran; the
engine's bundled profile is fitted to them (:func:`planner.simulate.serving_fit.fit_serving`)
and its held-out error reported before and after, per metric."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.access import Action, require
from planner.common.text import shown
from planner.errors import PlannerError, UsageError
from planner.latency.profile import DEFAULT_ENGINE, Profile, ProfileError
from planner.usecases import SessionScope
from planner.usecases.audit import record

if TYPE_CHECKING:
    from planner.latency.calibration import CalibrationReport, Measurement
    from planner.latency.catalog import Catalog
    from planner.latency.serving_points import ServingRun

MAX_NAME = 200  # the store's column widths
MAX_ENGINE = 64


@dataclass(frozen=True)
class CalibrateRequest:
    """What ``planner calibrate`` takes: measurement CSV files (the layout of
    ``data/reference/published_latency.csv``), the profile's name, which measurements to fit,
    and what to do with the fit."""

    measurements: tuple[Path, ...]
    name: str
    engine: str = DEFAULT_ENGINE
    gpu: str | None = None  # one GPU's measurements only; None: every GPU
    vendor: str | None = None  # one vendor's GPUs only
    operators: Path | None = None  # per-operator timings fitted alongside
    holdout: float = 0.3  # share of the points held out to measure the error
    start: str | None = None  # the profile to start from; None: the built-in guesses
    export: Path | None = None  # also write the profile into this profiles file
    force: bool = False  # store a fit worse than the profile it replaces


@dataclass(frozen=True)
class CalibrateResult:
    """The fit, stored: ``summary`` is what ``planner calibrate --json`` prints (the fit's
    summary with the profile in use before, ``baseline_profile``, and its error on the same
    points, ``baseline_all``)."""

    report: CalibrationReport
    baseline: Profile
    summary: dict[str, Any]


def _check_name(option: str, value: str, most: int) -> None:
    if not value.strip() or not value.isprintable() or len(value) > most:
        quoted = f" {shown(value)}" if value else ""
        raise UsageError(f"{option}{quoted}: expected a name of 1 to {most} printable characters")


def _check(request: CalibrateRequest, catalog: Catalog) -> tuple[str | None, str]:
    """The request's names and numbers, before any file is read: the GPU's and the engine's
    catalog names."""
    from planner.latency.engines import get_engine

    _check_name("--name", request.name, MAX_NAME)
    _check_name("--engine", request.engine, MAX_ENGINE)
    holdout = request.holdout
    if not (math.isfinite(holdout) and 0 <= holdout < 1):
        raise UsageError(f"--holdout {holdout:g}: expected a fraction in [0, 1), e.g. 0.3")
    gpu_name = catalog.gpus.get(request.gpu).name if request.gpu is not None else None
    engine = get_engine(request.engine).name
    vendors = sorted({g.vendor for g in catalog.gpus.entries})
    vendor = request.vendor
    if vendor is not None and vendor.lower() not in {v.lower() for v in vendors}:
        raise UsageError(f"--vendor {shown(vendor)}: expected one of {', '.join(vendors)}")
    return gpu_name, engine


def _points(
    request: CalibrateRequest, catalog: Catalog, gpu_name: str | None, engine: str
) -> tuple[list[Measurement], list[Any]]:
    """The measurements the fit takes (and the rows of the files it excluded)."""
    from planner.latency.calibration import read_measurements, select

    points: list[Measurement] = []
    excluded = []
    for path in request.measurements:
        read, skipped = read_measurements(path, catalog)
        points += read
        excluded += skipped
    chosen = select(points, engine=engine, gpu=gpu_name, vendor=request.vendor, catalog=catalog)
    if not chosen:
        engines = sorted({p.engine for p in points if gpu_name is None or p.gpu == gpu_name})
        raise UsageError(
            f"no measurements for engine {shown(engine)}"
            + (f" on {gpu_name}" if gpu_name else "")
            + (f"; the files measure {', '.join(shown(e) for e in engines)}" if engines else "")
        )
    return chosen, excluded


def _baseline(profiles: Sequence[Profile], gpu: str | None, engine: str) -> Profile:
    """The profile a fitted one would replace: what `planner latency` uses now for this GPU
    (or, fitting every GPU, the engine's GPU-independent profile), else the built-in defaults."""
    from planner.latency.registry import resolve_profile

    try:
        return resolve_profile(profiles, gpu or "", engine)
    except ProfileError:
        return Profile("built-in defaults", engine, gpu)


def calibrate(
    request: CalibrateRequest,
    sessions: SessionScope,
    *,
    warn: Callable[[str], None] | None = None,
) -> CalibrateResult:
    """Fit, compare and store the profile ``request`` asks for. A fit worse than the profile in
    use now on the same points (or one that saturates) is a :class:`~planner.errors.PlannerError`
    and nothing is stored, unless ``force`` (not for a saturated fit): then ``warn`` is told
    why and it is stored anyway. ``sessions`` opens the store the profiles are read from and
    the fit is stored in, after the inputs and files are read; an ``export`` file is written in
    the same transaction (a failed write stores nothing)."""
    from planner.latency.calibration import (
        ErrorSummary,
        compare_fit,
        errors_under,
        finite_or_none,
    )
    from planner.latency.calibration import calibrate as fit
    from planner.latency.catalog import load_catalog
    from planner.latency.operators import read_operator_points
    from planner.latency.registry import export_profile, read_export, resolve_profile
    from planner.store.calibrations import known_profiles, save_profile

    require(Action.CALIBRATE)

    catalog = load_catalog()
    gpu_name, engine = _check(request, catalog)
    name, export = request.name, request.export
    kernels = read_operator_points(request.operators) if request.operators is not None else []
    export_payload = read_export(export) if export is not None else None
    chosen, excluded = _points(request, catalog, gpu_name, engine)
    with sessions() as session:
        if session is None:
            raise UsageError("calibrate stores the profile it fits; no store is open")
        profiles = known_profiles(session)
        start = request.start
        base = resolve_profile(profiles, gpu_name or "", engine, start) if start else Profile(name)
        report = fit(
            chosen,
            Profile(name, engine, gpu_name, **base.params()),
            excluded=excluded,
            holdout=request.holdout,
            catalog=catalog,
            operators=kernels,
        )
        baseline = _baseline(profiles, gpu_name, engine)
        after = ErrorSummary.of(report.after)
        in_use = errors_under(report.points, baseline, catalog)
        problem = compare_fit(after.mape, in_use.mape, baseline.name)
        if problem is not None:
            if not request.force or not math.isfinite(after.mape):
                hint = "" if not math.isfinite(after.mape) else "; store it anyway with --force"
                raise PlannerError(f"{problem}; profile {shown(name)} not stored{hint}")
            if warn is not None:
                warn(f"{problem}; stored anyway (--force)")
        sources = [str(p) for p in request.measurements]
        save_profile(session, report, sources)
        if export is not None:  # inside the transaction: a failed write stores nothing
            export_profile(export, report, sources, export_payload)
    record(
        sessions,
        Action.CALIBRATE,
        f"calibration profile {name}",
        f"{engine} on {gpu_name or 'any GPU'}",
    )
    summary = {
        **report.summary(),
        "baseline_profile": baseline.name,
        "baseline_all": finite_or_none(asdict(in_use)),
    }
    return CalibrateResult(report, baseline, summary)


# --- calibration from serving runs under load (``planner calibrate --serving``) -------------

SERVING_SPLITS = {
    "configuration": "leave-one-configuration-out: each deployment's runs predicted by a "
    "profile fitted on the other deployments' runs only",
    "load": "leave-one-load-out: each run predicted by a profile fitted on the other runs only",
}
MAX_SERVING_FILES = 1000


@dataclass(frozen=True)
class ServingCalibrateRequest:
    """What ``planner calibrate --serving`` takes: serving result files (any format ``planner
    bench import`` reads), the deployment facts the files do not record, the profile's name,
    how long each fit may run, and where to write the profile."""

    files: tuple[Path, ...]
    engine: str | None = None
    gpu: str | None = None
    model: str | None = None
    precision: str | None = None
    tp: int | None = None
    name: str | None = None  # None: "<engine>-<gpu>-serving"
    out: Path | None = None  # a profiles file to write the fitted profile into
    max_evaluations: int | None = None  # replays of all runs per fit; None: until converged
    max_bytes: int | None = None  # a result file's limit; None: the importer's


@dataclass(frozen=True)
class HeldOutError:
    """One metric's absolute relative errors over the runs that measured it: the profile it
    started from (``before``, nothing fitted) and the held-out profiles (``after``)."""

    metric: str
    points: int
    before_median: float
    before_p90: float
    after_median: float
    after_p90: float


@dataclass(frozen=True)
class ServingCalibration:
    """A serving fit: the runs replayed, the profile started from and the one fitted on every
    run, and the held-out error (``split``: configuration or load) per metric and overall."""

    runs: list[ServingRun]
    start: Profile
    profile: Profile
    split: str
    folds: int
    by_metric: list[HeldOutError]
    overall: HeldOutError
    per_run: list[dict[str, Any]]
    sources: list[str]

    def summary(self) -> dict[str, Any]:
        """Everything ``--json`` prints (non-finite errors, a replay that never finished, as
        null)."""
        from planner.latency.calibration import finite_or_none

        return dict(
            finite_or_none(
                {
                    "profile": self.profile.to_dict(),
                    "start_profile": self.start.name,
                    "runs": len(self.runs),
                    "configurations": sorted({run.configuration for run in self.runs}),
                    "split": self.split,
                    "split_meaning": SERVING_SPLITS[self.split],
                    "folds": self.folds,
                    "held_out": {
                        "overall": asdict(self.overall),
                        "by_metric": [asdict(e) for e in self.by_metric],
                    },
                    "per_run": self.per_run,
                    "sources": self.sources,
                }
            )
        )


def _quantiles(errors: Sequence[float]) -> tuple[float, float]:
    import numpy as np

    if not errors:
        return math.nan, math.nan
    values = np.abs(np.asarray(errors, dtype=float))
    if not np.isfinite(values).all():  # a replay that never finished: the tail is unbounded
        values = np.where(np.isfinite(values), values, np.inf)
    return float(np.median(values)), float(np.quantile(values, 0.9, method="higher"))


def _held_out_summary(metric: str, before: Sequence[float], after: Sequence[float]) -> HeldOutError:
    b_median, b_p90 = _quantiles(before)
    a_median, a_p90 = _quantiles(after)
    return HeldOutError(metric, len(before), b_median, b_p90, a_median, a_p90)


def calibrate_serving_runs(
    runs: Sequence[ServingRun],
    start: Profile,
    *,
    name: str,
    max_evaluations: int | None = None,
    progress: Callable[[str], None] | None = None,
    sources: Sequence[str] = (),
) -> ServingCalibration:
    """Fit ``start``'s step-time parameters to ``runs`` by replaying each run through the
    simulator, and measure the held-out error: leave-one-configuration-out where the runs span
    two or more configurations, else leave-one-load-out (which needs two runs or more)."""
    from planner.simulate.serving_fit import (
        RunError,
        fit_serving,
        held_out_errors,
        run_errors,
    )

    say = progress or (lambda _text: None)
    if len(runs) < 2:
        raise UsageError(
            f"calibration from serving runs needs two runs or more to hold one out; got "
            f"{len(runs)} (give the files of several loads or deployments)"
        )
    configurations = sorted({run.configuration for run in runs})
    before = run_errors(runs, _always(start))
    held_out: list[RunError] = []
    if len(configurations) >= 2:
        split = "configuration"
        counter = iter(range(1, len(configurations) + 1))
        held_out, _ = held_out_errors(
            runs,
            start,
            max_evaluations=max_evaluations,
            progress=lambda c: say(
                f"fold {next(counter)}/{len(configurations)}: fitting without {c}"
            ),
        )
        folds = len(configurations)
    else:
        split = "load"
        for index, run in enumerate(runs):
            say(f"fold {index + 1}/{len(runs)}: fitting without the run at {_load_text(run)}")
            train = [other for other in runs if other is not run]
            fold = fit_serving(train, start, max_evaluations=max_evaluations)
            held_out += run_errors([run], _always(fold))
        folds = len(runs)
    say(f"fitting on all {len(runs)} runs")
    fitted = fit_serving(runs, start, max_evaluations=max_evaluations)
    profile = Profile.from_dict({**fitted.to_dict(), "name": name})
    key = {(id(e.run), e.metric): e for e in held_out}
    metrics = sorted({e.metric for e in before})
    by_metric = []
    for metric in metrics:
        pairs = [(b, key[(id(b.run), metric)]) for b in before if b.metric == metric]
        by_metric.append(
            _held_out_summary(metric, [p[0].error for p in pairs], [p[1].error for p in pairs])
        )
    overall = _held_out_summary(
        "all", [b.error for b in before], [key[(id(b.run), b.metric)].error for b in before]
    )
    per_run = [
        {
            "configuration": b.run.configuration,
            "load": _load_text(b.run),
            "source": b.run.source,
            "metric": b.metric,
            "measured": b.measured,
            "before": b.predicted,
            "held_out": key[(id(b.run), b.metric)].predicted,
        }
        for b in before
    ]
    return ServingCalibration(
        list(runs), start, profile, split, folds, by_metric, overall, per_run, list(sources)
    )


def _always(profile: Profile) -> Callable[[ServingRun], Profile]:
    return lambda _run: profile


def _load_text(run: ServingRun) -> str:
    if run.load_kind == "concurrency":
        return f"{run.load:g} clients"
    return f"{run.load:g} req/s"


def serving_runs_of(
    request: ServingCalibrateRequest,
) -> tuple[list[ServingRun], list[str]]:
    """The runs the request's files hold, as the simulator replays them, and a note for each
    run left out (a burst at maximum rate, a run that measured nothing)."""
    from planner.bench.importers import MAX_FILE_BYTES, check_result_file, import_result
    from planner.bench.serving_exports import serving_run, unreplayable
    from planner.latency.catalog import load_catalog

    if not request.files:
        raise UsageError("give one or more serving result files")
    if len(request.files) > MAX_SERVING_FILES:
        raise UsageError(f"at most {MAX_SERVING_FILES:,} files; got {len(request.files):,}")
    max_bytes = request.max_bytes or MAX_FILE_BYTES
    for path in request.files:
        check_result_file(path, max_bytes)
    catalog = load_catalog()
    runs: list[ServingRun] = []
    skipped: list[str] = []
    for path in request.files:
        found = import_result(
            path,
            gpu=request.gpu,
            engine=request.engine,
            model=request.model,
            precision=request.precision,
            tp=request.tp,
            needed_for=("calibration",),
            max_bytes=max_bytes,
        )
        for run in found:
            problem = unreplayable(run)
            if problem is not None:
                skipped.append(f"{path} run {run.info.benchmark + 1}: left out: {problem}")
                continue
            runs.append(serving_run(run, catalog, row=len(runs) + 1))
    return runs, skipped


def calibrate_serving(
    request: ServingCalibrateRequest,
    *,
    progress: Callable[[str], None] | None = None,
) -> tuple[ServingCalibration, list[str]]:
    """``planner calibrate --serving``: read the files, start from the bundled profile of the
    runs' engine and GPU, fit and hold out, and write the profile into ``out`` when asked.
    Returns the calibration and the notes on runs left out."""
    from planner.latency.profile import choose_profile, load_bundled_profiles
    from planner.latency.registry import read_export

    evaluations = request.max_evaluations
    if evaluations is not None and not 1 <= evaluations <= 100_000:
        raise UsageError(f"--max-evaluations {evaluations}: expected 1 to 100,000")
    if request.name is not None:
        _check_name("--name", request.name, MAX_NAME)
    payload = read_export(request.out) if request.out is not None else None
    runs, skipped = serving_runs_of(request)
    engines = sorted({run.engine for run in runs})
    if len(engines) > 1:
        raise UsageError(
            f"the runs were served by {', '.join(engines)}; a profile is one engine's: "
            "calibrate each engine's files apart (or pass --engine)"
        )
    if not runs:
        raise UsageError("no run in these files can be replayed: " + "; ".join(skipped))
    gpus = sorted({run.gpu for run in runs})
    gpu = gpus[0] if len(gpus) == 1 else None
    start = choose_profile(load_bundled_profiles(), gpu or "", engines[0])
    name = request.name or f"{engines[0]}-{(gpu or 'any-gpu').lower()}-serving"
    start = Profile.from_dict({**start.to_dict(), "gpu": gpu})
    if progress is not None:
        progress(f"{len(runs)} runs read; starting from profile {start.name}")
    sources = [str(path) for path in request.files]
    result = calibrate_serving_runs(
        runs,
        start,
        name=name,
        max_evaluations=evaluations,
        progress=progress,
        sources=sources,
    )
    if request.out is not None and payload is not None:
        write_serving_profile(request.out, result, payload)
    return result, skipped


def write_serving_profile(path: Path, result: ServingCalibration, payload: dict[str, Any]) -> None:
    """Write (or replace, by name) the fitted profile in a profiles file (the layout of
    ``data/calibration/profiles.json``), with its sources and held-out errors, atomically."""
    import json
    from datetime import UTC, datetime

    from planner.common.files import write_text_atomic
    from planner.latency.calibration import finite_or_none
    from planner.latency.profile import FIT_BOUNDS
    from planner.simulate.serving_fit import SERVING_FIT_PARAMS

    profile = result.profile
    fitted = [p for p in SERVING_FIT_PARAMS if getattr(profile, p) != getattr(result.start, p)]
    summary = result.summary()
    entry = finite_or_none(
        {
            "profile": profile.to_dict(),
            "fitted_at": datetime.now(UTC).date().isoformat(),
            "sources": result.sources,
            "fitted": fitted,
            "bounds": {p: list(FIT_BOUNDS[p]) for p in fitted},
            "at_bound": [
                p
                for p in fitted
                if any(
                    math.isclose(getattr(profile, p), edge, abs_tol=1e-6) for edge in FIT_BOUNDS[p]
                )
            ],
            "points": len(result.per_run),
            "excluded": [],
            "heldout_test": _error_summary(result),
            "after_all": None,
            "serving": {
                "start_profile": result.start.name,
                "runs": len(result.runs),
                "split": result.split,
                "held_out": summary["held_out"],
            },
        }
    )
    profiles = [p for p in payload["profiles"] if p["profile"]["name"] != profile.name]
    profiles.append(entry)
    profiles.sort(key=lambda p: (p["profile"]["engine"], p["profile"]["gpu"] or ""))
    text = json.dumps({**payload, "profiles": profiles}, indent=2, allow_nan=False) + "\n"
    write_text_atomic(path, text, "--out")


def _error_summary(result: ServingCalibration) -> dict[str, Any]:
    """The held-out errors as the bundled profiles state theirs (``heldout_test``: points,
    mean, median and worst absolute error, and per metric), so the dashboard and `planner
    latency` can show them; a replay that never finished is left out of these figures (the
    ``serving`` block counts it as unbounded)."""
    import numpy as np

    rows = [
        (abs(row["held_out"] / row["measured"] - 1.0), row)
        for row in result.per_run
        if row["measured"] and row["held_out"] is not None and math.isfinite(row["held_out"])
    ]
    if not rows:
        return {
            "points": 0,
            "mape": None,
            "median_ape": None,
            "worst_ape": None,
            "worst_point": "",
            "by_metric": {},
        }
    worst, worst_row = max(rows, key=lambda item: item[0])
    by_metric = {}
    for metric in sorted({row["metric"] for _, row in rows}):
        values = np.array([e for e, row in rows if row["metric"] == metric])
        by_metric[metric] = {
            "points": float(values.size),
            "mape": float(values.mean()),
            "median_ape": float(np.median(values)),
        }
    every = np.array([e for e, _ in rows])
    return {
        "points": len(rows),
        "mape": float(every.mean()),
        "median_ape": float(np.median(every)),
        "worst_ape": worst,
        "worst_point": f"{worst_row['configuration']}/{worst_row['load']}/{worst_row['metric']}",
        "by_metric": by_metric,
    }
