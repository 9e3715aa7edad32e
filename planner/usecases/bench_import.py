"""``bench import``: result files of guidellm, ``vllm bench serve``, GenAI-Perf, AIPerf and
inference-perf as planner's runs, each with its load model (how a replay makes its load).

It checks its request (the options, each file's size), reads the files, checks the names asked
for are free, writes the measurement rows asked for, and stores the runs; the names stored go to
``progress.note`` as each file is stored.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.access import Action, require
from planner.common.files import check_output_path
from planner.errors import UsageError
from planner.usecases import SessionScope
from planner.usecases._bench import (
    Notes,
    RunToStore,
    Silent,
    check_free_names,
    store_noted,
)

if TYPE_CHECKING:
    from planner.bench.results import BenchRun
    from planner.latency.serving_points import ServingRun


@dataclass(frozen=True)
class BenchImportRequest:
    """A ``bench import``: result files, what overrides their metadata, and the outputs."""

    paths: tuple[Path, ...]
    max_bytes: int
    gpu: str | None = None
    engine: str | None = None
    model: str | None = None
    precision: str | None = None
    tp: int | None = None
    out_csv: Path | None = None
    store: bool = True
    name: str | None = None
    allow_extreme: bool = False
    # also replay each run through the simulator as it ran, with the bundled profile of its
    # engine and GPU, and compare (:func:`replay_runs`)
    replay: bool = False


@dataclass(frozen=True)
class BenchImportResult:
    """The runs read, the names each file's runs were stored under (none when not stored), and
    the number of measurement rows written to ``--out-csv`` (``None``: none asked for)."""

    runs: list[BenchRun]
    stored: list[list[str]]
    rows_written: int | None
    # each run's load as a replay makes it ("closed loop, 100 clients", "Poisson arrivals at
    # 5 req/s"): what `planner calibrate --serving` replays, stored with the run
    load_models: list[str] = field(default_factory=list)
    # with --replay: each run's replay (None where it cannot be replayed: see skipped)
    replays: list[RunReplay] = field(default_factory=list)


@dataclass(frozen=True)
class ReplayRow:
    """One statistic a run measured, and what its replay predicts (ms; output tokens/s)."""

    metric: str
    measured: float
    predicted: float | None  # None: the replay gives no such statistic, or none finished

    @property
    def error(self) -> float | None:
        """Signed relative error, (predicted - measured) / measured."""
        if self.predicted is None or not self.measured:
            return None
        return self.predicted / self.measured - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "measured": self.measured,
            "predicted": self.predicted,
            "error": self.error,
        }


@dataclass(frozen=True)
class RunReplay:
    """A run replayed as it ran: how (the load, the deployment, the profile), and each
    measured statistic against the prediction; or why it could not be (``skipped``)."""

    load_model: str = ""
    deployment: str = ""
    profile: str = ""
    rows: tuple[ReplayRow, ...] = ()
    skipped: str | None = None

    @property
    def median_abs_error(self) -> float | None:
        """The median of the statistics' absolute errors (None: no statistic compared)."""
        errors = [abs(e) for e in (row.error for row in self.rows) if e is not None]
        return float(statistics.median(errors)) if errors else None

    def to_dict(self) -> dict[str, Any]:
        if self.skipped is not None:
            return {"skipped": self.skipped}
        return {
            "load_model": self.load_model,
            "deployment": self.deployment,
            "profile": self.profile,
            "median_abs_error": self.median_abs_error,
            "statistics": [row.to_dict() for row in self.rows],
        }


def _group_name(path: Path) -> str:
    """A sweep's group from its file: ``benchmarks.json.gz`` -> ``benchmarks``."""
    return path.name.split(".")[0] or "imported"


