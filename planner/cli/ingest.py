"""``planner ingest``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from planner.cli.context import print_json, sessions_from, stderr, stdout
from planner.cli.options import (
    INGEST_FIELDS,
    INGEST_FORMAT_NAMES,
    INGEST_PREFIX_BLOCK_TOKENS,
    TIME_KINDS,
    TIME_UNITS,
)
from planner.common.text import printable

if TYPE_CHECKING:
    from planner.ingest.pipeline import IngestResult


def ingest(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="Log file: CSV (or .csv.gz), JSON Lines or Parquet."),
    name: str | None = typer.Option(None, "--name", help="Dataset name (default: the file name)."),
    log_format: str | None = typer.Option(
        None,
        "--format",
        "-f",
        help=f"Log format: {', '.join(INGEST_FORMAT_NAMES)} (default: detected from the header).",
    ),
    mapping: list[str] = typer.Option(
        [],
        "--map",
        metavar="FIELD=COLUMN",
        help=f"Generic format: the column of a request field ({', '.join(INGEST_FIELDS)}).",
    ),
    time_kind: str = typer.Option(
        "datetime",
        "--time-kind",
        metavar="|".join(TIME_KINDS),
        help="Generic format: arrival as date-times, numbers since --start, or since the epoch.",
    ),
    time_unit: str = typer.Option(
        "s", "--time-unit", metavar="|".join(TIME_UNITS), help="Unit of numeric arrival times."
    ),
    time_format: str | None = typer.Option(
        None, "--time-format", help="strptime pattern of arrival date-times (default: ISO 8601)."
    ),
    timezone: str = typer.Option(
        "UTC",
        "--timezone",
        help="Zone of date-times written without an offset (e.g. Europe/Berlin).",
    ),
    start: str | None = typer.Option(
        None,
        "--start",
        help="Start of a log whose times are relative (mooncake, burstgpt), ISO 8601.",
    ),
    model: str | None = typer.Option(None, "--model", help="Model name for rows that have none."),
    on_error: str = typer.Option(
        "fail",
        "--on-error",
        help="fail: stop at the first bad row; skip: leave bad rows out, report them.",
    ),
    replace: bool = typer.Option(
        False, "--replace", help="Replace an existing dataset of that name."
    ),
    allow_any_time: bool = typer.Option(
        False,
        "--allow-any-time",
        help="Keep arrival times before 1970 or more than a year from now (refused by default "
        "as a wrong --time-unit, --time-kind or --start).",
    ),
    prefix_block_tokens: int = typer.Option(
        INGEST_PREFIX_BLOCK_TOKENS,
        "--prefix-block-tokens",
        help="Tokens each prefix block id of the log stands for (Mooncake's hash_ids: 512; a "
        "log hashed at vLLM's KV blocks: 16); kept with the dataset for simulate and recommend.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Load a request log into the store as a dataset (all rows or none)."""
    from planner.ingest.options import ingest_options
    from planner.usecases.ingest import IngestRequest, ingest

    options = ingest_options(
        name=name,
        log_format=log_format,
        mapping=mapping,
        time_kind=time_kind,
        time_unit=time_unit,
        time_format=time_format,
        timezone=timezone,
        start=start,
        model=model,
        on_error=on_error,
        replace=replace,
        allow_any_time=allow_any_time,
        prefix_block_tokens=prefix_block_tokens,
    )
    with ExitStack() as opened:
        advance = opened.enter_context(_progress_bar(path, quiet))
        sessions = opened.enter_context(sessions_from(ctx))
        result = ingest(IngestRequest(path, options), sessions, progress=advance)
    if as_json:
        print_json(result.to_dict())
        return
    _print_result(path, result)


@contextmanager
def _progress_bar(path: Path, quiet: bool) -> Iterator[Callable[[int, int | None], None]]:
    """A progress bar on stderr (none when quiet or not a terminal); yields its update."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("ingesting {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("rows"),
        TimeElapsedColumn(),
        console=stderr,
        disable=quiet or not stderr.is_terminal,
        transient=True,
    ) as bar:
        task = bar.add_task(escape(printable(path.name, 60)), total=None)

        def advance(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=max(total, done) if total else None)

        yield advance


def _print_result(path: Path, result: IngestResult) -> None:
    if result.status == "already-present":
        stdout.print(
            f"{escape(printable(str(path)))}: already present as dataset "
            f"[bold]{escape(printable(result.dataset))}[/] ({result.rows:,} rows); "
            "nothing to do (--replace to ingest again)"
        )
        return
    verb = "replaced" if result.status == "replaced" else "ingested"
    stdout.print(
        f"{verb} dataset [bold]{escape(printable(result.dataset))}[/] ({result.format}): "
        f"{result.rows:,} rows, "
        f"{result.start_at:%Y-%m-%d %H:%M:%S} to {result.end_at:%Y-%m-%d %H:%M:%S} UTC, "
        f"in {result.seconds:.1f} s"
    )
    if result.out_of_order_rows:
        stdout.print(
            f"{result.out_of_order_rows:,} rows arrived out of order; "
            "the store keeps them sorted by arrival"
        )
    for note in result.notes:
        stdout.print(f"note: {note}", markup=False, soft_wrap=True)
    if result.skipped_rows:
        stderr.print(f"skipped {result.skipped_rows:,} bad rows; first:")
        for example in result.skipped_examples:
            stderr.print(f"  {example}", markup=False, soft_wrap=True)
