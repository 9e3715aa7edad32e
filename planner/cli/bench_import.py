"""``planner bench import``: the result files users already have, as planner's runs (with the
load model a replay makes) and as measurement rows for ``planner calibrate``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from planner.cli.context import print_json, sessions_from, stderr, stdout, user_errors
from planner.cli.options import JSON_OPTION
from planner.cli.tables import Column, print_table
from planner.common.text import printable
from planner.errors import UsageError

if TYPE_CHECKING:
    from planner.bench.results import BenchRun
    from planner.usecases.bench_import import RunReplay


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _run_names(runs: list[BenchRun]) -> list[str]:
    """``run 2`` for runs of one file; the file's name (cut), and ``#2`` where it holds
    several, for runs of several files."""
    files = [r.info.source_file for r in runs]
    if len(set(files)) == 1:
        return [f"run {r.info.benchmark + 1}" for r in runs]
    names = []
    for run, file in zip(runs, files, strict=True):
        name = printable(Path(file).name, 24)
        names.append(f"{name} #{run.info.benchmark + 1}" if files.count(file) > 1 else name)
    return names


def _print_runs(runs: list[BenchRun]) -> None:
    columns = [
        Column("run", _run_names(runs)),
        Column(
            "tool",
            [f"{r.info.tool} {r.info.tool_version or ''}".strip() for r in runs],
            drop=4,
        ),
        Column("load", [r.info.load.label() for r in runs]),
        Column(
            "completed",
            [
                (f"{r.completed}" if not _count_unknown(r) else "-")
                + (f" ({r.failed} failed)" if r.failed else "")
                for r in runs
            ],
            justify="right",
        ),
        Column("TTFT ms", [_number(r.ttft.mean, 1) for r in runs], justify="right"),
        Column("p99 TTFT", [_number(r.ttft.p99, 1) for r in runs], drop=2, justify="right"),
        Column("TPOT ms", [_number(r.tpot.mean, 2) for r in runs], justify="right"),
        Column("tok/s", [_number(r.output_throughput, 1) for r in runs], justify="right"),
        Column("req/s", [_number(r.request_throughput, 2) for r in runs], drop=1, justify="right"),
        Column(
            "deployment",
            [
                printable(f"{r.info.model} on {r.info.gpu} x{r.info.tp}, {r.info.precision}", 60)
                for r in runs
            ],
            drop=3,
        ),
    ]
    print_table(columns, title="Mean latencies and throughputs (output tokens/s, requests/s)")


def _print_replays(names: list[str], replays: list[RunReplay]) -> None:
    """Each run's replay: every measured statistic, the prediction and the signed error."""
    for name, again in zip(names, replays, strict=True):
        if again.skipped is not None:
            stdout.print(f"{name}: not replayed: {again.skipped}", markup=False)
            continue
        rows = again.rows
        unit = ["tokens/s" if r.metric == "output_tokens_per_s" else "ms" for r in rows]
        columns = [
            Column("statistic", [f"{r.metric} ({u})" for r, u in zip(rows, unit, strict=True)]),
            Column("measured", [_number(r.measured, 1) for r in rows], justify="right"),
            Column("predicted", [_number(r.predicted, 1) for r in rows], justify="right"),
            Column(
                "error",
                ["-" if r.error is None else f"{r.error:+.1%}" for r in rows],
                justify="right",
            ),
        ]
        print_table(
            columns,
            title=f"{name} replayed: {again.load_model}; {again.deployment}, profile "
            f"{again.profile}",
        )
        median = again.median_abs_error
        if median is not None:
            compared = sum(r.error is not None for r in rows)
            stdout.print(
                f"{name}: median absolute error {median:.1%} over {compared} statistics "
                "(error = predicted / measured - 1)",
                markup=False,
            )


def _count_unknown(run: BenchRun) -> bool:
    """A run that measured latencies but recorded no request count (GenAI-Perf's export)."""
    return run.completed == 0 and (run.ttft.mean is not None or run.e2el.mean is not None)


_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str, option: str = "--max-bytes") -> int:
    """A size in bytes from ``209715200``, ``200M``, ``200MiB`` or ``1G`` (binary units)."""
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (cleaned[:-1], cleaned[-1]) if cleaned[-1:].isalpha() else (cleaned, "")
    if unit in _SIZE_UNITS and number.isdigit() and len(number) <= 15:
        size = int(number) * _SIZE_UNITS[unit]
        if size >= 1:
            return size
    raise UsageError(
        f"{option} {printable(text, 40)}: expected a size in bytes, at least 1, such as "
        "209715200, 200M or 1G (K, M and G count 1024s)"
    )


class _Notes:
    """The import's notes (the names stored) on stderr as they come."""

    def note(self, text: str, *, soft_wrap: bool = False) -> None:
        stderr.print(text, markup=False, soft_wrap=soft_wrap)


