"""``planner dashboard`` and ``make demo`` as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.dashboard.browser import free_port
from tests.e2e.test_cli import run


def test_help_names_the_options(tmp_path: Path) -> None:
    result = run(tmp_path, "dashboard", "--help")
    assert result.returncode == 0
    for option in ("--host", "--port", "--dry-run"):
        assert option in result.stdout


def test_loopback_by_default_and_no_usage_statistics(tmp_path: Path) -> None:
    result = run(tmp_path, "dashboard", "--dry-run")
    assert result.returncode == 0, result.stderr
    command = result.stdout.splitlines()[0].split()
    settings = dict(zip(command[::2], command[1::2], strict=False))
    assert command[command.index("--server.address") + 1] == "127.0.0.1"
    assert command[command.index("--browser.gatherUsageStats") + 1] == "false"
    assert command[command.index("--server.headless") + 1] == "true"
    assert command[command.index("--server.port") + 1] == "8501"
    assert "app/main.py" in " ".join(command) and settings
    assert f"store: sqlite:///{tmp_path}/planner.db" in result.stdout
    assert "warning" not in result.stderr


def test_binding_beyond_loopback_needs_sign_in_or_no_auth(tmp_path: Path) -> None:
    refused = run(tmp_path, "dashboard", "--host", "0.0.0.0", "--dry-run")
    assert refused.returncode == 2
    assert "--auth-config" in refused.stderr and "--no-auth" in refused.stderr
    assert "Traceback" not in refused.stderr and refused.stdout == ""
    shared = run(tmp_path, "dashboard", "--host", "0.0.0.0", "--no-auth", "--dry-run")
    assert shared.returncode == 0
    assert "warning: listening on 0.0.0.0 without sign-in (--no-auth)" in shared.stderr


AUTH_SECRET = "s3cret-client-value-never-printed"


def _auth_file(tmp_path: Path, roles: str = "") -> Path:
    path = tmp_path / "auth.toml"
    path.write_text(
        "[auth]\n"
        'redirect_uri = "http://localhost:8501/oauth2callback"\n'
        'cookie_secret = "cookie-secret-never-printed"\n'
        'client_id = "planner"\n'
        f'client_secret = "{AUTH_SECRET}"\n'
        'server_metadata_url = "http://127.0.0.1:9/.well-known/openid-configuration"\n' + roles
    )
    return path


def test_sign_in_settings_start_it_on_any_address_and_stay_secret(tmp_path: Path) -> None:
    auth = _auth_file(
        tmp_path, '[planner.roles]\n"a@example.com" = "admin"\n"group:fin" = "viewer"\n'
    )
    result = run(
        tmp_path, "dashboard", "--host", "0.0.0.0", "--auth-config", str(auth), "--dry-run"
    )
    assert result.returncode == 0, result.stderr
    assert f"--secrets.files {auth}" in result.stdout
    assert "warning" not in result.stderr
    output = result.stdout + result.stderr
    assert AUTH_SECRET not in output and "cookie-secret-never-printed" not in output
    # a file with only [auth] is valid: nobody has a role yet
    bare = run(tmp_path, "dashboard", "--auth-config", str(_auth_file(tmp_path)), "--dry-run")
    assert bare.returncode == 0, bare.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[auth]\nredirect_uri = 1\n", "lacks redirect_uri"),
        ("not toml [", "not valid TOML"),
        ("[planner]\n", "no [auth] section"),
    ],
)
def test_bad_sign_in_settings_are_clear_errors(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "auth.toml"
    path.write_text(text)
    result = run(tmp_path, "dashboard", "--auth-config", str(path), "--dry-run")
    assert result.returncode == 2
    assert expected in result.stderr and str(path) in result.stderr
    assert "Traceback" not in result.stderr
    wrong_role = _auth_file(tmp_path, '[planner.roles]\n"a@example.com" = "owner"\n')
    result = run(tmp_path, "dashboard", "--auth-config", str(wrong_role), "--dry-run")
    assert "expected one of viewer, planner, admin" in result.stderr
    assert AUTH_SECRET not in result.stderr


@pytest.mark.parametrize("host", ["127.1", "127.0.0.2", "::1", "localhost", "0:0:0:0:0:0:0:1"])
def test_every_form_of_loopback_is_loopback(tmp_path: Path, host: str) -> None:
    result = run(tmp_path, "dashboard", "--host", host, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr


def test_bad_host_and_port_are_clear_errors(tmp_path: Path) -> None:
    bad_host = run(tmp_path, "dashboard", "--host", " ")
    assert bad_host.returncode != 0
    assert "--host" in bad_host.stderr and "Traceback" not in bad_host.stderr
    bad_port = run(tmp_path, "dashboard", "--port", "70000")
    assert bad_port.returncode != 0
    assert "--port" in bad_port.stderr and "Traceback" not in bad_port.stderr


def test_the_store_named_by_db_is_the_one_served(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'other.db'}"
    result = run(tmp_path, "dashboard", "--dry-run", db=url)
    assert f"store: {url}" in result.stdout


def _healthy(url: str, process: subprocess.Popen[str], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                return bool(reply.read().strip() == b"ok")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)  # still loading the demo data or starting the server
    return False


def test_make_demo_loads_the_demo_once_and_serves_the_dashboard(tmp_path: Path) -> None:
    venv = Path(sys.prefix)
    port = free_port()
    home = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if k != "PLANNER_DATABASE_URL"}
    command = [
        "make", "demo", f"VENV={venv}", f"DEMO_HOME={home}", f"DEMO_PORT={port}",
        "DEMO_DATA_ARGS=--quick",
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert _healthy(f"http://127.0.0.1:{port}/_stcore/health", process, 400), (
            process.stdout.read() if process.stdout and process.poll() is not None else ""
        )
    finally:
        os.killpg(process.pid, 15)
        output, _ = process.communicate(timeout=30)
    assert "demo store ready: forecast #1, recommendation #1" in output
    assert f"planner dashboard: http://localhost:{port}" in output
    # again: nothing is loaded twice
    again = subprocess.run(
        ["make", "demo-data", f"VENV={venv}", f"DEMO_HOME={home}", "DEMO_DATA_ARGS=--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert "demo store ready: forecast #1, recommendation #1" in again.stdout
    assert "planner --db" not in again.stderr and "planner ingest" not in again.stderr
