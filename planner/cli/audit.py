"""``planner audit``: the audit trail the dashboard's admins read, from the command line."""

from __future__ import annotations

from pathlib import Path

import typer

from planner.cli.context import print_json, sessions_from, stdout, user_errors
from planner.cli.options import JSON_OPTION
from planner.cli.tables import Column, print_table
from planner.common.text import printable


@user_errors
def audit_command(
    ctx: typer.Context,
    limit: int = typer.Option(50, "--limit", help="How many entries, newest first."),
    actor: str | None = typer.Option(None, "--actor", help="Only this e-mail or user name."),
    action: str | None = typer.Option(
        None, "--action", help="Only this action (upload, import-prices, search, delete, ...)."
    ),
    csv_out: Path | None = typer.Option(
        None, "--csv", help="Also write the entries to this CSV file (written whole or not at all)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Who uploaded, imported, ran, exported or deleted what in the store, and when."""
    from planner.common.files import atomic_output, check_output_path
    from planner.usecases.audit import AuditRequest, audit_csv, audit_trail

    if csv_out is not None:
        check_output_path(csv_out, "--csv")
    request = AuditRequest(limit=limit, actor=actor, action=action)
    with sessions_from(ctx) as sessions:
        entries = audit_trail(request, sessions)
    if csv_out is not None:
        with atomic_output(csv_out, "--csv") as temp:
            temp.write_bytes(audit_csv(entries))
    if as_json:
        print_json([{**e.__dict__, "at": e.at.isoformat(timespec="seconds")} for e in entries])
        return
    if not entries:
        stdout.print("the audit trail is empty (or nothing matches)")
        return
    print_table(
        [
            Column("at (UTC)", [f"{e.at:%Y-%m-%d %H:%M:%S}" for e in entries]),
            Column("who", [printable(e.actor) for e in entries]),
            Column("action", [e.action for e in entries]),
            Column("what", [printable(e.target) for e in entries], wrap=True),
            Column("role", [e.role for e in entries], 2),
            Column("detail", [printable(e.detail) for e in entries], 1, wrap=True),
        ]
    )
