"""``planner dashboard``: start the Streamlit dashboard on this machine."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import typer

from planner.cli.context import CliState, stderr
from planner.common.net import check_listen_host, is_loopback_host
from planner.common.secrets import redact_url
from planner.config import DATABASE_URL_ENV, database_url
from planner.errors import UsageError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8501


def app_script() -> Path:
    """The dashboard's entry script, installed beside the library as the ``app`` package."""
    import importlib.util

    spec = importlib.util.find_spec("app")
    if spec is None or spec.origin is None:
        raise UsageError("the dashboard is not installed with planner (no 'app' package found)")
    return Path(spec.origin).parent / "main.py"


def streamlit_command(host: str, port: int) -> list[str]:
    """``streamlit run`` with the dashboard's settings: headless, no usage statistics (the
    browser would otherwise call out), no file watcher, uploads capped as the pages say."""
    from planner.config import UPLOAD_LIMIT_MB  # the page's stated limit is the server's

    return [
        sys.executable, "-m", "streamlit", "run", str(app_script()),
        "--server.address", host,
        "--server.port", str(port),
        "--server.headless", "true",
        "--server.fileWatcherType", "none",
        "--server.runOnSave", "false",
        "--server.maxUploadSize", str(UPLOAD_LIMIT_MB),
        "--browser.gatherUsageStats", "false",
        "--global.developmentMode", "false",
        "--client.toolbarMode", "minimal",
        "--theme.base", "light",
    ]  # fmt: skip


def dashboard_command(
    ctx: typer.Context,
    host: str = typer.Option(
        DEFAULT_HOST,
        "--host",
        help="Address to listen on (loopback by default; anything else is reachable by others).",
    ),
    port: int = typer.Option(DEFAULT_PORT, "--port", min=1, max=65535, help="Port to listen on."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the server command and the store, and do not start."
    ),
) -> None:
    """Start the analysts' dashboard in the browser, over the same store as the CLI."""
    check_listen_host(host)
    state: CliState = ctx.find_root().obj or CliState()
    url = database_url(state.db_url)
    command = streamlit_command(host, port)
    env = {**os.environ, DATABASE_URL_ENV: url}
    if not is_loopback_host(host):
        stderr.print(
            f"warning: listening on {host}, not loopback: anyone who can reach this machine "
            "can read the store through the dashboard",
            markup=False,
        )
    shown_host = "localhost" if host in ("127.0.0.1", "::1") else host
    store = redact_url(url)  # the password stays in the server's environment, never shown
    if dry_run:
        typer.echo(" ".join(command))
        typer.echo(f"store: {store}")
        return
    stderr.print(
        f"planner dashboard: http://{shown_host}:{port}  (store: {store})",
        markup=False,
        soft_wrap=True,
    )
    stderr.print("press Ctrl-C to stop", markup=False)
    if shutil.which(sys.executable) is None:  # pragma: no cover - the interpreter is running
        raise UsageError(f"cannot run {sys.executable}")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, command, env)  # Streamlit takes the process: Ctrl-C stops it
