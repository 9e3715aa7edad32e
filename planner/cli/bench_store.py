"""``planner bench runs list|show|delete``: the benchmark runs kept in the store."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from planner.cli.context import print_json, sessions_from, stdout, user_errors
from planner.cli.options import JSON_OPTION
from planner.cli.tables import Column, print_table
from planner.common.text import printable

if TYPE_CHECKING:
    from planner.store.bench_runs import StoredRun


DB_OPTION = typer.Option(
    None,
    "--db",
    metavar="URL",
    help="SQLAlchemy URL of the store (default: planner's --db, $PLANNER_DATABASE_URL, else "
    "SQLite in $PLANNER_HOME).",
)
NAME_ARGUMENT = typer.Argument(..., help="Run name or id (see `planner bench runs list`).")
# Summary keys shown as the run's latencies, as (label, key stem).
LATENCY_ROWS = (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E latency", "e2el"))
STATISTICS = ("mean", "median", "p50", "p90", "p99", "std")


def _number(value: Any, digits: int) -> str:
    if not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    return f"{value:,.{digits}f}"


def hardware(run: StoredRun) -> str:
    gpu = run.gpu or "?"
    return f"{gpu} x{run.num_gpus}" if run.num_gpus and run.num_gpus > 1 else gpu


def _safe(text: str) -> str:
    return escape(printable(text))


@user_errors
def runs_list_command(
    ctx: typer.Context,
    sweep: str | None = typer.Option(None, "--sweep", help="Only the stages of this sweep."),
    db: str | None = DB_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """List the benchmark runs in the store: where and how each was measured, its mean and P99
    latencies and its throughput."""
    from planner.usecases.bench_runs import StoredRunsRequest, stored_runs

    with sessions_from(ctx, db) as sessions:
        runs = stored_runs(StoredRunsRequest(sweep), sessions)
    if as_json:
        print_json([run.to_dict() for run in runs])
        return
    if not runs:
        where = f" in sweep {printable(sweep)}" if sweep is not None else ""
        stdout.print(
            f"no benchmark runs{where} yet: measure a server with `planner bench run --url URL`, "
            "or import results with `planner bench import FILE`",
            markup=False,
        )
        return
    summaries = [run.summary for run in runs]
    print_table(
        [
            Column("name", [printable(r.name) for r in runs]),
            Column("when (UTC)", [f"{r.created_at:%Y-%m-%d %H:%M}" for r in runs], 3),
            Column("source", [r.source for r in runs], 4),
            Column("hardware", [printable(hardware(r)) for r in runs], 2),
            Column("model", [printable(r.model or "?", 40) for r in runs], 2),
            Column("load", [r.load_label for r in runs]),
            Column(
                "completed",
                [f"{r.completed}" + (f" ({r.failed} failed)" if r.failed else "") for r in runs],
                justify="right",
            ),
            Column("TTFT ms", [_number(s.get("mean_ttft_ms"), 1) for s in summaries], 0, "right"),
            Column("p99 TTFT", [_number(s.get("p99_ttft_ms"), 1) for s in summaries], 1, "right"),
            Column("TPOT ms", [_number(s.get("mean_tpot_ms"), 2) for s in summaries], 0, "right"),
            Column("E2E ms", [_number(s.get("mean_e2el_ms"), 0) for s in summaries], 1, "right"),
            Column(
                "tok/s", [_number(s.get("output_throughput"), 1) for s in summaries], 1, "right"
            ),
            Column("sweep", [printable(r.sweep or "") for r in runs], 5),
        ],
        title="Benchmark runs (mean latencies; output tokens/s)",
    )


def _flat(data: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Nested metadata as ``a.b: value`` lines."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _flat(value, f"{prefix}{key}.")
    else:
        shown = data if isinstance(data, str) else json.dumps(data)
        yield prefix.rstrip("."), shown


def _request_records(frame: Any) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads(frame.to_json(orient="records"))
    return records


@user_errors
def runs_show_command(
    ctx: typer.Context,
    name: str = NAME_ARGUMENT,
    requests: bool = typer.Option(
        False, "--requests", help="Also print the run's requests, one row each."
    ),
    db: str | None = DB_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """A stored run's summary (vLLM's keys: mean_ttft_ms, p99_tpot_ms, ...) and metadata
    (hardware, model, engine, load, tool); with --requests its requests as well."""
    from planner.usecases.bench_runs import RunShowRequest, show_run

    with sessions_from(ctx, db) as sessions:
        shown_run = show_run(RunShowRequest(name, requests), sessions)
    run, frame = shown_run.run, shown_run.requests
    if as_json:
        data = run.to_dict()
        if frame is not None:
            data["request_rows"] = _request_records(frame)
        print_json(data)
        return
    stdout.print(
        f"[bold]{_safe(run.name)}[/] (#{run.id}, {run.source}, stored "
        f"{run.created_at:%Y-%m-%d %H:%M} UTC): {_safe(run.model or '?')} on "
        f"{_safe(hardware(run))}, {_safe(run.precision or '?')}, {_safe(run.engine or '?')}; "
        f"load {run.load_label}; {run.completed} completed, {run.failed} failed"
    )
    summary = run.summary
    print_table(
        [
            Column("latency (ms)", [label for label, _ in LATENCY_ROWS]),
            *(
                Column(
                    statistic,
                    [_number(summary.get(f"{statistic}_{key}_ms"), 2) for _, key in LATENCY_ROWS],
                    0 if statistic in ("mean", "p99") else 1,
                    "right",
                )
                for statistic in STATISTICS
            ),
        ]
    )
    latency_keys = {f"{s}_{k}_ms" for _, k in LATENCY_ROWS for s in STATISTICS}
    others = [(k, v) for k, v in summary.items() if k not in latency_keys]
    print_table(
        [
            Column("summary", [k for k, _ in others]),
            Column("value", [_number(v, 0 if isinstance(v, int) else 3) for _, v in others]),
        ]
    )
    metadata = list(_flat(run.to_dict()["metadata"]))
    metadata += list(_flat(run.details, "details."))
    if run.target:
        metadata.insert(0, ("target", run.target))
    if run.sweep:
        metadata.insert(0, ("sweep", run.sweep))
    print_table(
        [
            Column("metadata", [printable(k) for k, _ in metadata]),
            Column("value", [printable(v, 200) for _, v in metadata]),
        ]
    )
    if frame is None:
        if run.requests:
            stdout.print(f"{run.requests:,} requests stored: --requests lists them", markup=False)
        return
    if frame.empty:
        stdout.print("no per-request rows stored for this run", markup=False)
        return
    print_table(
        [
            Column("#", [str(i) for i in frame["request_index"]], justify="right"),
            Column("status", list(frame["status"])),
            Column("in", [_number(v, 0) for v in frame["input_tokens"].astype(float)], 2, "right"),
            Column(
                "out", [_number(v, 0) for v in frame["output_tokens"].astype(float)], 2, "right"
            ),
            Column("TTFT ms", [_number(v, 1) for v in frame["ttft_ms"]], justify="right"),
            Column("TPOT ms", [_number(v, 2) for v in frame["tpot_ms"]], justify="right"),
            Column("E2E ms", [_number(v, 1) for v in frame["e2e_ms"]], justify="right"),
            Column("error", [printable(e or "", 60) for e in frame["error_kind"]], 1),
        ],
        title=f"Requests of {printable(run.name)}",
    )


@user_errors
def runs_delete_command(
    ctx: typer.Context,
    name: str = NAME_ARGUMENT,
    yes: bool = typer.Option(False, "--yes", help="Delete without asking (required)."),
    db: str | None = DB_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Delete a stored run and its requests (asks for --yes)."""
    from planner.usecases.bench_runs import RunDeleteRequest, delete_run

    with sessions_from(ctx, db) as sessions:
        deleted = delete_run(RunDeleteRequest(name, confirmed=yes), sessions)
    if as_json:
        print_json({"deleted": deleted.name, "id": deleted.id, "requests": deleted.requests})
    else:
        stdout.print(
            f"deleted run {_safe(deleted.name)} ({deleted.requests:,} requests)",
        )


runs_app = typer.Typer(
    help="Benchmark runs kept in the store: list, show, delete.", no_args_is_help=True
)
runs_app.command("list")(runs_list_command)
runs_app.command("show")(runs_show_command)
runs_app.command("delete")(runs_delete_command)
