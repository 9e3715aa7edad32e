"""``planner bench``: measure a serving endpoint (``run``), serve a stand-in endpoint on
loopback (``serve``), or import results from guidellm and ``vllm bench serve`` (``import``)."""

from __future__ import annotations

import typer

from planner.cli.bench_import import import_command
from planner.cli.bench_run import run_command, serve_command
from planner.cli.context import user_errors

app = typer.Typer(
    help="Benchmark harness: measure real inference and import results for calibration.",
    no_args_is_help=True,
)
app.command("run")(user_errors(run_command))
app.command("serve")(user_errors(serve_command))
app.command("import")(import_command)  # wrapped in user_errors where it is defined
