"""A dashboard shared by a team, as its people use it: ``planner dashboard --auth-config`` over a
copy of the demo store, a real OpenID provider on loopback (``oidc-provider-mock``), and each
person in their own headless Chromium session signing in through the provider's own pages.

Signed-out visitors see no data; a viewer reads pages and downloads a report and has an upload
refused by the server; a planner (by group claim) runs a search; an identity with no role is
told to ask an admin; the admin reads the audit trail naming them all, downloads it, signs out.
The tests run in file order: the admin's reads what the earlier ones did.
"""

from __future__ import annotations

import csv
import io
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from planner.store import open_store
from planner.store.recommendations import list_briefs
from planner.usecases.datasets import dataset_names
from tests.dashboard.browser import (
    DashboardServer,
    exceptions_on,
    free_port,
    new_page,
    skip_without_chromium,
    start_small_search,
    wait_rendered,
    widget,
)
from tests.dashboard.oidc import CLIENT_SECRET, auth_settings, base_url, oidc_provider, sign_in

pytestmark = pytest.mark.browser
skip_without_chromium()

USERS: dict[str, dict[str, Any]] = {  # subject: claims, as the provider hands them over
    "vera": {"sub": "vera", "email": "vera@example.com"},
    "ana": {"sub": "ana", "email": "ana@example.com", "groups": ["capacity"]},
    "root": {"sub": "root", "email": "root@example.com"},
    "nora": {"sub": "nora", "email": "nora@example.com"},
}
ROLES = """
[planner.roles]
"vera@example.com" = "viewer"
"root@example.com" = "admin"
"group:capacity" = "planner"
"""


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with oidc_provider(USERS, tmp_path_factory.mktemp("oidc") / "provider.log") as url:
        yield url


@pytest.fixture(scope="module")
def server(
    provider: str, demo_store_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DashboardServer]:
    folder = tmp_path_factory.mktemp("signed-in")
    home = folder / "home"
    home.mkdir()
    shutil.copy(demo_store_file, home / "planner.db")
    port = free_port()
    auth = auth_settings(folder / "auth.toml", port, provider, ROLES)
    running = DashboardServer(
        home, folder / "server.log", args=["--auth-config", str(auth)], port=port
    )
    try:
        running.start()
        yield running
    finally:
        running.stop()
    assert CLIENT_SECRET not in running.log()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """One person's browser: cookies of their own."""
    with new_page(browser, 1280, 800, downloads=True) as opened:
        yield opened


def _base(server: DashboardServer) -> str:
    return base_url(server.port)


def _sign_in(page: Page, server: DashboardServer, subject: str) -> None:
    sign_in(page, server.port, subject)


