"""``planner dashboard``: start the Streamlit dashboard on this machine."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from planner.access import AUTH_CONFIG_ENV
from planner.cli.context import CliState, stderr
from planner.common.net import check_listen_host, is_loopback_host
from planner.common.secrets import redact_url
from planner.common.text import plural
from planner.config import DATABASE_URL_ENV, database_url
from planner.errors import UsageError

if TYPE_CHECKING:
    from planner.access import AuthConfig

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8501


def app_script() -> Path:
    """The dashboard's entry script, installed beside the library as the ``app`` package."""
    import importlib.util

    spec = importlib.util.find_spec("app")
    if spec is None or spec.origin is None:
        raise UsageError("the dashboard is not installed with planner (no 'app' package found)")
    return Path(spec.origin).parent / "main.py"


def streamlit_command(host: str, port: int, auth_config: Path | None = None) -> list[str]:
    """``streamlit run`` with the dashboard's settings: headless, no usage statistics (the
    browser would otherwise call out), no file watcher, uploads capped as the pages say; with
    sign-in, Streamlit reads its [auth] settings from the ``--auth-config`` file itself (so the
    secrets in it never pass through this process's output)."""
    from planner.config import UPLOAD_LIMIT_MB  # the page's stated limit is the server's

    secrets = ["--secrets.files", str(auth_config)] if auth_config is not None else []
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
        *secrets,
    ]  # fmt: skip


def _roles_line(auth: AuthConfig) -> str:
    roles = auth.roles
    if not roles.emails and not roles.groups:
        return (
            f"sign-in: nobody has a role yet ({auth.path} has no [planner.roles]): whoever "
            "signs in is told to ask an admin"
        )
    emails = plural(len(roles.emails), "e-mail address", "e-mail addresses")
    return f"sign-in: {emails} and {plural(len(roles.groups), 'group')} have roles ({auth.path})"


def _checked_auth(host: str, auth_config: Path | None, no_auth: bool) -> AuthConfig | None:
    """The sign-in settings to start with; refuses a non-loopback address without them (or
    without ``--no-auth``) and both at once."""
    from planner.access import read_auth_config

    if auth_config is not None and no_auth:
        raise UsageError("--auth-config and --no-auth: pass one of them, not both")
    if auth_config is not None:
        return read_auth_config(auth_config.expanduser().absolute())
    if not is_loopback_host(host) and not no_auth:
        raise UsageError(
            f"--host {host}: the dashboard would be reachable by others without sign-in; pass "
            "--auth-config FILE (OpenID Connect sign-in with roles; see docs/dashboard.md, "
            '"Sharing the dashboard with a team"), or --no-auth to share it without sign-in'
        )
    return None


def dashboard_command(
    ctx: typer.Context,
    host: str = typer.Option(
        DEFAULT_HOST,
        "--host",
        help="Address to listen on (loopback by default; anything else is reachable by others).",
    ),
    port: int = typer.Option(DEFAULT_PORT, "--port", min=1, max=65535, help="Port to listen on."),
    auth_config: Path | None = typer.Option(
        None,
        "--auth-config",
        help="Sign-in settings (TOML): Streamlit's [auth] section for an OpenID Connect provider "
        "and planner's [planner.roles]; required on an address other than loopback.",
    ),
    no_auth: bool = typer.Option(
        False, "--no-auth", help="Share the dashboard without sign-in (anyone who reaches it)."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the server command and the store, and do not start."
    ),
) -> None:
    """Start the analysts' dashboard in the browser, over the same store as the CLI."""
    check_listen_host(host)
    auth = _checked_auth(host, auth_config, no_auth)
    state: CliState = ctx.find_root().obj or CliState()
    url = database_url(state.db_url)
    command = streamlit_command(host, port, auth.path if auth is not None else None)
    env = {**os.environ, DATABASE_URL_ENV: url}
    env.pop(AUTH_CONFIG_ENV, None)
    if auth is not None:
        env[AUTH_CONFIG_ENV] = str(auth.path)
    elif not is_loopback_host(host):
        stderr.print(
            f"warning: listening on {host} without sign-in (--no-auth): anyone who can reach "
            "this machine can read and change the store through the dashboard",
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
    if auth is not None:
        stderr.print(_roles_line(auth), markup=False)
    stderr.print("press Ctrl-C to stop", markup=False)
    if shutil.which(sys.executable) is None:  # pragma: no cover - the interpreter is running
        raise UsageError(f"cannot run {sys.executable}")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, command, env)  # Streamlit takes the process: Ctrl-C stops it
