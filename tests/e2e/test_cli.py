"""The installed ``planner`` command, run as a user runs it: a real process, real files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import AZURE_CODE, DEMO_SAMPLE, MOONCAKE, ROOT

PLANNER = shutil.which("planner", path=str(Path(sys.executable).parent)) or "planner"


def run(home: Path, *args: str, db: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PLANNER_DATABASE_URL", "PLANNER_DEBUG")
    }
    env["PLANNER_HOME"] = str(home)
    env["COLUMNS"] = "200"
    command = [PLANNER, *(["--db", db] if db else []), *args]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=300, check=False
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_version(home: Path) -> None:
    result = run(home, "--version")
    assert result.returncode == 0
    assert result.stdout.startswith("planner ")


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["ingest"],
        ["datasets"],
        ["datasets", "list"],
        ["datasets", "show"],
        ["datasets", "delete"],
        ["db"],
        ["db", "status"],
        ["db", "upgrade"],
    ],
)
def test_help_everywhere(home: Path, command: list[str]) -> None:
    result = run(home, *command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage: planner" in result.stdout


def test_ingest_list_show_delete_with_json(home: Path) -> None:
    ingested = run(home, "ingest", str(DEMO_SAMPLE), "--name", "demo", "--json")
    assert ingested.returncode == 0, ingested.stderr
    data = json.loads(ingested.stdout)
    assert (data["status"], data["rows"], data["format"]) == ("ingested", 19366, "azure-llm")

    listed = json.loads(run(home, "datasets", "list", "--json").stdout)
    assert [d["name"] for d in listed] == ["demo"]
    assert listed[0]["sha256"] and listed[0]["rows"] == 19366

    shown = json.loads(run(home, "datasets", "show", "demo", "--json").stdout)
    assert shown["rows"] == 19366
    assert round(shown["input_tokens"]["mean"]) == 1155
    assert shown["input_tokens"]["p99"] > shown["input_tokens"]["p50"]
    assert shown["per_minute"]["peak"] >= shown["per_minute"]["mean"]

    again = json.loads(run(home, "ingest", str(DEMO_SAMPLE), "--json").stdout)
    assert again["status"] == "already-present"

    deleted = run(home, "datasets", "delete", "demo")
    assert deleted.returncode == 0 and "19,366 rows" in deleted.stdout
    assert json.loads(run(home, "datasets", "list", "--json").stdout) == []


def test_human_output(home: Path) -> None:
    ingested = run(home, "ingest", str(AZURE_CODE), "--name", "code")
    assert "ingested dataset code (azure-llm): 8,819 rows" in ingested.stdout
    shown = run(home, "datasets", "show", "code")
    assert "input tokens P50 / P99" in shown.stdout
    assert "requests/min mean / peak" in shown.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["ingest", "missing.csv"], 1, "error: missing.csv: file not found"),
        (["ingest", str(MOONCAKE)], 2, "error: format mooncake gives times relative to the start"),
        (
            ["ingest", str(AZURE_CODE), "--format", "azur"],
            2,
            "error: --format 'azur': unknown format; known formats: azure-llm",
        ),
        (
            ["ingest", str(AZURE_CODE), "--on-error", "ignore"],
            2,
            "error: --on-error 'ignore': expected fail or skip",
        ),
        (
            ["ingest", str(MOONCAKE), "--start", "soon"],
            2,
            "error: --start 'soon': expected an ISO 8601 date-time",
        ),
        (
            ["ingest", str(AZURE_CODE), "--map", "arrival"],
            2,
            "error: --map 'arrival': expected FIELD=COLUMN",
        ),
        (
            ["datasets", "show", "nothing"],
            1,
            "error: no dataset named 'nothing'; the store has no datasets yet",
        ),
    ],
)
def test_errors_go_to_stderr_with_nonzero_exit_and_no_traceback(
    home: Path, args: list[str], code: int, message: str
) -> None:
    result = run(home, *args)
    assert result.returncode == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout == ""


def test_bad_row_message_names_file_row_and_column(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-06-01 00:00:00,10,5\n2024-06-01 00:00:01,ten,5\n"
    )
    result = run(home, "ingest", str(path))
    assert result.returncode == 1
    assert (
        f"error: {path}: row 2, line 3, column 'ContextTokens': expected a non-negative integer, got 'ten'"
        in result.stderr
    )
    skipped = run(home, "ingest", str(path), "--on-error", "skip")
    assert skipped.returncode == 0
    assert "skipped 1 bad rows" in skipped.stderr
    assert "row 2, line 3, column 'ContextTokens'" in skipped.stderr


def test_mooncake_with_start_and_generic_mapping(home: Path, tmp_path: Path) -> None:
    moon = run(home, "ingest", str(MOONCAKE), "--start", "2024-06-01T00:00:00Z", "--json")
    assert json.loads(moon.stdout)["rows"] == 12031
    path = tmp_path / "gw.csv"
    path.write_text("t_ms,in,out\n1714521600000,5,6\n1714521600500,7,8\n")
    generic = run(
        home,
        "ingest",
        str(path),
        "--map",
        "arrival=t_ms",
        "--map",
        "input_tokens=in",
        "--map",
        "output_tokens=out",
        "--time-kind",
        "epoch",
        "--time-unit",
        "ms",
        "--json",
    )
    assert generic.returncode == 0, generic.stderr
    assert json.loads(generic.stdout)["start_at"] == "2024-05-01T00:00:00+00:00"


def test_db_option_and_status(home: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    assert run(home, "ingest", str(AZURE_CODE), db=url).returncode == 0
    assert (tmp_path / "elsewhere.db").exists() and not (home / "planner.db").exists()
    status = json.loads(run(home, "db", "status", "--json", db=url).stdout)
    assert status["up_to_date"] is True


def test_postgres_through_the_cli(home: Path, postgres_url: str) -> None:
    ingested = run(home, "ingest", str(AZURE_CODE), "--json", db=postgres_url)
    assert json.loads(ingested.stdout)["rows"] == 8819, ingested.stderr
    shown = json.loads(
        run(
            home, "datasets", "show", "AzureLLMInferenceTrace_code_2023", "--json", db=postgres_url
        ).stdout
    )
    assert round(shown["output_tokens"]["mean"]) == 28


def test_make_demo_cli_walks_through_the_commands(tmp_path: Path) -> None:
    venv = Path(sys.prefix)
    result = subprocess.run(
        ["make", "demo-cli", f"VENV={venv}", f"DEMO_HOME={tmp_path / 'demo'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "19,366 requests" in result.stdout
    assert "time per output token" in result.stdout  # the latency step of the demo
    assert "SLO attainment" in result.stdout  # and the simulation
    assert "recommended:" in result.stdout and "committed" in result.stdout  # the recommendation


@pytest.mark.parametrize("command", [["datasets", "list"], ["db", "status"], ["db", "upgrade"]])
def test_unreachable_database_is_a_clear_error_without_the_password(
    home: Path, command: list[str]
) -> None:
    result = run(home, *command, db="postgresql://planner:s3cret@127.0.0.1:1/none")
    assert result.returncode == 1
    assert (
        "error: cannot open the store at postgresql://planner:***@127.0.0.1:1/none" in result.stderr
    )
    assert "s3cret" not in result.stderr and "Traceback" not in result.stderr
