"""A real OpenID provider on loopback for the sign-in tests (``oidc-provider-mock``, a PyPI
package) and the dashboard's sign-in settings pointing at it. Shared by the browser tests of a
dashboard shared by a team."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import Page

from tests.dashboard.browser import free_port, wait_rendered

START_S = 30.0
CLIENT_SECRET = "planner-client-secret-for-tests"


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@contextmanager
def oidc_provider(users: Mapping[str, Mapping[str, Any]], log: Path) -> Iterator[str]:
    """The provider on a free loopback port with ``users`` (subject: claims) predefined; its
    URL. Polls its discovery document until it answers."""
    port = free_port()
    claims = [arg for user in users.values() for arg in ("--user-claims", json.dumps(user))]
    program = Path(sys.executable).parent / "oidc-provider-mock"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(program), "--port", str(port), *claims], stdout=output, stderr=subprocess.STDOUT
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + START_S
            while not _healthy(f"{url}/.well-known/openid-configuration"):
                assert process.poll() is None, f"oidc-provider-mock exited: {log.read_text()}"
                assert time.monotonic() < deadline, "oidc-provider-mock did not start"
                time.sleep(0.2)  # still starting
            yield url
        finally:
            process.terminate()
            process.wait(timeout=15)


def auth_settings(path: Path, dashboard_port: int, provider: str, roles: str) -> Path:
    """Streamlit's [auth] settings for the provider, plus planner's ``roles`` (TOML text)."""
    path.write_text(
        "[auth]\n"
        f'redirect_uri = "http://localhost:{dashboard_port}/oauth2callback"\n'
        'cookie_secret = "a-cookie-secret-only-these-tests-use"\n'
        'client_id = "planner"\n'
        f'client_secret = "{CLIENT_SECRET}"\n'
        f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n' + roles
    )
    return path


def base_url(port: int) -> str:
    return f"http://localhost:{port}"  # the redirect URI's host: the session cookie's too


def sign_in(page: Page, port: int, subject: str) -> None:
    """Sign in through the provider's own authorize page, as that person."""
    page.goto(base_url(port) + "/", wait_until="domcontentloaded")
    page.get_by_role("button", name="Sign in").click()
    page.locator(f'button[name="sub"][value="{subject}"]').click()
    wait_rendered(page)
