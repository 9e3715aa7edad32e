"""Predicted against measured, the dashboard's Benchmarks page: stored runs set against the
latency model's predictions, and the calibration profiles it can use."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.usecases import SessionScope
from planner.usecases._bench import open_store

if TYPE_CHECKING:
    from planner.latency.calibration import Measurement
    from planner.latency.profile import Profile
    from planner.store.bench_runs import StoredRun


def measurements_of(run: StoredRun) -> list[Measurement]:
    """A stored run's mean latencies and throughputs as calibration reads them (catalog names
    resolved); names the catalog lacks raise a UsageError saying which."""
    import tempfile

    from planner.bench.results import measurement_rows, write_measurements
    from planner.latency.calibration import read_measurements
    from planner.latency.catalog import load_catalog

    catalog = load_catalog()
    rows = measurement_rows([run.bench_run()], catalog)
    if not rows:
        return []
    with tempfile.TemporaryDirectory(prefix="planner-bench-") as folder:
        path = Path(folder) / "measurements.csv"
        write_measurements(rows, path)
        points, _bursts = read_measurements(path, catalog)
    return points


@dataclass(frozen=True)
class ComparisonRequest:
    """Stored runs to set against the latency model's predictions, under the named profile
    (``None``: the one the model uses for the first run's GPU and engine)."""

    runs: tuple[str, ...]
    profile: str | None = None


@dataclass(frozen=True)
class ComparedPoint:
    """One measured metric at one load of a run, and the model's prediction of it (``None``:
    the model says the deployment cannot sustain that load)."""

    run: str
    point: Measurement
    predicted: float | None


@dataclass(frozen=True)
class Comparison:
    """The runs' points against their predictions, and the profile that timed them (empty
    when the runs have no point to compare)."""

    points: list[ComparedPoint]
    profile: str


def compare_runs(request: ComparisonRequest, sessions: SessionScope) -> Comparison:
    """Read the runs and the calibration profiles, then predict every measured point."""
    from planner.latency.calibration import predict
    from planner.latency.catalog import load_catalog
    from planner.latency.engines import get_engine
    from planner.latency.registry import engine_profile, resolve_profile
    from planner.latency.serving import SaturatedError
    from planner.store.bench_runs import get_run
    from planner.store.calibrations import known_profiles

    with open_store(sessions) as session:
        runs = [get_run(session, name) for name in request.runs]
        profiles = known_profiles(session)
    points = [(run.name, point) for run in runs for point in measurements_of(run)]
    if not points:
        return Comparison([], "")
    first = points[0][1]
    if request.profile is None:
        profile = engine_profile(profiles, first.gpu, get_engine(first.engine), None)
    else:
        profile = resolve_profile(profiles, first.gpu, first.engine, request.profile)
    catalog = load_catalog()
    compared = []
    for name, point in points:
        try:
            predicted: float | None = predict(point, profile, catalog)
        except SaturatedError:
            predicted = None  # the model says this load is beyond the deployment
        compared.append(ComparedPoint(name, point, predicted))
    return Comparison(compared, profile.name)


def profile_names(sessions: SessionScope) -> list[str]:
    """Every calibration profile the latency model can use, stored and bundled, by name."""
    from planner.store.calibrations import known_profiles

    with sessions() as session:
        return [p.name for p in known_profiles(session)]


def stored_profile_errors(
    sessions: SessionScope,
) -> list[tuple[Profile, dict[str, Any] | None]]:
    """The profiles fitted into the store, newest first, each with the error its fit states
    (:func:`planner.latency.registry.profile_accuracy`)."""
    from planner.latency.registry import profile_accuracy
    from planner.store.calibrations import stored_accuracy, stored_profiles

    with open_store(sessions) as session:
        return [
            (p, profile_accuracy(p, stored_accuracy(session, p.name)))
            for p in stored_profiles(session)
        ]
