"""``planner bench engine``'s run: static batches of a catalog model's shape timed with the
in-process PyTorch engine (random weights, real KV cache), the medians written as a JSON file
and as calibration rows. The CLI parses the options into an :class:`EngineRunRequest`, calls
:func:`measure_engine` and renders what it returns."""

from __future__ import annotations

import json
import platform
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import planner
from planner.bench.harness import check_choice
from planner.common.files import check_output_path, write_text_atomic
from planner.common.text import shown
from planner.errors import UsageError

if TYPE_CHECKING:
    from planner.bench.engine import Clock, GridResult, Point, TorchEngine

MAX_GRID_VALUE = 1_000_000


def parse_sizes(option: str, text: str) -> list[int]:
    """``1,2,4,8`` -> [1, 2, 4, 8]: distinct whole numbers of at least 1, in the given order."""
    sizes: list[int] = []
    for part in text.split(","):
        item = part.strip()
        if not item.isdigit() or not 1 <= int(item) <= MAX_GRID_VALUE:
            raise UsageError(
                f"{option} {shown(text)}: expected whole numbers from 1 to {MAX_GRID_VALUE:,} "
                f"separated by commas, such as 1,2,4,8 (got {shown(item)})"
            )
        if int(item) not in sizes:
            sizes.append(int(item))
    return sizes


class GridProgress(Protocol):
    """What the grid shows while it measures (the CLI: a progress bar and notes on stderr)."""

    def note(self, text: str, *, soft_wrap: bool = False) -> None: ...

    def measuring(self, total: int) -> AbstractContextManager[object]: ...

    def point(self, point: Point) -> None: ...

    def run(self) -> None: ...


class Silent:
    """Shows nothing."""

    def note(self, text: str, *, soft_wrap: bool = False) -> None:
        pass

    def measuring(self, total: int) -> AbstractContextManager[object]:
        return nullcontext()

    def point(self, point: Point) -> None:
        pass

    def run(self) -> None:
        pass


@dataclass(frozen=True)
class EngineRunRequest:
    """The grid to time and where its results go (sizes as given: ``1,2,4,8``)."""

    batches: str = "1,2,4,8"
    prompts: str = "32,128,512"
    model: str | None = None
    checkpoint: Path | None = None
    precision: str = "fp32"
    device: str = "cpu"
    threads: int = 1
    output_tokens: int = 16
    repeats: int = 3
    warmup: int = 1
    clock: str = "cpu"
    max_seconds: float = 600.0
    seed: int = 0
    gpu: str | None = None
    out: Path | None = None
    out_csv: Path | None = None


@dataclass(frozen=True)
class EngineRunResult:
    """The points measured, the clock their rows take, the document ``--out`` and ``--json``
    hold (``points`` and ``planner``'s metadata), and why the grid failed, if it measured no
    point."""

    points: list[Point]
    clock: Clock
    document: dict[str, Any]
    failure: str | None


@dataclass(frozen=True)
class _Checked:
    batches: list[int]
    prompts: list[int]
    clock: Clock
    precision: str
    device: str


def _check(request: EngineRunRequest) -> _Checked:
    from planner.bench.engine import CLOCKS, check_device, check_precision, check_threads

    batches = parse_sizes("--batches", request.batches)
    prompts = parse_sizes("--prompts", request.prompts)
    if not 1 <= request.output_tokens <= MAX_GRID_VALUE:
        raise UsageError(f"--output-tokens {request.output_tokens}: expected at least 1")
    if request.repeats < 1:
        raise UsageError(f"--repeats {request.repeats}: expected at least 1 measured run")
    if request.warmup < 0:
        raise UsageError(f"--warmup {request.warmup}: expected 0 or more runs")
    if not request.max_seconds > 0:
        raise UsageError(f"--max-seconds {request.max_seconds:g}: expected a positive number")
    clock = cast("Clock", check_choice("--clock", request.clock, CLOCKS))
    precision = check_precision(request.precision)
    device = check_device(request.device)
    check_threads(request.threads)
    return _Checked(batches, prompts, clock, precision, device)


def _check_outputs(request: EngineRunRequest, precision: str) -> None:
    from planner.latency.catalog import load_catalog

    if request.out_csv is not None:
        if request.gpu is None:
            raise UsageError(
                "--out-csv needs --gpu: the catalog hardware row the rows are measured on "
                "(see `planner catalog gpus`)"
            )
        catalog = load_catalog()
        for option, table, value in (
            ("--gpu", catalog.gpus, request.gpu),
            ("--precision", catalog.precisions, precision),
        ):
            try:
                table.get(value)
            except UsageError as exc:
                raise UsageError(f"{option}: --out-csv rows need catalog names; {exc}") from None
        check_output_path(request.out_csv, "--out-csv")
    if request.out is not None:
        check_output_path(request.out, "--out")


