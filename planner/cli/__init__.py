"""The ``planner`` command: a thin shell over the library."""

from __future__ import annotations

import typer

from planner.cli import bench as bench_cli
from planner.cli import datasets as datasets_cli
from planner.cli import db as db_cli
from planner.cli.audit import audit_command
from planner.cli.context import CliState, user_errors
from planner.cli.dashboard import dashboard_command
from planner.cli.export import export_command
from planner.cli.forecast import forecast_command
from planner.cli.ingest import ingest
from planner.cli.latency import calibrate_command, catalog_app, latency
from planner.cli.prices import app as prices_app
from planner.cli.recommend import recommend_command, recommendations_app
from planner.cli.report import report_command
from planner.cli.simulate import simulate_command

app = typer.Typer(
    help="Cost and capacity planner for GPU fleets serving LLMs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from planner import __version__

        typer.echo(f"planner {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    db: str | None = typer.Option(
        None,
        "--db",
        metavar="URL",
        help="SQLAlchemy URL of the store (default: $PLANNER_DATABASE_URL, "
        "else SQLite in $PLANNER_HOME, default ./.planner).",
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    ctx.obj = CliState(db_url=db)


app.command()(user_errors(ingest))
app.command("latency")(latency)
app.command("calibrate")(calibrate_command)
app.command("simulate")(user_errors(simulate_command))
app.command("forecast")(user_errors(forecast_command))
app.command("recommend")(user_errors(recommend_command))
app.command("dashboard")(user_errors(dashboard_command))
app.command("report")(user_errors(report_command))
app.command("audit")(audit_command)
app.command("export")(export_command)
app.add_typer(bench_cli.app, name="bench")
app.add_typer(catalog_app, name="catalog")
app.add_typer(datasets_cli.app, name="datasets")
app.add_typer(db_cli.app, name="db")
app.add_typer(prices_app, name="prices")
app.add_typer(recommendations_app, name="recommendations")


def main() -> None:
    app()
