"""``planner db status|upgrade``: the store's schema version."""

from __future__ import annotations

from typing import Any

import typer

from planner.cli.context import CliState, print_json, stdout, user_errors
from planner.cli.options import JSON_OPTION
from planner.config import database_url_and_source

app = typer.Typer(help="The store's database: schema version and upgrades.", no_args_is_help=True)


def _url(ctx: typer.Context) -> tuple[str, str]:
    state: CliState = ctx.find_root().obj or CliState()
    return database_url_and_source(state.db_url)


@app.command("status")
@user_errors
def status_command(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Show the store's URL and whether its schema is up to date."""
    from planner.common.secrets import redact_url
    from planner.store.db import check_schema, create_store_engine, schema_state

    url, source = _url(ctx)
    engine = create_store_engine(url)
    try:
        state = schema_state(engine, url)
        if not state.newer:
            check_schema(state, url, engine=engine)  # damaged, or not a planner store
    finally:
        engine.dispose()
    if state.newer:
        summary = "newer than this planner (upgrade planner)"
    elif state.up_to_date:
        summary = "up to date"
    else:
        summary = "behind (run `planner db upgrade`)"
    data: dict[str, Any] = {
        "url": redact_url(url),
        "source": source,
        "revision": state.revision,
        "latest": state.head,
        "up_to_date": state.up_to_date,
        "newer": state.newer,
    }
    if as_json:
        print_json(data)
    else:
        stdout.print(
            f"store {data['url']}: schema {state.revision or 'empty'}, latest {state.head}: "
            f"{summary}",
            markup=False,
        )


@app.command("upgrade")
@user_errors
def upgrade_command(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Bring the store's schema up to the latest version, keeping its data."""
    from planner.common.secrets import redact_url
    from planner.store.db import bring_up_to_date, create_store_engine

    url, _source = _url(ctx)
    engine = create_store_engine(url)
    try:
        before = bring_up_to_date(engine, url)
    finally:
        engine.dispose()
    data = {
        "url": redact_url(url),
        "from": before.revision,
        "revision": before.head,
        "upgraded": not before.up_to_date,
    }
    if as_json:
        print_json(data)
    elif data["upgraded"]:
        stdout.print(
            f"store {data['url']}: schema upgraded from {before.revision or 'empty'} "
            f"to {before.head}",
            markup=False,
        )
    else:
        stdout.print(f"store {data['url']}: schema already at {before.head}", markup=False)
