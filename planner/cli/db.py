"""``planner db status|upgrade``: the store's schema version."""

from __future__ import annotations

import typer

from planner.cli.context import CliState, print_json, stdout, user_errors
from planner.config import database_url
from planner.store.db import (
    create_store_engine,
    current_revision,
    head_revision,
    redact_url,
    store_errors,
    upgrade,
)

app = typer.Typer(help="The store's database: schema version and upgrades.", no_args_is_help=True)


def _url(ctx: typer.Context) -> str:
    state: CliState = ctx.find_root().obj or CliState()
    return database_url(state.db_url)


@app.command("status")
@user_errors
def status_command(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print as JSON.")
) -> None:
    """Show the store's URL and whether its schema is up to date."""
    url = _url(ctx)
    engine = create_store_engine(url)
    try:
        with store_errors(url):
            current = current_revision(engine)
    finally:
        engine.dispose()
    head = head_revision()
    data = {
        "url": redact_url(url),
        "revision": current,
        "latest": head,
        "up_to_date": current == head,
    }
    if as_json:
        print_json(data)
    else:
        state = "up to date" if current == head else "behind (run `planner db upgrade`)"
        stdout.print(f"store {data['url']}: schema {current or 'empty'}, latest {head}: {state}")


@app.command("upgrade")
@user_errors
def upgrade_command(ctx: typer.Context) -> None:
    """Bring the store's schema up to the latest version, keeping its data."""
    url = _url(ctx)
    engine = create_store_engine(url)
    try:
        with store_errors(url):
            upgrade(engine)
            stdout.print(f"store schema at {current_revision(engine)}")
    finally:
        engine.dispose()