def measure_engine(
    request: EngineRunRequest, *, progress: GridProgress | None = None
) -> EngineRunResult:
    """Check the request, build the engine, time the grid (Ctrl-C stops it and keeps what was
    measured), write ``--out`` and ``--out-csv``, and return the points."""
    from planner.bench.engine import TorchEngine, engine_spec, measure_grid, require_torch

    notes = progress or Silent()
    require_torch()
    checked = _check(request)
    spec = engine_spec(request.model, request.checkpoint)
    _check_outputs(request, checked.precision)
    output_tokens = request.output_tokens
    longest = max(checked.prompts) + output_tokens
    fitting = [p for p in checked.prompts if p + output_tokens <= spec.max_context]
    max_len = max(fitting) + output_tokens if fitting else min(longest, spec.max_context)
    engine = TorchEngine(
        spec,
        precision=checked.precision,
        device=checked.device,
        threads=request.threads,
        slots=max(checked.batches),
        max_len=max_len,
        seed=request.seed,
        checkpoint=request.checkpoint,
    )
    started = datetime.now(UTC)
    notes.note(
        f"measuring {engine.description}: {len(checked.batches)} batch sizes x "
        f"{len(checked.prompts)} prompt lengths; Ctrl-C stops and keeps what was measured",
        soft_wrap=True,
    )
    runs = len(checked.batches) * len(fitting) * (request.warmup + request.repeats)
    with notes.measuring(runs):
        result = measure_grid(
            engine,
            checked.batches,
            checked.prompts,
            output_tokens,
            repeats=request.repeats,
            warmup=request.warmup,
            max_seconds=request.max_seconds,
            on_point=notes.point,
            on_run=notes.run,
        )
    _note_ends(result, request.max_seconds, notes)
    metadata = _metadata(engine, request, checked.clock, result, started)
    document = {"points": [p.to_dict() for p in result.points], "planner": metadata}
    _write(request, document, result, engine, checked, started, notes)
    failure = None
    if not result.points:
        failure = (
            "no point was measured ("
            + ("every combination was skipped" if result.skipped else "stopped before the first")
            + ")"
        )
    return EngineRunResult(result.points, checked.clock, document, failure)


def _note_ends(result: GridResult, max_seconds: float, progress: GridProgress) -> None:
    for skipped in result.skipped:
        progress.note(
            f"skipped batch {skipped.batch} x {skipped.prompt_tokens} tokens: {skipped.reason}"
        )
    if result.stopped == "interrupted":
        progress.note(f"interrupted: kept the {len(result.points)} points measured so far")
    elif result.stopped == "seconds":
        progress.note(f"stopped at --max-seconds {max_seconds:g} after {len(result.points)} points")


def _write(
    request: EngineRunRequest,
    document: dict[str, Any],
    result: GridResult,
    engine: TorchEngine,
    checked: _Checked,
    started: datetime,
    progress: GridProgress,
) -> None:
    """``--out``'s JSON, and ``--out-csv``'s calibration rows (when a point was measured)."""
    from planner.bench.engine import engine_rows
    from planner.bench.results import write_measurements

    out = request.out
    if out is not None:
        write_text_atomic(out, json.dumps(document, indent=2) + "\n", "--out")
        progress.note(f"wrote {out}")
    if request.out_csv is not None and result.points:
        assert request.gpu is not None  # checked before
        source = f"planner bench engine {started:%Y-%m-%d %H:%M} UTC" + (
            f": {out}" if out is not None else ""
        )
        rows = engine_rows(
            result.points,
            gpu=request.gpu,
            model=engine.spec.name,
            precision=checked.precision,
            clock=checked.clock,
            source=source,
            threads=engine.threads,
            device=engine.device,
        )
        write_measurements(rows, request.out_csv)
        progress.note(f"wrote {len(rows)} rows to {request.out_csv}")


def _metadata(
    engine: TorchEngine,
    request: EngineRunRequest,
    clock: str,
    result: GridResult,
    started: datetime,
) -> dict[str, Any]:
    from planner.bench.engine import torch_version

    s = engine.spec
    return {
        "tool": "planner bench engine",
        "planner_version": planner.__version__,
        "torch_version": torch_version(),
        "python_version": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "started_at": started.isoformat(),
        "device": engine.device,
        "threads": engine.threads,
        "precision": engine.model.precision,
        "dtype": str(engine.model.dtype).removeprefix("torch."),
        "weights": str(engine.model.checkpoint) if engine.model.checkpoint else "random",
        "model": {
            "name": s.name,
            "layers": s.layers,
            "hidden_size": s.hidden_size,
            "attention_heads": s.attention_heads,
            "kv_heads": s.kv_heads,
            "head_dim": s.head_dim,
            "intermediate_size": s.intermediate_size,
            "vocab_size": s.vocab_size,
            "weights": "random (seeded)",
        },
        "kv_cache": {"slots": engine.slots, "max_len": engine.max_len},
        "clock": clock,
        "repeats": request.repeats,
        "warmup": request.warmup,
        "output_tokens": request.output_tokens,
        "seed": request.seed,
        "max_seconds": request.max_seconds,
        "stopped": result.stopped,
        "skipped": [
            {"batch": k.batch, "prompt_tokens": k.prompt_tokens, "reason": k.reason}
            for k in result.skipped
        ],
    }
