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
    from planner.usecases.datasets import DatasetView
    from planner.workload.summary import DatasetSummary

# the longest shortened model name a column header shows (longer: #k, named in the models table)
SHORT_LABEL = 20


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
    labels = _model_labels(dataset)
    if summary.by_model:
        _print_models(dataset, labels)
    else:
        catalog = dataset.catalog_model(summary.model)
        stdout.print(
            f"model: {_safe(summary.model or '(none logged)')}, catalog model "
            f"{_safe(catalog or 'unmapped')}"
        )
    table = Table(
        "",
        "all models" if summary.by_model else _safe(summary.model or "all requests"),
        *(_safe(label) for label in labels),
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


def _model_labels(dataset: DatasetView) -> list[str]:
    """A column header for each model of a log of several, never ambiguous: its catalog model
    where no other log name maps to it, else its name without the ``org/`` prefix where that is
    short and unique, else ``#k`` (the models table gives each one's whole name)."""
    names = [g.model for g in dataset.summary.by_model]
    catalogs = [dataset.catalog_model(None if n == "(none)" else n) for n in names]
    labels: list[str] = []
    for index, (name, catalog) in enumerate(zip(names, catalogs, strict=True), 1):
        tail = (name or "").rsplit("/", 1)[-1]
        tails = [(n or "").rsplit("/", 1)[-1] for n in names]
        if catalog is not None and catalogs.count(catalog) == 1:
            labels.append(catalog)
        elif 0 < len(tail) <= SHORT_LABEL and tails.count(tail) == 1:
            labels.append(tail)
        else:
            labels.append(f"#{index}")
    # a catalog label may equal another model's shortened name: both become #k
    return [
        label if labels.count(label) == 1 else f"#{index}" for index, label in enumerate(labels, 1)
    ]


def _print_models(dataset: DatasetView, labels: list[str]) -> None:
    """The log's models as rows, each name whole (folded, never cut): the column header the
    table below gives it, the catalog model it maps to, its requests and share."""
    summary = dataset.summary
    table = Table("column", "model as logged", "catalog model", "requests", "share")
    for label, group in zip(labels, summary.by_model, strict=True):
        name = None if group.model == "(none)" else group.model
        catalog = dataset.catalog_model(name)
        share = group.rows / summary.rows if summary.rows else 0.0
        table.add_row(
            _safe(label),
            _safe(group.model or "(none)"),
            _safe(catalog or "unmapped"),
            f"{group.rows:,}",
            f"{share:.1%}",
        )
    for column in table.columns[3:]:
        column.justify = "right"
    print_whole(table)


def _safe(text: str) -> str:
    """Stored text for the terminal: control characters escaped, Rich markup escaped."""
    return escape(printable(text))
