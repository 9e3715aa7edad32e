"""``bench import``: result files of guidellm, ``vllm bench serve``, GenAI-Perf, AIPerf and
inference-perf as planner's runs, each with its load model (how a replay makes its load).

It checks its request (the options, each file's size), reads the files, checks the names asked
for are free, writes the measurement rows asked for, and stores the runs; the names stored go to
``progress.note`` as each file is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

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
    needed_for = (["the store"] if request.store else []) + (
        ["--out-csv"] if request.out_csv else []
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
        runs, stored, rows_written, [load_model(run.info.load) for run in runs]
    )