def _main(page: Page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def _store(server: DashboardServer) -> str:
    return f"sqlite:///{server.home / 'planner.db'}"


def test_signed_out_visitors_see_the_sign_in_page_and_no_data(
    server: DashboardServer, page: Page
) -> None:
    for path in ("/", "/request_logs", "/recommendations", "/audit"):
        page.goto(_base(server) + path, wait_until="domcontentloaded")
        expect(page.get_by_role("button", name="Sign in")).to_be_visible()
        body = page.locator("body").inner_text()
        assert "demo-azure-conv" not in body and "Recommendation #" not in body
        assert "planner.db" not in body  # not even the store's name
        assert page.locator('[data-testid="stSidebarNav"]').count() == 0


def test_a_viewer_reads_and_downloads_and_the_server_refuses_their_upload(
    server: DashboardServer, page: Page, tmp_path: Path
) -> None:
    _sign_in(page, server, "vera")
    sidebar = page.locator('[data-testid="stSidebar"]')
    expect(sidebar).to_contain_text("Signed in as vera@example.com (viewer)")
    expect(sidebar).not_to_contain_text("Audit trail")  # admins only
    assert "Recommendation #" in _main(page) and not exceptions_on(page)
    # a report, downloaded
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Reports").click()
    wait_rendered(page)
    with page.expect_download() as download:
        page.locator(widget("reports-download-csv", "button")).click()
    saved = tmp_path / "report.csv"
    download.value.save_as(saved)
    assert saved.stat().st_size > 0 and b"BilledCost" in saved.read_bytes()
    # what a cluster runs, for the recommendation's own engine (as `planner export` writes it)
    page.goto(_base(server) + "/recommendations", wait_until="domcontentloaded")
    wait_rendered(page)
    with page.expect_download() as download:
        page.locator(widget("rec-deploy-download", "button")).click()
    bundle = tmp_path / "deploy.zip"
    download.value.save_as(bundle)
    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
        script = next(n for n in names if n.endswith(".trtllm.sh"))
        assert archive.read(script).startswith(b"#!/usr/bin/env bash\n# planner recommendation #")
    # the upload form is there, but the server refuses the upload itself
    page.goto(_base(server) + "/request_logs", wait_until="domcontentloaded")
    wait_rendered(page)
    log = tmp_path / "gateway.csv"
    log.write_text("timestamp,input_tokens,output_tokens\n2024-01-01T00:00:00Z,10,20\n")
    page.locator(widget("logs-upload", 'input[type="file"]')).set_input_files(str(log))
    page.locator(widget("logs-ingest", "button")).click()
    expect(page.locator('[data-testid="stMain"]')).to_contain_text(
        "refused: vera@example.com is a viewer, and uploading a request log needs the planner role"
    )
    with open_store(_store(server)) as store:
        assert dataset_names(store.session) == ["demo-azure-conv"]


def test_a_planner_by_group_runs_a_search_that_is_stored(
    server: DashboardServer, page: Page
) -> None:
    with open_store(_store(server)) as store, store.session() as session:
        before = len(list_briefs(session))
    _sign_in(page, server, "ana")
    expect(page.locator('[data-testid="stSidebar"]')).to_contain_text(
        "Signed in as ana@example.com (planner)"
    )
    start_small_search(page, _base(server), "demo-azure-conv", 0.1)
    expect(page.locator('[data-testid="stMain"]')).to_contain_text(
        "stored as recommendation #", timeout=240_000
    )
    with open_store(_store(server)) as store, store.session() as session:
        assert len(list_briefs(session)) == before + 1


def test_an_identity_without_a_role_is_told_to_ask_an_admin(
    server: DashboardServer, page: Page
) -> None:
    page.goto(_base(server) + "/", wait_until="domcontentloaded")
    page.get_by_role("button", name="Sign in").click()
    page.locator('button[name="sub"][value="nora"]').click()
    expect(page.locator("body")).to_contain_text("signed in as nora@example.com")
    expect(page.locator("body")).to_contain_text("Ask an admin")
    assert "demo-azure-conv" not in page.locator("body").inner_text()
    assert page.locator('[data-testid="stSidebarNav"]').count() == 0


def test_the_admin_reads_the_audit_trail_of_everyone_and_signs_out(
    server: DashboardServer, page: Page, tmp_path: Path
) -> None:
    _sign_in(page, server, "root")
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Audit trail").click()
    wait_rendered(page)
    expect(page.locator('[data-testid="stMain"] [data-testid="stDataFrame"]')).to_be_visible()
    with page.expect_download() as download:
        page.locator(widget("audit-download", "button")).click()
    saved = tmp_path / "audit.csv"
    download.value.save_as(saved)
    rows = [row.split(",")[1:6] for row in saved.read_text().splitlines()]
    assert rows[0] == ["actor", "role", "via", "action", "target"]
    # the viewer's report (the CSV they downloaded), the planner's stored search
    assert ["vera@example.com", "viewer", "sign-in", "export"] in [r[:4] for r in rows]
    assert ["ana@example.com", "planner", "sign-in", "search"] in [r[:4] for r in rows]
    exports = [
        r[-1]
        for r in csv.reader(io.StringIO(saved.read_text()))
        if r[1:5] == ["vera@example.com", "viewer", "sign-in", "export"]
    ]
    assert "as trtllm" in exports and "as csv" in exports  # the deployment zip, the report
    # the refused upload: not done, not listed (the demo's own was the local user's)
    assert [r[2] for r in rows if r[3] == "upload"] == ["local"]
    page.locator('[data-testid="stSidebar"]').get_by_role("button", name="Sign out").click()
    # Streamlit ends the session at the provider too (RP-initiated logout), which sends back
    page.get_by_role("button", name="End session").click()
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    page.goto(_base(server) + "/audit", wait_until="domcontentloaded")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert "Audit trail" not in page.locator("body").inner_text()
