"""Values no one types on purpose, found by the generated hostile sweep (tests/hostile/sweep.py):
100,000 characters given to an option. Each is refused before any work with one short message
naming the option, never an internal error and never the value echoed whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.common.net import check_listen_host
from planner.common.text import bounded_message
from planner.errors import UsageError
from tests.conftest import DEMO_SAMPLE, ROOT
from tests.e2e.test_cli import run

LONG = "x" * 100_000
SERIES = ROOT / "data" / "samples" / "servegen_rates_10min.csv"
SIMULATE = ["simulate", "--dataset", "d", "--gpu", "H100-SXM", "--model", "llama-3.1-8b"]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        # a path option: checked before the work, the option named
        ([*SIMULATE, "--out-requests", f"/tmp/{LONG}.csv"], "--out-requests"),
        (["forecast", "--series", LONG], "--series"),
        (["bench", "import", LONG, "--no-store"], "PATHS"),
        # a path inside a text option: the OS's refusal, with the path cut
        (["forecast", "--series", str(SERIES), "--model", "m-small", "--events", LONG], "--events"),
        # choices and values quoted by planner or by Typer
        (["ingest", str(DEMO_SAMPLE), "--time-kind", LONG], "--time-kind"),
        (["ingest", str(DEMO_SAMPLE), "--format", LONG], "--format"),
        (["dashboard", "--dry-run", "--host", LONG], "--host"),
    ],
    ids=["out-requests", "series", "bench-import", "events", "time-kind", "format", "host"],
)
def test_a_100000_character_value_is_refused_in_one_short_message(
    tmp_path: Path, args: list[str], option: str
) -> None:
    result = run(tmp_path, *args)
    assert result.returncode == 2, result.stderr[-500:]
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert len(result.stderr) < 1000, result.stderr[:300]
    assert option in result.stderr  # the option is named, not only the path
    assert "(100,0" in result.stderr  # the value's length is said, not the value


def test_a_long_run_in_any_message_is_cut_and_words_are_kept() -> None:
    message = f"--format {LONG!r}: unknown format; known formats: azure-llm, mooncake"
    bounded = bounded_message(message)
    assert len(bounded) < 200
    assert bounded.startswith("--format 'xxx") and "(100,003 characters)" in bounded
    assert bounded.endswith("known formats: azure-llm, mooncake")
    assert bounded_message("a\x1b[31mb\nc") == "a\\x1b[31mb\nc"  # escapes, keeps lines


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "::1", "[::1]", "fe80::1%eth0", "localhost", "planner-1.corp", "0.0.0.0"]
)
def test_addresses_to_listen_on(host: str) -> None:
    assert check_listen_host(host) == host


@pytest.mark.parametrize(
    "host", ["", " ", "a b", "x" * 254, "host;rm", "h\x1bost", "ex\u2010ample"]
)
def test_not_addresses_to_listen_on(host: str) -> None:
    with pytest.raises(UsageError, match="--host"):
        check_listen_host(host)
