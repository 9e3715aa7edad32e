"""``planner bench``: measure a serving endpoint (``run``), time the in-process PyTorch engine
(``engine``), serve an endpoint on loopback (``serve``), or import results from guidellm and
``vllm bench serve`` (``import``)."""

from __future__ import annotations

import typer

from planner.cli.bench_engine import engine_command
from planner.cli.bench_import import import_command
from planner.cli.bench_run import run_command, serve_command
from planner.cli.bench_store import runs_app
from planner.cli.context import user_errors

app = typer.Typer(
    help="Benchmark harness: measure real inference and import results for calibration.",
    no_args_is_help=True,
)
app.command("run")(user_errors(run_command))
app.command("serve")(user_errors(serve_command))
app.command("engine")(user_errors(engine_command))
app.add_typer(runs_app, name="runs")
app.command("import")(import_command)  # wrapped in user_errors where it is defined