def import_bench(
    request: BenchImportRequest, sessions: SessionScope, *, progress: Notes | None = None
) -> BenchImportResult:
    """Read result files as runs, write them as measurement rows if asked, and store them (a
    file of several runs, a guidellm sweep, as one group named after the file; each file's
    names are noted as it is stored)."""
    from planner.bench.importers import GPUS, check_result_file, import_result
    from planner.bench.results import measurement_rows, write_measurements

    if request.store:
        require(Action.BENCH)
    # what can be checked before reading a file: the options and each file's size
    tp = request.tp
    if tp is not None and not GPUS.low <= tp <= GPUS.high:
        raise UsageError(f"--tp {tp}: expected {GPUS.expected}")
    if request.out_csv is not None:
        check_output_path(request.out_csv, "--out-csv")
    if request.name is not None and len(request.paths) > 1:
        raise UsageError("--name names the runs of one file; import the files one at a time")
    for path in request.paths:
        check_result_file(path, request.max_bytes)
    needed_for = (
        (["the store"] if request.store else [])
        + (["--out-csv"] if request.out_csv else [])
        + (["--replay"] if request.replay else [])
    )
    runs: list[BenchRun] = []
    by_file: list[tuple[Path, list[BenchRun]]] = []
    for path in request.paths:
        found = import_result(
            path,
            gpu=request.gpu,
            engine=request.engine,
            model=request.model,
            precision=request.precision,
            tp=tp,
            needed_for=needed_for,
            max_bytes=request.max_bytes,
            allow_extreme=request.allow_extreme,
        )
        by_file.append((path, found))
        runs += found
    check_free_names(sessions, request.store, request.name, len(runs) if len(runs) > 1 else 0)
    replays = replay_runs(runs) if request.replay else []
    rows_written = None
    if request.out_csv is not None:
        rows = measurement_rows(runs)
        write_measurements(rows, request.out_csv)
        rows_written = len(rows)
    stored: list[list[str]] = []
    if request.store:
        for path, found in by_file:
            group = (request.name or _group_name(path)) if len(found) > 1 else None
            kept: list[RunToStore] = [(run, None, None) for run in found]
            names = store_noted(
                sessions, progress or Silent(), kept, request.name, group=group, target=str(path)
            )
            stored.append(names)
    from planner.bench.serving_exports import load_model

    return BenchImportResult(
        runs, stored, rows_written, [load_model(run.info.load) for run in runs], replays
    )


def replay_runs(runs: list[BenchRun]) -> list[RunReplay]:
    """Each run replayed through the simulator as it ran (:func:`~planner.simulate.
    serving_fit.replay`: a closed loop of its clients, in waves for GenAI-Perf and AIPerf, or
    its rate's arrivals; its mean lengths), timed by the bundled profile of its engine and GPU
    (:func:`~planner.latency.profile.choose_profile`); a run that measured nothing to compare
    (a burst at maximum rate, no lengths) is skipped with the reason. Names the catalog lacks
    are a :class:`UsageError` naming the option to pass."""
    from planner.bench.serving_exports import serving_run, unreplayable
    from planner.latency.catalog import load_catalog
    from planner.latency.profile import choose_profile, load_bundled_profiles
    from planner.simulate.serving_fit import replay

    catalog = load_catalog()
    profiles = load_bundled_profiles()
    out = []
    for run in runs:
        problem = unreplayable(run)
        if problem is not None:
            out.append(RunReplay(skipped=problem))
            continue
        try:
            serving = serving_run(run, catalog)
        except UsageError as exc:  # the catalog's names are needed to replay, not to import
            message = str(exc).replace("calibration needs", "--replay needs")
            raise UsageError(
                message.replace(", or import without --out-csv to keep the results only", "")
            ) from None
        profile = choose_profile(profiles, serving.gpu, serving.engine)
        predicted = replay(serving, profile)
        rows = []
        for metric, measured in serving.measured.items():
            value = predicted.get(metric)
            kept = value if value is not None and math.isfinite(value) else None
            rows.append(ReplayRow(metric, measured, kept))
        out.append(
            RunReplay(
                load_model=_replayed_load(serving),
                deployment=f"{serving.model} {serving.precision} on {serving.tp} x "
                f"{serving.gpu}, {serving.engine}",
                profile=profile.name,
                rows=tuple(rows),
            )
        )
    return out


def _replayed_load(run: ServingRun) -> str:
    """The load a replay made, in words."""
    lengths = f"{run.input_tokens:,.0f} in / {run.output_tokens:,.0f} out tokens (means)"
    if run.load_kind == "concurrency":
        return f"closed loop: {run.load:g} clients, {run.clients_start}; {lengths}"
    arrival = run.settings.get("arrival", "poisson")
    cap = run.settings.get("max_concurrency")
    uncapped = f", its cap of {cap} in flight not replayed" if cap else ""
    return f"open loop: {arrival} arrivals at {run.load:g} req/s{uncapped}; {lengths}"
