"""Fit a calibration profile to measured latencies (``planner calibrate``): the request is
checked, the measurement files (and per-operator timings) read, the profile to start from and
the one in use now are taken from the store's and the bundled profiles, the fit runs
(:func:`planner.latency.calibration.calibrate`), and a fit no worse than the profile in use
(or any, with ``force``) is stored, and written into ``export`` when asked."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.common.text import shown
from planner.errors import PlannerError, UsageError
from planner.latency.profile import DEFAULT_ENGINE, Profile, ProfileError
from planner.usecases import SessionScope

if TYPE_CHECKING:
    from planner.latency.calibration import CalibrationReport, Measurement
    from planner.latency.catalog import Catalog

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
    summary = {
        **report.summary(),
        "baseline_profile": baseline.name,
        "baseline_all": finite_or_none(asdict(in_use)),
    }
    return CalibrateResult(report, baseline, summary)
