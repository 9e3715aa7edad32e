"""Driving the real dashboard: ``planner dashboard`` started on a free loopback port, and Debian's
Chromium under Playwright. Shared by the browser tests and ``benchmarks/dashboard_bench.py``.

Waits are on real page conditions (Streamlit's script state, an element, a text), never sleeps.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from playwright.sync_api import Browser, Page, Playwright

from app.common import PAGES

CHROMIUM_ENV = "PLANNER_CHROMIUM"
REQUIRE_BROWSER_ENV = "PLANNER_REQUIRE_BROWSER"  # set by .ci/run: a missing Chromium fails
# Chromium on these machines: no network beyond loopback, no sandbox as root, no GPU.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SERVER_START_S = 60.0
RENDER_TIMEOUT_MS = 120_000


def chromium_path() -> str | None:
    """``$PLANNER_CHROMIUM``, else Debian's ``/usr/bin/chromium`` (or on the PATH)."""
    explicit = os.environ.get(CHROMIUM_ENV)
    if explicit:
        return explicit if Path(explicit).exists() else None
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


def skip_without_chromium() -> None:
    """Skip the calling test module on a machine without Chromium, except in CI
    (``$PLANNER_REQUIRE_BROWSER``, set by .ci/run), where a missing Chromium is an error."""
    import pytest

    if chromium_path() is not None:
        return
    if os.environ.get(REQUIRE_BROWSER_ENV):
        raise RuntimeError(
            f"{REQUIRE_BROWSER_ENV} is set but no Chromium was found (/usr/bin/chromium); "
            "run .ci/install-chromium.sh"
        )
    pytest.skip(
        "no Chromium on this machine: install Debian's chromium package to run the dashboard's "
        "browser tests",
        allow_module_level=True,
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def page_path(key: str) -> str:
    """The URL path Streamlit gives a page: its file's stem; the default page is ``/``."""
    return "/" if key == "overview" else "/" + Path(PAGES[key].path).stem


class DashboardServer:
    """``planner dashboard`` as a user starts it, on a free loopback port."""

    def __init__(
        self,
        home: Path,
        log: Path,
        args: Sequence[str] = (),
        port: int | None = None,
        db: str | None = None,
    ) -> None:
        self.home = home
        self.db = db  # a store URL (``planner --db URL dashboard``), else $PLANNER_HOME's
        self.log_path = log
        self.args = list(args)  # more options for ``planner dashboard`` (--auth-config FILE)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        planner = Path(sys.executable).parent / "planner"
        env = {k: v for k, v in os.environ.items() if k != "PLANNER_DATABASE_URL"}
        env["PLANNER_HOME"] = str(self.home)
        self._log = self.log_path.open("wb")
        self._process = subprocess.Popen(
            [
                str(planner),
                *(["--db", self.db] if self.db else []),
                "dashboard",
                "--port",
                str(self.port),
                *self.args,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"planner dashboard exited: {self.log_path.read_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as reply:
                    if reply.read().strip() == b"ok":
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)  # the server is still starting: poll its health endpoint
        raise RuntimeError(f"planner dashboard not healthy after {SERVER_START_S:g} s")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._log is not None:
            self._log.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def dashboard(home: Path, log: Path) -> Iterator[DashboardServer]:
    server = DashboardServer(home, log)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@contextmanager
def new_page(
    browser: Browser, width: int = 1400, height: int = 1000, *, downloads: bool = False
) -> Iterator[Page]:
    """A page in a browser context of its own (its own cookies: one person), at a screen size."""
    context = browser.new_context(
        viewport={"width": width, "height": height}, accept_downloads=downloads
    )
    opened = context.new_page()
    opened.set_default_timeout(RENDER_TIMEOUT_MS)
    try:
        yield opened
    finally:
        context.close()


def launch(playwright: Playwright) -> Browser:
    executable = chromium_path()
    if executable is None:
        raise RuntimeError("no Chromium: install Debian's chromium package")
    return playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)


RENDERED = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const main = document.querySelector('[data-testid="stMain"]');
  return app && main && app.getAttribute('data-test-script-state') === 'notRunning'
    && main.querySelector('h1') !== null
    && main.querySelector('[data-testid="stSkeleton"]') === null;
}"""


TITLED = (
    """(title) => {
  const heading = document.querySelector('[data-testid="stMain"] h1');
  return heading !== null && heading.innerText.trim() === title && ("""
    + RENDERED
    + """)();
}"""
)


def navigate(page: Page, key: str, timeout_ms: float = RENDER_TIMEOUT_MS) -> float:
    """Go to a page the way an analyst does, by its link in the sidebar, and wait until it has
    rendered (its own title on screen); returns the seconds it took."""
    title = PAGES[key].title
    began = time.perf_counter()
    nav = page.locator('[data-testid="stSidebarNav"]')
    nav.get_by_role("link", name=title, exact=True).click()
    page.wait_for_function(TITLED, arg=title, timeout=timeout_ms)
    return time.perf_counter() - began


def wait_rendered(page: Page, timeout_ms: float = RENDER_TIMEOUT_MS) -> None:
    """Until the page's script has run to the end and everything it drew is on screen: the
    title, and no placeholder left (Streamlit shows skeletons for elements still loading, such
    as a Plotly chart before its library has loaded)."""
    page.wait_for_function(RENDERED, timeout=timeout_ms)


def visit(
    page: Page, base_url: str, key: str, *, query: str = "", timeout_ms: float = RENDER_TIMEOUT_MS
) -> float:
    """Open a page by URL (``query``: e.g. ``?dataset=NAME``) and wait until it has rendered;
    returns the seconds it took."""
    began = time.perf_counter()
    page.goto(base_url + page_path(key) + query, wait_until="domcontentloaded")
    wait_rendered(page, timeout_ms)
    return time.perf_counter() - began


def exceptions_on(page: Page) -> list[str]:
    """Texts of the exceptions Streamlit shows on the page (there must be none)."""
    return [e.inner_text() for e in page.locator('[data-testid="stException"]').all()]


def widget(key: str, inner: str = "") -> str:
    """CSS selector of the widget given ``key=`` (Streamlit adds class ``st-key-<key>``)."""
    return f".st-key-{key} {inner}".strip()


def screenshot(page: Page, path: Path, *, most_px: int = 6000) -> None:
    """The whole page as a PNG. Streamlit scrolls inside its main block, not the document, so
    the viewport is stretched to the main block's height (at most ``most_px``) first."""
    size = page.viewport_size or {"width": 1400, "height": 1000}
    height = page.evaluate(
        "() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
        " return m ? m.scrollHeight : document.body.scrollHeight; }"
    )
    page.set_viewport_size({"width": size["width"], "height": min(int(height) + 40, most_px)})
    try:
        wait_rendered(page)
        page.screenshot(path=str(path))
    finally:
        page.set_viewport_size(size)


def start_small_search(page: Page, base_url: str, dataset: str, load_scale: float) -> None:
    """Start a small search from the Recommendations page's form, as an analyst fills it: one
    GPU type (L4), two candidates simulated, no tightening, growth check or GPU comparison."""
    page.goto(f"{base_url}/recommendations?dataset={dataset}", wait_until="domcontentloaded")
    wait_rendered(page)
    page.get_by_text("Find the cheapest fleet", exact=True).first.click()  # the form's expander
    values = (("rec-load-scale", f"{load_scale:g}"), ("rec-verify-top", "2"), ("rec-tighten", "0"))
    for key, value in values:
        box = page.locator(widget(key, "input"))
        box.fill(value)
        box.press("Enter")
        wait_rendered(page)
    page.locator(widget("rec-gpus")).click()
    page.keyboard.type("L4")
    page.keyboard.press("Enter")
    page.keyboard.press("Escape")
    for key in ("rec-compare-gpus", "rec-growth-check"):
        page.locator(widget(key, "label")).click()
        wait_rendered(page)
    page.locator(widget("rec-run", "button")).click()
