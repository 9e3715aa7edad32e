"""``planner bench engine``: time static batches of a catalog model's shape with the in-process
PyTorch engine on this machine (random weights, real KV cache), and write the medians as
calibration rows. The options become a request for :func:`planner.bench.grid.measure_engine`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from planner.cli.bench_run import progress_bar
from planner.cli.context import print_json, stderr, stdout
from planner.cli.options import JSON_OPTION
from planner.cli.tables import print_whole
from planner.errors import PlannerError

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from planner.bench.engine import Clock, Point


class _Shown:
    """The grid's progress as the CLI shows it: a bar on stderr while it measures, notes on
    stderr."""

    def __init__(self) -> None:
        self.bar: tuple[Progress, TaskID] | None = None

    def note(self, text: str, *, soft_wrap: bool = False) -> None:
        stderr.print(text, markup=False, soft_wrap=soft_wrap)

    @contextlib.contextmanager
    def measuring(self, total: int) -> Iterator[None]:
        with progress_bar(total, show=True) as progress:
            self.bar = (progress, progress.add_task("static batches", total=total))
            try:
                yield
            finally:
                self.bar = None

    def point(self, point: Point) -> None:
        if self.bar is not None:
            progress, task = self.bar
            progress.update(task, description=f"batch {point.batch} x {point.prompt_tokens}")

    def run(self) -> None:
        if self.bar is not None:
            progress, task = self.bar
            progress.advance(task)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def print_points(points: list[Point], clock: Clock, metadata: dict[str, Any]) -> None:
    model = metadata["model"]
    stdout.print(
        f"{model['name']} ({model['layers']} layers, hidden {model['hidden_size']}) in "
        f"{metadata['precision']} on {metadata['device']}, {metadata['threads']} thread(s), "
        f"torch {metadata['torch_version']}: medians of {metadata['repeats']} runs, "
        f"{metadata['output_tokens']} output tokens",
        markup=False,
    )
    table = Table(title=f"static batches ({clock} clock, ms)")
    for column in ("batch", "prompt", "TTFT", "TPOT", "E2E", "wall E2E" if clock == "cpu" else ""):
        if column:
            table.add_column(column, justify="right")
    for point in points:
        timing = point.timing(clock)
        cells = [
            str(point.batch),
            str(point.prompt_tokens),
            _ms(timing.ttft_ms),
            _ms(timing.tpot_ms),
            _ms(timing.e2e_ms),
        ]
        if clock == "cpu":
            cells.append(_ms(point.wall.e2e_ms))
        table.add_row(*cells)
    print_whole(table)


def engine_command(
    model: str | None = typer.Option(
        None,
        "--model",
        help="Catalog model whose shape is built (dense Llama; default bench-llama-tiny); "
        "with --checkpoint, the catalog model the checkpoint is (for --out-csv rows).",
    ),
    checkpoint: Path | None = typer.Option(
        None,
        "--checkpoint",
        help="A local Hugging Face Llama-layout checkpoint folder (config.json, "
        "*.safetensors) to load instead of random weights (timings are the same).",
    ),
    precision: str = typer.Option("fp32", "--precision", help="fp32, bf16 or fp16."),
    device: str = typer.Option("cpu", "--device", help="cpu, or cuda where PyTorch sees a GPU."),
    threads: int = typer.Option(
        1, "--threads", help="PyTorch threads (1: least noise on a shared machine)."
    ),
    batches: str = typer.Option("1,2,4,8", "--batches", help="Batch sizes, comma-separated."),
    prompts: str = typer.Option(
        "32,128,512", "--prompts", help="Prompt lengths in tokens, comma-separated."
    ),
    output_tokens: int = typer.Option(16, "--output-tokens", help="Tokens each sequence makes."),
    repeats: int = typer.Option(3, "--repeats", help="Measured runs per point (median kept)."),
    warmup: int = typer.Option(1, "--warmup", help="Runs per point left out first."),
    clock: str = typer.Option(
        "cpu", "--clock", help="Clock the rows take: cpu (process CPU time) or wall."
    ),
    max_seconds: float = typer.Option(
        600.0, "--max-seconds", help="Seconds the grid may take; it stops early past them."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights and prompts."),
    gpu: str | None = typer.Option(
        None,
        "--gpu",
        help="Catalog hardware row to label the rows with (needed with --out-csv).",
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Write the points and metadata to FILE (JSON)."
    ),
    out_csv: Path | None = typer.Option(
        None, "--out-csv", help="Write calibration rows (TTFT, TPOT, E2E per point) to FILE."
    ),
    json_output: bool = JSON_OPTION,
) -> None:
    """Time static batches of a catalog model's shape with an in-process PyTorch engine (random
    weights, real KV cache, greedy decoding): TTFT (batched prefill), TPOT (decode step) and
    end-to-end per (batch, prompt), medians of repeated runs, on the process's CPU clock and the
    wall clock. Ctrl-C stops the grid and keeps what was measured."""
    from planner.bench.grid import EngineRunRequest, measure_engine  # loaded only to measure

    request = EngineRunRequest(
        batches=batches,
        prompts=prompts,
        model=model,
        checkpoint=checkpoint,
        precision=precision,
        device=device,
        threads=threads,
        output_tokens=output_tokens,
        repeats=repeats,
        warmup=warmup,
        clock=clock,
        max_seconds=max_seconds,
        seed=seed,
        gpu=gpu,
        out=out,
        out_csv=out_csv,
    )
    result = measure_engine(request, progress=_Shown())
    if json_output:
        print_json(result.document)
    else:
        print_points(result.points, result.clock, result.document["planner"])
    if result.failure is not None:
        raise PlannerError(result.failure)
