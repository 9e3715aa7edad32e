"""``planner datasets list|show|delete``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from planner.cli.context import print_json, sessions_from, stdout, user_errors
from planner.cli.options import JSON_OPTION
from planner.cli.tables import Column, print_table, print_whole
from planner.common.text import duration_text, printable

if TYPE_CHECKING:
    from planner.workload.summary import DatasetSummary


app = typer.Typer(help="Ingested datasets: list, inspect, delete.", no_args_is_help=True)


@app.command("list")
@user_errors
def list_command(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List the datasets in the store."""
    from planner.usecases.datasets import list_datasets

    with sessions_from(ctx) as sessions:
        rows = list_datasets(sessions)
    if as_json:
        print_json(rows)
        return
    if not rows:
        stdout.print("no datasets yet: load one with `planner ingest PATH`")
        return
    print_table(
        [
            Column("name", [printable(str(r["name"])) for r in rows]),
            Column("format", [printable(str(r["format"])) for r in rows], 2),
            Column("rows", [f"{r['rows']:,}" for r in rows], justify="right"),
            Column("start (UTC)", [f"{r['start_at']:%Y-%m-%d %H:%M}" for r in rows]),
            Column("end (UTC)", [f"{r['end_at']:%Y-%m-%d %H:%M}" for r in rows], 1),
        ]
    )


@app.command("show")
@user_errors
def show_command(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Dataset name (see `planner datasets list`)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Rows, span, token lengths and request rates of a dataset, per model too."""
    from planner.usecases.datasets import show_dataset

    with sessions_from(ctx) as sessions:
        dataset = show_dataset(name, sessions)
    if as_json:
        print_json(dataset.to_dict())
        return
    summary = dataset.summary
    stdout.print(
        f"[bold]{_safe(dataset.name)}[/] ({_safe(dataset.format)}) "
        f"from {_safe(dataset.source_path)}"
    )
    stdout.print(
        f"{summary.rows:,} requests, {summary.start_at:%Y-%m-%d %H:%M:%S} to "
        f"{summary.end_at:%Y-%m-%d %H:%M:%S} UTC ({duration_text(summary.duration_s)})"
    )
    groups = [summary, *summary.by_model]
    table = Table(
        "",
        "all models" if summary.by_model else _safe(summary.model or "all requests"),
        *(_safe(g.model or "(none)") for g in summary.by_model),
    )
    hourly_note = "" if summary.per_hour.span_covers_window else " *"
    metrics: list[tuple[str, Callable[[DatasetSummary], str]]] = [
        ("requests", lambda g: f"{g.rows:,}"),
        ("input tokens mean", lambda g: f"{g.input_tokens.mean:,.0f}"),
        (
            "input tokens P50 / P99",
            lambda g: f"{g.input_tokens.p50:,.0f} / {g.input_tokens.p99:,.0f}",
        ),
        ("output tokens mean", lambda g: f"{g.output_tokens.mean:,.0f}"),
        (
            "output tokens P50 / P99",
            lambda g: f"{g.output_tokens.p50:,.0f} / {g.output_tokens.p99:,.0f}",
        ),
        ("requests/min mean / peak", lambda g: f"{g.per_minute.mean:,.1f} / {g.per_minute.peak:,}"),
        (
            f"requests/h mean / peak{hourly_note}",
            lambda g: f"{g.per_hour.mean:,.0f} / {g.per_hour.peak:,}",
        ),
    ]
    for label, render in metrics:
        table.add_row(label, *(render(g) for g in groups))
    print_whole(table)
    if hourly_note:
        stdout.print("* the log spans less than an hour: its hourly figures count the whole log")
    stdout.print("peaks: the busiest sliding 60 s / 3600 s window anywhere in the log")


@app.command("delete")
@user_errors
def delete_command(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Dataset name."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Delete a dataset and its requests."""
    from planner.usecases.datasets import delete_dataset

    with sessions_from(ctx) as sessions:
        removed = delete_dataset(name, sessions)
    if as_json:
        print_json({"deleted": name, "rows": removed})
    else:
        stdout.print(f"deleted dataset {_safe(name)} ({removed:,} rows)")


def _safe(text: str) -> str:
    """Stored text for the terminal: control characters escaped, Rich markup escaped."""
    return escape(printable(text))
