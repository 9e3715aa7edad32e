"""`planner --version` and `--help` start in a fraction of a second: the command modules import
no heavy library at import time, and the constants the CLI copies to show in --help stay equal
to the library's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from planner.cli import options
from tests.e2e.test_cli import PLANNER

# Each costs tens to hundreds of milliseconds to import; none is needed to parse a command line.
HEAVY = ("pandas", "scipy", "sqlalchemy", "alembic", "torch", "streamlit", "plotly", "httpx")


def imported_heavy(statement: str) -> list[str]:
    code = (
        f"import json, sys\n{statement}\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {set(HEAVY)!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded: list[str] = json.loads(result.stdout.splitlines()[-1])
    return loaded


def test_importing_the_cli_loads_no_heavy_library() -> None:
    assert imported_heavy("import planner.cli") == []


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["simulate", "--help"]])
def test_help_and_version_load_no_heavy_library(args: list[str]) -> None:
    statement = (
        f"sys.argv = ['planner', *{args!r}]\n"
        "from planner.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert imported_heavy(statement) == []


def test_version_is_printed() -> None:
    from planner import __version__

    result = subprocess.run([PLANNER, "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout == f"planner {__version__}\n"


def test_a_command_still_loads_the_library_it_needs() -> None:
    # The lazy imports happen: `planner latency` predicts (the latency model loads).
    result = subprocess.run(
        [PLANNER, "latency", "--gpu", "H100", "--model", "llama-3.1-8b", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert '"ttft' in result.stdout


def test_copied_constants_equal_the_library() -> None:
    from planner.bench.client import DEFAULT_URL
    from planner.bench.loadgen import PATTERNS
    from planner.bench.server import DEFAULT_HOST, DEFAULT_PORT
    from planner.ingest.formats import FIELDS, FORMAT_NAMES, TimeKind, TimeUnit
    from planner.latency.predict import DEFAULT_SIM_REQUESTS
    from planner.recommend.inputs import DEFAULT_PRECISIONS
    from planner.recommend.limits import DEFAULT_MAX_REQUESTS as RECOMMEND_MAX_REQUESTS
    from planner.simulate.fleet import ROUTERS
    from planner.simulate.inputs import DEFAULT_MAX_REQUESTS, MAX_BATCHED_TOKENS, MAX_SEQS
    from pricing.sheets import (
        MAX_CELL_CHARS,
        MAX_COLUMNS,
        MAX_PRICE_RATIO,
        MAX_ROWS,
        MAX_XLSX_PART_BYTES,
        MIN_USD_PER_HOUR,
    )

    assert options.INGEST_FORMAT_NAMES == FORMAT_NAMES
    assert options.INGEST_FIELDS == FIELDS
    assert list(options.TIME_KINDS) == [k.value for k in TimeKind]
    assert list(options.TIME_UNITS) == [u.value for u in TimeUnit]
    assert options.LATENCY_SIM_REQUESTS == DEFAULT_SIM_REQUESTS
    assert options.SIMULATE_MAX_REQUESTS == DEFAULT_MAX_REQUESTS
    assert options.SIMULATE_MAX_SEQS == MAX_SEQS
    assert options.SIMULATE_MAX_BATCHED_TOKENS == MAX_BATCHED_TOKENS
    assert options.SIMULATE_ROUTERS == ROUTERS
    assert options.RECOMMEND_PRECISIONS == DEFAULT_PRECISIONS
    assert options.RECOMMEND_MAX_REQUESTS == RECOMMEND_MAX_REQUESTS
    assert options.PRICE_SHEET_MAX_ROWS == MAX_ROWS
    assert options.PRICE_SHEET_MAX_COLUMNS == MAX_COLUMNS
    assert options.PRICE_SHEET_MAX_CELL_CHARS == MAX_CELL_CHARS
    assert options.PRICE_SHEET_MAX_XLSX_PART_BYTES == MAX_XLSX_PART_BYTES
    assert options.PRICE_MAX_RATIO == MAX_PRICE_RATIO
    assert options.PRICE_MIN_USD_PER_HOUR == MIN_USD_PER_HOUR
    assert options.BENCH_DEFAULT_URL == DEFAULT_URL
    assert options.BENCH_PATTERNS == PATTERNS
    assert options.BENCH_DEFAULT_HOST == DEFAULT_HOST
    assert options.BENCH_DEFAULT_PORT == DEFAULT_PORT
