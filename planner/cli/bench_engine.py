"""``planner bench engine``: time static batches of a catalog model's shape with the in-process
PyTorch engine on this machine (random weights, real KV cache), and write the medians as
calibration rows."""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
from rich.table import Table

import planner
from planner.cli.bench_run import check_choice, progress_bar
from planner.cli.context import print_json, stderr, stdout
from planner.cli.options import JSON_OPTION
from planner.common.files import check_output_path, write_text_atomic
from planner.common.text import shown
from planner.errors import PlannerError, UsageError

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


def _metadata(
    engine: TorchEngine,
    *,
    clock: str,
    repeats: int,
    warmup: int,
    output_tokens: int,
    seed: int,
    max_seconds: float,
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
        "repeats": repeats,
        "warmup": warmup,
        "output_tokens": output_tokens,
        "seed": seed,
        "max_seconds": max_seconds,
        "stopped": result.stopped,
        "skipped": [
            {"batch": k.batch, "prompt_tokens": k.prompt_tokens, "reason": k.reason}
            for k in result.skipped
        ],
    }


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
    stdout.print(table)


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
    from planner.bench.engine import (
        CLOCKS,
        Clock,
        TorchEngine,
        check_device,
        check_precision,
        check_threads,
        engine_rows,
        engine_spec,
        measure_grid,
        require_torch,
    )
    from planner.bench.results import write_measurements
    from planner.latency.catalog import load_catalog

    require_torch()
    batch_sizes = parse_sizes("--batches", batches)
    prompt_lengths = parse_sizes("--prompts", prompts)
    if not 1 <= output_tokens <= MAX_GRID_VALUE:
        raise UsageError(f"--output-tokens {output_tokens}: expected at least 1")
    if repeats < 1:
        raise UsageError(f"--repeats {repeats}: expected at least 1 measured run")
    if warmup < 0:
        raise UsageError(f"--warmup {warmup}: expected 0 or more runs")
    if not max_seconds > 0:
        raise UsageError(f"--max-seconds {max_seconds:g}: expected a positive number")
    clock_name = cast(Clock, check_choice("--clock", clock, CLOCKS))
    precision_name = check_precision(precision)
    device_name = check_device(device)
    check_threads(threads)
    spec = engine_spec(model, checkpoint)
    if out_csv is not None:
        if gpu is None:
            raise UsageError(
                "--out-csv needs --gpu: the catalog hardware row the rows are measured on "
                "(see `planner catalog gpus`)"
            )
        catalog = load_catalog()
        for option, table, value in (
            ("--gpu", catalog.gpus, gpu),
            ("--precision", catalog.precisions, precision_name),
        ):
            try:
                table.get(value)
            except UsageError as exc:
                raise UsageError(f"{option}: --out-csv rows need catalog names; {exc}") from None
        check_output_path(out_csv, "--out-csv")
    if out is not None:
        check_output_path(out, "--out")
    longest = max(prompt_lengths) + output_tokens
    fitting = [p for p in prompt_lengths if p + output_tokens <= spec.max_context]
    max_len = max(fitting) + output_tokens if fitting else min(longest, spec.max_context)
    engine = TorchEngine(
        spec,
        precision=precision_name,
        device=device_name,
        threads=threads,
        slots=max(batch_sizes),
        max_len=max_len,
        seed=seed,
        checkpoint=checkpoint,
    )
    started = datetime.now(UTC)
    stderr.print(
        f"measuring {engine.description}: {len(batch_sizes)} batch sizes x "
        f"{len(prompt_lengths)} prompt lengths; Ctrl-C stops and keeps what was measured",
        markup=False,
        soft_wrap=True,
    )
    runs = len(batch_sizes) * len(fitting) * (warmup + repeats)
    with progress_bar(runs, show=True) as progress:
        task = progress.add_task("static batches", total=runs)

        def on_point(point: Point) -> None:
            progress.update(task, description=f"batch {point.batch} x {point.prompt_tokens}")

        result = measure_grid(
            engine,
            batch_sizes,
            prompt_lengths,
            output_tokens,
            repeats=repeats,
            warmup=warmup,
            max_seconds=max_seconds,
            on_point=on_point,
            on_run=lambda: progress.advance(task),
        )
    for skipped in result.skipped:
        stderr.print(
            f"skipped batch {skipped.batch} x {skipped.prompt_tokens} tokens: {skipped.reason}",
            markup=False,
        )
    if result.stopped == "interrupted":
        stderr.print(
            f"interrupted: kept the {len(result.points)} points measured so far", markup=False
        )
    elif result.stopped == "seconds":
        stderr.print(
            f"stopped at --max-seconds {max_seconds:g} after {len(result.points)} points",
            markup=False,
        )
    metadata = _metadata(
        engine,
        clock=clock_name,
        repeats=repeats,
        warmup=warmup,
        output_tokens=output_tokens,
        seed=seed,
        max_seconds=max_seconds,
        result=result,
        started=started,
    )
    document = {"points": [p.to_dict() for p in result.points], "planner": metadata}
    if out is not None:
        write_text_atomic(out, json.dumps(document, indent=2) + "\n", "--out")
        stderr.print(f"wrote {out}", markup=False)
    if out_csv is not None and result.points:
        assert gpu is not None  # checked above
        source = f"planner bench engine {started:%Y-%m-%d %H:%M} UTC" + (
            f": {out}" if out is not None else ""
        )
        rows = engine_rows(
            result.points,
            gpu=gpu,
            model=spec.name,
            precision=precision_name,
            clock=clock_name,
            source=source,
            threads=engine.threads,
            device=engine.device,
        )
        write_measurements(rows, out_csv)
        stderr.print(f"wrote {len(rows)} rows to {out_csv}", markup=False)
    if json_output:
        print_json(document)
    else:
        print_points(result.points, clock_name, metadata)
    if not result.points:
        raise PlannerError(
            "no point was measured ("
            + ("every combination was skipped" if result.skipped else "stopped before the first")
            + ")"
        )
