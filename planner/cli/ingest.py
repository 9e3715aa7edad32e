"""``planner ingest``."""

from __future__ import annotations

import zoneinfo
from datetime import datetime
from functools import cache
from pathlib import Path

import pandas as pd
import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from planner.cli.context import print_json, stderr, stdout, store_from
from planner.common.text import closest, printable, shown
from planner.errors import UsageError
from planner.ingest import FORMAT_NAMES, IngestOptions, TimeKind, TimeSpec, TimeUnit, ingest_file
from planner.ingest.formats import FIELDS, parse_mapping
from planner.ingest.normalize import ARRIVAL_MAX, ARRIVAL_MIN, ARRIVAL_RANGE
from planner.ingest.pipeline import check_name


def parse_start(value: str | None, option: str = "--start") -> datetime | None:
    """An ISO 8601 option value as a UTC datetime (naive values are UTC), in planner's range."""
    if value is None:
        return None
    try:
        moment = pd.Timestamp(value)
        if pd.isna(moment):
            raise ValueError("not a time")
        if moment.tzinfo is None:
            moment = moment.tz_localize("UTC")
        result = moment.to_pydatetime()
    except (ValueError, TypeError, OverflowError) as exc:
        raise UsageError(
            f"{option} {shown(value)}: expected an ISO 8601 date-time, e.g. 2024-05-01T00:00:00Z"
        ) from exc
    if not ARRIVAL_MIN <= result < ARRIVAL_MAX:
        raise UsageError(f"{option} {shown(value)}: out of range; {ARRIVAL_RANGE}")
    return result


@cache
def _known_zones() -> tuple[str, ...]:
    return tuple(sorted(zoneinfo.available_timezones()))


def check_timezone(value: str) -> str:
    """A zone name pandas and the tz database know (Europe/Berlin, UTC, ...)."""
    try:
        pd.Timestamp("2024-01-01").tz_localize(value)
    except Exception as exc:  # pytz, zoneinfo and dateutil each fail in their own way
        suggestions = closest(value, _known_zones()).split(", ")[:5]
        raise UsageError(
            f"--timezone {shown(value)}: unknown time zone; expected a tz database name, "
            f"e.g. {', '.join(suggestions) or 'Europe/Berlin'}"
        ) from exc
    return value


def check_time_format(value: str | None) -> str | None:
    """A strptime pattern with known directives only."""
    if value is None:
        return None
    if not value.strip():
        raise UsageError("--time-format: the pattern is empty; leave it out for ISO 8601")
    try:
        datetime.strptime("", value)
    except ValueError as exc:
        if "does not match format" not in str(exc):  # bad directive, stray %, ...
            raise UsageError(
                f"--time-format {shown(value)}: not a strptime pattern ({exc}); "
                "e.g. '%Y-%m-%d %H:%M:%S'"
            ) from exc
    if "%" not in value:
        raise UsageError(
            f"--time-format {shown(value)}: no directives (such as %Y, %m, %d, %H); "
            "e.g. '%Y-%m-%d %H:%M:%S'"
        )
    return value


def ingest(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="Log file: CSV (or .csv.gz), JSON Lines or Parquet."),
    name: str | None = typer.Option(None, "--name", help="Dataset name (default: the file name)."),
    log_format: str | None = typer.Option(
        None,
        "--format",
        "-f",
        help=f"Log format: {', '.join(FORMAT_NAMES)} (default: detected from the header).",
    ),
    mapping: list[str] = typer.Option(
        [],
        "--map",
        metavar="FIELD=COLUMN",
        help=f"Generic format: the column of a request field ({', '.join(FIELDS)}).",
    ),
    time_kind: TimeKind = typer.Option(
        TimeKind.DATETIME,
        "--time-kind",
        help="Generic format: arrival as date-times, numbers since --start, or since the epoch.",
    ),
    time_unit: TimeUnit = typer.Option(
        TimeUnit.S, "--time-unit", help="Unit of numeric arrival times."
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
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Load a request log into the store as a dataset (all rows or none)."""
    if on_error not in ("fail", "skip"):
        raise UsageError(f"--on-error {on_error!r}: expected fail or skip")
    if log_format is not None and log_format not in FORMAT_NAMES:
        raise UsageError(
            f"--format {log_format!r}: unknown format; "
            f"known formats: {closest(log_format, FORMAT_NAMES)}"
        )
    if name is not None:
        check_name(name)
    options = IngestOptions(
        name=name,
        format=log_format,
        mapping=parse_mapping(mapping),
        time=TimeSpec(
            time_kind, time_unit, check_time_format(time_format), check_timezone(timezone)
        ),
        start=parse_start(start),
        model=model,
        on_error="skip" if on_error == "skip" else "fail",
        replace=replace,
    )
    with (
        store_from(ctx) as store,
        Progress(
            TextColumn("ingesting {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("rows"),
            TimeElapsedColumn(),
            console=stderr,
            disable=quiet or not stderr.is_terminal,
            transient=True,
        ) as bar,
    ):
        task = bar.add_task(escape(printable(path.name, 60)), total=None)

        def advance(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=max(total, done) if total else None)

        result = ingest_file(store, path, options, progress=advance)

    if as_json:
        print_json(result.to_dict())
        return
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
    if result.skipped_rows:
        stderr.print(f"skipped {result.skipped_rows:,} bad rows; first:")
        for example in result.skipped_examples:
            stderr.print(f"  {example}", markup=False, soft_wrap=True)
