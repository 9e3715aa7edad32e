"""``planner bench runs list|show|delete`` as a user runs them: a real process on a real store
holding runs saved through the library (the same calls `bench run` and `bench import` make)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.bench.importers import import_result
from planner.bench.metrics import RequestRecord
from planner.store import open_store
from planner.store.bench_runs import save_run
from tests.conftest import ROOT
from tests.e2e.test_cli import run

RESULTS = ROOT / "tests" / "fixtures" / "bench-results"


def _records(count: int) -> list[RequestRecord]:
    return [
        RequestRecord(
            index=i,
            start_s=0.5 * i,
            status="ok" if i else "failed",
            input_tokens=128,
            output_tokens=32 if i else 0,
            output_tokens_source="usage",
            requested_output_tokens=32,
            e2el_s=0.8 + 0.01 * i,
            ttft_s=(0.1 + 0.001 * i) if i else None,
            tpot_s=0.02 if i else None,
            itl_s=[0.02] * 31 if i else [],
            error_kind=None if i else "http_500",
            error=None if i else "HTTP 500: injected failure",
        )
        for i in range(count)
    ]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A store in PLANNER_HOME holding two runs: one with its requests, one without."""
    home = tmp_path / "home"
    home.mkdir()
    [h100] = import_result(RESULTS / "vllm-bench-serve_catalog-metadata.json")
    [cpu] = import_result(RESULTS / "vllm-bench-serve-0.32.0_c4.json", engine="vllm")
    with open_store(f"sqlite:///{home / 'planner.db'}") as store, store.session() as session:
        save_run(session, h100, _records(5), name="h100-poisson", group="sweep-a")
        save_run(session, cpu, name="cpu-c4")
    return home


def test_list_shows_the_runs_as_a_table_and_as_json(home: Path) -> None:
    table = run(home, "bench", "runs", "list")
    assert table.returncode == 0, table.stderr
    assert "h100-poisson" in table.stdout and "cpu-c4" in table.stdout
    assert "poisson 2.5/s" in table.stdout and "concurrency 4" in table.stdout

    listed = run(home, "bench", "runs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert [r["name"] for r in runs] == ["h100-poisson", "cpu-c4"]
    assert runs[0]["requests"] == 5 and runs[1]["requests"] == 0
    assert runs[0]["source"] == "imported-vllm" and runs[0]["sweep"] == "sweep-a"
    assert runs[0]["summary"]["mean_ttft_ms"] == pytest.approx(135.39812750041165)
    assert runs[0]["metadata"]["hardware"] == {"gpu": "NVIDIA H100 80GB HBM3", "count": 2}

    sweep = json.loads(run(home, "bench", "runs", "list", "--sweep", "sweep-a", "--json").stdout)
    assert [r["name"] for r in sweep] == ["h100-poisson"]


def test_an_empty_store_says_how_to_make_runs(tmp_path: Path) -> None:
    empty = run(tmp_path / "empty", "bench", "runs", "list")
    assert empty.returncode == 0, empty.stderr
    assert "no benchmark runs yet" in empty.stdout and "planner bench run" in empty.stdout
    assert json.loads(run(tmp_path / "empty", "bench", "runs", "list", "--json").stdout) == []


def test_show_prints_the_summary_metadata_and_requests(home: Path) -> None:
    shown = run(home, "bench", "runs", "show", "h100-poisson", "--requests")
    assert shown.returncode == 0, shown.stderr
    for text in ("TTFT", "p99", "request_throughput", "hardware.gpu", "http_500", "poisson"):
        assert text in shown.stdout, text

    data = json.loads(run(home, "bench", "runs", "show", "h100-poisson", "--json").stdout)
    assert data["name"] == "h100-poisson" and "request_rows" not in data
    assert data["summary"]["p99_tpot_ms"] == pytest.approx(25.58201544934784)
    assert data["metadata"]["load"]["kind"] == "qps"

    with_rows = run(home, "bench", "runs", "show", "1", "--requests", "--json")
    rows = json.loads(with_rows.stdout)["request_rows"]
    assert [r["status"] for r in rows] == ["failed", "ok", "ok", "ok", "ok"]
    assert rows[0]["error_kind"] == "http_500" and rows[0]["ttft_ms"] is None
    assert rows[1]["ttft_ms"] == pytest.approx(101.0)


def test_unknown_runs_are_errors_on_stderr_naming_the_closest(home: Path) -> None:
    missing = run(home, "bench", "runs", "show", "h100-poison", "--json")
    assert missing.returncode == 1 and missing.stdout == ""
    assert "no benchmark run named 'h100-poison'" in missing.stderr
    assert "stored runs: h100-poisson" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_delete_asks_for_yes_then_deletes(home: Path) -> None:
    refused = run(home, "bench", "runs", "delete", "h100-poisson")
    assert refused.returncode == 2 and refused.stdout == ""
    assert "--yes" in refused.stderr and "5 requests" in refused.stderr
    assert len(json.loads(run(home, "bench", "runs", "list", "--json").stdout)) == 2

    deleted = run(home, "bench", "runs", "delete", "h100-poisson", "--yes", "--json")
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(deleted.stdout) == {"deleted": "h100-poisson", "id": 1, "requests": 5}
    left = json.loads(run(home, "bench", "runs", "list", "--json").stdout)
    assert [r["name"] for r in left] == ["cpu-c4"]

    again = run(home, "bench", "runs", "delete", "h100-poisson", "--yes")
    assert again.returncode == 1 and "no benchmark run named" in again.stderr


def test_db_option_names_another_store(home: Path, tmp_path: Path) -> None:
    other = f"sqlite:///{tmp_path / 'other.db'}"
    listed = run(home, "bench", "runs", "list", "--db", other, "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    from_root = run(home, "bench", "runs", "list", "--json", db=other)
    assert json.loads(from_root.stdout) == []
    here = f"sqlite:///{home / 'planner.db'}"
    assert (
        len(json.loads(run(tmp_path, "bench", "runs", "list", "--json", "--db", here).stdout)) == 2
    )
