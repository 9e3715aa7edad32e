"""Screenshots of every dashboard page for the docs: docs/img/dashboard-<page key>-<width>.png at
1280x800 and 1920x1080 (the whole page), over a demo store.

    make demo   # or: PLANNER_HOME=/tmp/demo python -m planner.demo
    PLANNER_HOME=/tmp/demo .venv/bin/python docs/screenshots.py

Starts ``planner dashboard`` over ``$PLANNER_HOME`` on a free loopback port and drives Debian's
Chromium (tests/dashboard/browser.py does both, as the browser tests do).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.common import PAGES  # noqa: E402
from tests.dashboard.browser import dashboard, launch, new_page, screenshot, visit  # noqa: E402

SIZES = ((1280, 800), (1920, 1080))
OUT = ROOT / "docs" / "img"


def small(path: Path) -> None:
    """The PNG in 256 colours (a screenshot of flat UI loses nothing you can see)."""
    with Image.open(path) as image:
        quantized = image.convert("RGB").quantize(colors=256, dither=Image.Dither.NONE)
    quantized.save(path, optimize=True)


def main() -> None:
    home = Path(os.environ.get("PLANNER_HOME", ROOT / ".planner"))
    with (
        dashboard(home, Path("/tmp/planner-screenshots.log")) as server,
        sync_playwright() as playwright,
    ):
        browser = launch(playwright)
        for width, height in SIZES:
            with new_page(browser, width, height) as page:
                for key in PAGES:  # the local user is an admin: the audit page too
                    visit(page, server.url, key)
                    path = OUT / f"dashboard-{key}-{width}.png"
                    screenshot(page, path)
                    small(path)
                    print(path.relative_to(ROOT), f"{path.stat().st_size / 1e3:,.0f} kB")
        browser.close()


if __name__ == "__main__":
    main()