@user_errors
def import_command(
    ctx: typer.Context,
    paths: list[Path] = typer.Argument(
        ...,
        help="Result files: guidellm benchmarks.json, `vllm bench serve --save-result` JSON, "
        "GenAI-Perf/AIPerf profile exports (profile_export_genai_perf.json, "
        "profile_export_aiperf.json) or inference-perf stage_N_lifecycle_metrics.json (with "
        "its config.yaml beside it), also gzipped, told apart by their content.",
    ),
    gpu: str | None = typer.Option(
        None,
        "--gpu",
        help="GPU the runs were measured on (overrides the file's --metadata gpu); a catalog "
        "name (`planner catalog gpus`) for --out-csv.",
    ),
    engine: str | None = typer.Option(
        None,
        "--engine",
        help="Engine that served the runs: vllm, sglang, trtllm (overrides the file's).",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="Model that was served (default: the file's); a catalog name or alias for --out-csv.",
    ),
    precision: str | None = typer.Option(
        None,
        "--precision",
        help="Weight precision served: bf16, fp8, ... (overrides the file's --metadata precision).",
    ),
    tp: int | None = typer.Option(
        None,
        "--tp",
        help="Tensor-parallel GPUs per instance (default: the file's tp or num_gpus metadata, "
        "else 1).",
    ),
    out_csv: Path | None = typer.Option(
        None,
        "--out-csv",
        metavar="FILE",
        help="Also write the runs as measurement rows for `planner calibrate` (needs catalog "
        "names for GPU, model and precision).",
    ),
    store: bool = typer.Option(
        True,
        "--store/--no-store",
        help="Keep the runs in planner's store (`planner bench runs list`, the dashboard); "
        "storing needs the GPU, engine, model and precision, --no-store only shows the runs.",
    ),
    run_name: str | None = typer.Option(
        None,
        "--name",
        help="The stored run's name (a file of several runs: NAME-1, NAME-2, ...; one file "
        "only). Default: the file's name.",
    ),
    max_bytes: Annotated[
        str,
        typer.Option(
            "--max-bytes",
            metavar="SIZE",
            help="Refuse a result file larger than this (unpacked, if gzipped), before reading "
            "it: bytes, or K, M, G (1024s).",
        ),
    ] = "200M",
    allow_extreme: Annotated[
        bool,
        typer.Option(
            "--allow-extreme",
            help="Accept values above their plausible range (latencies over 1 hour, durations "
            "over 30 days, throughputs over 1e8/s, ...) for a real run that exceeds it. NaN, "
            "infinite and negative values are always refused.",
        ),
    ] = False,
    replay: Annotated[
        bool,
        typer.Option(
            "--replay",
            help="Also replay each run through the simulator as it ran (a closed loop of its "
            "clients, in waves for GenAI-Perf and AIPerf, or its rate's arrivals; its mean "
            "lengths), timed by the bundled profile of its engine and GPU, and print each "
            "measured statistic beside the prediction with the signed error (needs catalog "
            "names: --gpu, --model, --precision, --engine where the file lacks them).",
        ),
    ] = False,
    as_json: bool = JSON_OPTION,
) -> None:
    """Import benchmark results from guidellm, `vllm bench serve`, GenAI-Perf, AIPerf or
    inference-perf: prints each run's latencies and throughputs and its load model (a closed
    loop of N clients, or a rate and how it arrived: what `planner calibrate --serving`
    replays; --json: the full results, vLLM's summary keys plus a planner block and
    load_model), and with --out-csv writes them as measurements that `planner calibrate` fits.
    Storing the runs and --out-csv need the GPU, engine, model and precision (from the file
    or --gpu, --engine, --model, --precision); with --no-store and no --out-csv, none."""
    from planner.usecases.bench_import import BenchImportRequest, import_bench  # when importing

    request = BenchImportRequest(
        paths=tuple(paths),
        max_bytes=parse_size(max_bytes),
        gpu=gpu,
        engine=engine,
        model=model,
        precision=precision,
        tp=tp,
        out_csv=out_csv,
        store=store,
        name=run_name,
        allow_extreme=allow_extreme,
        replay=replay,
    )
    with sessions_from(ctx) as sessions:
        result = import_bench(request, sessions, progress=_Notes())
    runs = result.runs
    replays = [r.to_dict() for r in result.replays] if replay else [None] * len(runs)
    if as_json:
        print_json(
            [
                {**run.to_dict(), "load_model": load, **({"replay": again} if again else {})}
                for run, load, again in zip(runs, result.load_models, replays, strict=True)
            ]
        )
    else:
        _print_runs(runs)
        for name, load in zip(_run_names(runs), result.load_models, strict=True):
            stderr.print(f"{name}: load model: {load}", markup=False, soft_wrap=True)
        if replay:
            _print_replays(_run_names(runs), result.replays)
    for run in runs:
        if run.completed == 0 and not _count_unknown(run):
            stderr.print(
                f"note: {printable(run.info.source_file)} run {run.info.benchmark + 1} "
                "completed no request; it gives no measurement",
                markup=False,
            )
    if out_csv is not None:
        engine_name = runs[0].info.engine if runs else "ENGINE"
        stderr.print(
            f"wrote {result.rows_written} measurement rows to {printable(str(out_csv))}; fit "
            f"them with `planner calibrate {printable(str(out_csv))} --name NAME --engine "
            f"{engine_name}`",
            markup=False,
            soft_wrap=True,
        )
