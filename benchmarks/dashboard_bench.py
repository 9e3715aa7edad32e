"""Dashboard page speed in a real browser, on a store holding a 1,000,000-request dataset.

Builds a store with a synthetic ``azure-llm`` log of ``--rows`` requests (the ingest benchmark's
generator) next to the demo's forecast and recommendation, starts ``planner dashboard`` on a
free loopback port and opens every page in Debian's headless Chromium. A page has rendered
when its script has run to the end (Streamlit's script state), its title
is on screen and no placeholder is left. The app is opened once; then every page is reached
through its sidebar link, as an analyst moves between pages: the first round fills the caches,
the next ``--repeats`` rounds are the warm times. Each page is also opened by URL in a new tab
(which loads Streamlit's JavaScript again); pages that pick a dataset open there on the big one
(``?dataset=``). The big dataset is ingested last, so pages that open on the newest dataset
pick it by default.

    python benchmarks/dashboard_bench.py                    # 1M requests, 3 warm visits a page
    python benchmarks/dashboard_bench.py --rows 200000 --json /tmp/dashboard_bench.json

The target (issue 13): every page renders in under 2 s after its first load. This is a script,
not a timed test: absolute numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the browser driver is shared with the tests

from ingest_bench import generate_csv, machine_info  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from app.common import PAGES  # noqa: E402
from planner.demo import load_demo  # noqa: E402
from tests.dashboard.browser import (  # noqa: E402
    DashboardServer,
    dashboard,
    exceptions_on,
    launch,
    navigate,
    visit,
)

DATASET = "bench-1m"
TARGET_S = 2.0
DATASET_PAGES = ("logs", "forecast", "whatif", "recommend")  # pages with a dataset selector


def build_store(home: Path, rows: int) -> dict[str, float]:
    from planner.ingest import IngestOptions, ingest_file
    from planner.store import open_store

    url = f"sqlite:///{home / 'planner.db'}"
    csv_path = home / "bench.csv"
    began = time.perf_counter()
    generate_csv(csv_path, rows)
    generated = time.perf_counter() - began
    load_demo(url, quick=True)
    demo_s = time.perf_counter() - began - generated
    with open_store(url) as store:  # last: the newest dataset, which pages open by default
        ingest_file(store, csv_path, IngestOptions(name=DATASET))
    ingested = time.perf_counter() - began - generated - demo_s
    csv_path.unlink()
    return {"generate_s": generated, "demo_s": demo_s, "ingest_s": ingested}


def measure(server: DashboardServer, repeats: int) -> tuple[float, list[dict[str, Any]]]:
    """The app opened once, then every page reached through the sidebar ``repeats + 1`` times
    (the first round fills the caches); then each page opened by URL in a new tab."""
    results = []
    with sync_playwright() as playwright:
        browser = launch(playwright)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        app_open_s = visit(page, server.url, "overview")
        print(f"  app opened in {app_open_s:.2f} s", flush=True)
        times: dict[str, list[float]] = {key: [] for key in PAGES}
        problems: dict[str, list[str]] = {key: [] for key in PAGES}
        for round_number in range(repeats + 1):
            for key, info in PAGES.items():
                seconds = navigate(page, key)
                problems[key] += exceptions_on(page)
                times[key].append(seconds)
                print(f"  round {round_number}: {info.title:<26} {seconds:6.2f} s", flush=True)
        context.close()
        for key, info in PAGES.items():
            tab = browser.new_context(viewport={"width": 1400, "height": 1000})
            query = f"?dataset={DATASET}" if key in DATASET_PAGES else ""
            tab_s = visit(tab.new_page(), server.url, key, query=query)
            tab.close()
            warm = times[key][1:]
            results.append(
                {
                    "page": info.title,
                    "key": key,
                    "first_s": times[key][0],
                    "warm_median_s": statistics.median(warm),
                    "warm_max_s": max(warm),
                    "new_tab_s": tab_s,
                    "meets_target": max(warm) < TARGET_S,
                    "exceptions": problems[key],
                }
            )
        browser.close()
    return app_open_s, results


def print_table(results: list[dict[str, Any]]) -> None:
    header = f"{'page':<26} {'first':>7} {'warm median':>12} {'warm max':>9} {'new tab':>8}"
    print(f"\n{header}  warm < {TARGET_S:g} s")
    for r in results:
        print(
            f"{r['page']:<26} {r['first_s']:>6.2f}s {r['warm_median_s']:>11.2f}s "
            f"{r['warm_max_s']:>8.2f}s {r['new_tab_s']:>7.2f}s  "
            f"{'yes' if r['meets_target'] else 'NO'}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="requests in the big dataset")
    parser.add_argument("--repeats", type=int, default=3, help="warm visits per page")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--home", type=Path, help="reuse (or build) the store in this folder")
    args = parser.parse_args(argv)
    home = args.home or Path(tempfile.mkdtemp(prefix="dashboard-bench-"))
    home.mkdir(parents=True, exist_ok=True)
    build: dict[str, float] = {}
    if not (home / "planner.db").exists():
        print(f"building a store with {args.rows:,} requests in {home} ...", flush=True)
        build = build_store(home, args.rows)
    with dashboard(home, home / "server.log") as server:
        print(f"dashboard at {server.url}", flush=True)
        app_open_s, results = measure(server, args.repeats)
    print_table(results)
    report = {
        "rows": args.rows,
        "repeats": args.repeats,
        "target_s": TARGET_S,
        "build": build,
        "app_open_s": app_open_s,
        "pages": results,
        "machine": machine_info(),
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    failed = [r["page"] for r in results if not r["meets_target"] or r["exceptions"]]
    if failed:
        print(f"\nover {TARGET_S:g} s warm or with exceptions: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
