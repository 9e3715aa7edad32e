"""Two people at once on a shared dashboard over PostgreSQL, as a team uses it: ``planner --db
postgresql://... dashboard --auth-config``, a real OpenID provider on loopback, and two signed-in
planners in their own Chromium sessions who each upload a log and start a search at the same
time. Nothing is lost: both logs and both results are stored, each sees only their own running
search, and the audit trail names both."""

from __future__ import annotations

import gzip
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from planner.access import Action, Actor, Role, acting_as
from planner.demo import load_demo
from planner.store import open_store
from planner.store.recommendations import list_briefs
from planner.usecases.audit import AuditRequest, audit_trail
from planner.usecases.datasets import dataset_names
from tests.conftest import DEMO_SAMPLE
from tests.dashboard.browser import (
    DashboardServer,
    free_port,
    new_page,
    skip_without_chromium,
    start_small_search,
    wait_rendered,
    widget,
)
from tests.dashboard.oidc import auth_settings, base_url, oidc_provider, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.postgres]
skip_without_chromium()

USERS: dict[str, dict[str, Any]] = {
    "ana": {"sub": "ana", "email": "ana@example.com"},
    "ben": {"sub": "ben", "email": "ben@example.com"},
}
ROLES = '[planner.roles]\n"ana@example.com" = "planner"\n"ben@example.com" = "planner"\n'
SEARCH_S = 240_000


def _log(folder: Path, name: str, rows: int) -> Path:
    """The first ``rows`` requests of the demo's Azure log, as a gateway export of its own."""
    with gzip.open(DEMO_SAMPLE, "rt", encoding="utf-8") as sample:
        lines = [next(sample) for _ in range(rows + 1)]
    path = folder / f"{name}.csv"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _upload(page: Page, port: int, log: Path) -> None:
    page.goto(base_url(port) + "/request_logs", wait_until="domcontentloaded")
    wait_rendered(page)
    page.locator(widget("logs-upload", 'input[type="file"]')).set_input_files(str(log))
    expect(page.locator(widget("logs-ingest", "button"))).to_be_enabled()


def _wait_for_datasets(url: str, names: set[str], timeout_s: float = 120.0) -> None:
    """Until the store holds every dataset in ``names`` (the page's own message passes on a
    rerun; the store is what must not lose anything)."""
    deadline = time.monotonic() + timeout_s
    with open_store(url) as store:
        while not names <= set(dataset_names(store.session)):
            assert time.monotonic() < deadline, f"not stored in {timeout_s:g} s: {names}"
            time.sleep(0.5)  # the ingests are still running on the server


def test_two_planners_upload_and_search_at_once_and_lose_nothing(
    postgres_url: str, browser: Browser, tmp_path: Path
) -> None:
    load_demo(postgres_url, quick=True)  # the team's store: the demo, on PostgreSQL
    with open_store(postgres_url) as store, store.session() as session:
        searches_before = len(list_briefs(session))
    port = free_port()
    with oidc_provider(USERS, tmp_path / "provider.log") as provider:
        auth = auth_settings(tmp_path / "auth.toml", port, provider, ROLES)
        server = DashboardServer(
            tmp_path, tmp_path / "server.log", ["--auth-config", str(auth)], port, postgres_url
        )
        server.start()
        try:
            with new_page(browser, 1280, 800) as ana, new_page(browser, 1280, 800) as ben:
                sign_in(ana, port, "ana")
                sign_in(ben, port, "ben")
                # both uploads sent before either is waited for: the server runs them at once
                _upload(ana, port, _log(tmp_path, "ana-gateway", 300))
                _upload(ben, port, _log(tmp_path, "ben-gateway", 400))
                ana.locator(widget("logs-ingest", "button")).click()
                ben.locator(widget("logs-ingest", "button")).click()
                _wait_for_datasets(postgres_url, {"ana-gateway", "ben-gateway"})
                # both searches started before either ends
                start_small_search(ana, base_url(port), "demo-azure-conv", 0.1)
                start_small_search(ben, base_url(port), "demo-azure-conv", 0.2)
                for page in (ana, ben):
                    main = page.locator('[data-testid="stMain"]')
                    expect(main).to_contain_text("stored as recommendation #", timeout=SEARCH_S)
                    assert "Another session's search" not in main.inner_text()
        finally:
            server.stop()
    with open_store(postgres_url) as store:
        assert {"ana-gateway", "ben-gateway"} <= set(dataset_names(store.session))
        with store.session() as session:
            assert len(list_briefs(session)) == searches_before + 2
        with acting_as(Actor("auditor", Role.ADMIN, "local")):
            trail = audit_trail(AuditRequest(), store.session)
    done = {(e.actor, e.action) for e in trail}
    for person in ("ana@example.com", "ben@example.com"):
        assert {(person, Action.UPLOAD.key), (person, Action.SEARCH.key)} <= done
