"""Hostile input to ``planner ingest`` and ``planner datasets``, run as a user runs them: bad file
content exits 1 with the file, row and column; bad options exit 2 naming the option; nothing
exits 70, nothing prints a raw control character, nothing half-stores a dataset."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_cli import run

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
GOOD = "2024-06-01 00:00:00,10,20\n"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def failed(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert "\x1b" not in result.stderr
    return result.stderr


def datasets(home: Path) -> list[str]:
    listed = run(home, "datasets", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return [d["name"] for d in json.loads(listed.stdout)]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (HEADER + "9999-12-31 00:00:00,1,1\n", "row 1, line 2, column 'TIMESTAMP': date-time"),
        (HEADER + "2024-06-01,0x10,1\n", "column 'ContextTokens': expected a non-negative integer"),
        (HEADER + "2024-06-01,1,99999999999999999999\n", "is too large"),
        (HEADER + "2024-06-01,200000000,1\n", "at most 100,000,000 tokens a request"),
        (HEADER + "2024-06-01,-5,1\n", "column 'ContextTokens': expected a non-negative integer"),
        (HEADER + "2024-06-01,NaN,1\n", "expected a non-negative integer, got 'NaN'"),
        (HEADER + "1916-02-18 01:46:40,1,1\n", "before 1970-01-01 00:00:00 UTC"),
        (HEADER + "2100-01-01 00:00:00,1,1\n", "more than a year from now"),
    ],
    ids=["year-9999", "hex", "huge", "200m-tokens", "negative", "nan", "1916", "2100"],
)
def test_bad_content_exits_1_located(
    home: Path, tmp_path: Path, content: str, fragment: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content + GOOD, encoding="utf-8")
    assert fragment in failed(run(home, "ingest", str(path), "-q"), 1)
    skipped = run(home, "ingest", str(path), "-q", "--on-error", "skip", "--json")
    assert skipped.returncode == 0, skipped.stderr
    data = json.loads(skipped.stdout)
    assert (data["rows"], data["skipped_rows"]) == (1, 1)
    assert fragment in data["skipped_examples"][0]
    assert datasets(home) == ["bad"]


def test_epoch_nanoseconds_as_seconds_suggest_the_unit(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "ns.csv"
    path.write_text("ts,i,o\n1717200000000000000,1,1\n", encoding="utf-8")
    mapping = ["--map", "arrival=ts", "--map", "input_tokens=i", "--map", "output_tokens=o"]
    result = run(home, "ingest", str(path), *mapping, "--time-kind", "epoch", "--time-unit", "s")
    stderr = failed(result, 1)
    assert "out of range" in stderr and "pass --time-unit ns" in stderr
    fixed = run(home, "ingest", str(path), *mapping, "--time-kind", "epoch", "--time-unit", "ns")
    assert fixed.returncode == 0, fixed.stderr


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (["--timezone", "Mars/Base"], "--timezone 'Mars/Base': unknown time zone"),
        (["--time-format", "%Q"], "--time-format '%Q': not a strptime pattern"),
        (["--start", "9999-12-31"], "--start '9999-12-31': out of range"),
        (["--name", "evil\x1b[31mred"], "--name 'evil\\x1b[31mred': a dataset name cannot hold"),
        (["--name", "two\nlines"], "cannot hold control characters"),
        (["--name", "n" * 201], "at most 200 characters"),
    ],
    ids=["timezone", "time-format", "start", "ansi-name", "newline-name", "long-name"],
)
def test_bad_options_exit_2_naming_the_option(
    home: Path, tmp_path: Path, options: list[str], fragment: str
) -> None:
    path = tmp_path / "ok.csv"
    path.write_text(HEADER + GOOD, encoding="utf-8")
    assert fragment in failed(run(home, "ingest", str(path), *options), 2)


def test_deep_json_and_bad_bytes_are_skippable_rows(home: Path, tmp_path: Path) -> None:
    line = '{"timestamp": %d, "input_length": 1, "output_length": 1%s}\n'
    deep = ', "x": ' + "[" * 100_000 + "]" * 100_000
    path = tmp_path / "m.jsonl"
    path.write_bytes(
        (line % (0, "")).encode()
        + (line % (1, deep)).encode()
        + (line % (2, ', "model": "caf\xe9"')).encode("latin-1")
        + (line % (3, "")).encode()
    )
    start = ["--start", "2024-06-01T00:00:00Z"]
    stderr = failed(run(home, "ingest", str(path), *start), 1)
    assert "row 2, line 2: not valid JSON (nested too deeply)" in stderr
    result = run(home, "ingest", str(path), *start, "--on-error", "skip", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["rows"], data["skipped_rows"]) == (2, 2)
    assert data["skipped_examples"][1].startswith("row 3, line 3: not UTF-8 text (byte 0xe9")


def test_excel_files_bom_and_semicolons(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (HEADER + GOOD).replace(",", ";").encode())
    result = run(home, "ingest", str(path), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rows"] == 1
    tsv = tmp_path / "tabs.tsv"
    tsv.write_text((HEADER + GOOD).replace(",", "\t"), encoding="utf-8")
    assert run(home, "ingest", str(tsv), "--json").returncode == 0


def test_not_a_regular_file(home: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    assert "is not a regular file" in failed(run(home, "ingest", str(fifo)), 1)
    assert "is not a regular file" in failed(run(home, "ingest", os.devnull), 1)
    assert "is a directory" in failed(run(home, "ingest", str(tmp_path)), 1)


def test_names_from_files_and_stored_text_are_escaped(home: Path, tmp_path: Path) -> None:
    evil = tmp_path / "evil\x1b[2J.csv"
    evil.write_text(HEADER + GOOD, encoding="utf-8")
    stderr = failed(run(home, "ingest", str(evil)), 2)
    assert "choose one with --name" in stderr

    path = tmp_path / "models.csv"
    path.write_text("t,i,o,m\n2024-06-01,1,1,\x1b[31mred\n", encoding="utf-8")
    mapping = ["--map", "arrival=t", "--map", "input_tokens=i", "--map", "output_tokens=o"]
    stored = run(home, "ingest", str(path), *mapping, "--map", "model=m", "--name", "[bold]x")
    assert stored.returncode == 0, stored.stderr
    assert "[bold]x" in stored.stdout
    shown = run(home, "datasets", "show", "[bold]x")
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\\x1b[31mred" in shown.stdout
    listed = run(home, "datasets", "list")
    assert "[bold]x" in listed.stdout


MAP = ["--map", "arrival=ts", "--map", "input_tokens=i", "--map", "output_tokens=o"]


def test_an_epoch_before_1970_is_refused_unless_asked(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "epoch.csv"
    path.write_text("ts,i,o\n1700000000,1,1\n-1700000000,1,1\n", encoding="utf-8")
    epoch = ["--time-kind", "epoch", "-q"]
    stderr = failed(run(home, "ingest", str(path), *MAP, *epoch), 1)
    assert f"{path}: row 2, line 3, column 'ts': arrival '-1700000000'" in stderr
    assert "is 1916-02-18 01:46:40 UTC, before 1970-01-01" in stderr
    assert "--allow-any-time" in stderr and datasets(home) == []
    allowed = run(home, "ingest", str(path), *MAP, *epoch, "--allow-any-time", "--json")
    assert allowed.returncode == 0, allowed.stderr
    data = json.loads(allowed.stdout)
    assert data["rows"] == 2 and data["start_at"].startswith("1916-02-18")


def test_times_with_and_without_offsets_in_one_file(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "mixed.csv"
    path.write_text(
        "ts,i,o\n2024-01-01T00:00:00+02:00,1,1\n2024-01-01 01:00:00,1,1\n2024-01-01 02:00:00,1,1\n",
        encoding="utf-8",
    )
    for extra in ([], ["--on-error", "skip"], ["--timezone", "UTC"]):
        stderr = failed(run(home, "ingest", str(path), *MAP, "-q", *extra), 1)
        assert f"{path}: row 2, line 3, column 'ts': date-times written both with and" in stderr
        assert "row 1 has '2024-01-01T00:00:00+02:00' (with a UTC offset)" in stderr
        assert "row 2 has '2024-01-01 01:00:00' (without one)" in stderr
    assert datasets(home) == []
    zoned = run(home, "ingest", str(path), *MAP, "-q", "--timezone", "Europe/Berlin")
    assert zoned.returncode == 0, zoned.stderr
    assert "note: 2 date-times have no UTC offset in column 'ts': read in Europe/Berlin" in (
        zoned.stdout.replace("\n", " ")
    )
    assert "2023-12-31 22:00:00 to 2024-01-01 01:00:00 UTC" in zoned.stdout


def test_a_header_of_ten_thousand_columns_and_more_says_so(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    path.write_text(",".join(f"c{i}" for i in range(20_000)) + "\n1,2,3\n", encoding="utf-8")
    stderr = failed(run(home, "ingest", str(path)), 1)
    assert f"{path}: line 1: the header has 20,000 columns; a request log has at most 10,000" in (
        stderr.replace("\n", "")
    )
    assert "the first data row, line 2, has 3 fields" in stderr.replace("\n", "")
