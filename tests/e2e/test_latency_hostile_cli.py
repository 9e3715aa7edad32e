"""Hostile input to ``planner latency``, ``planner calibrate`` and ``planner catalog``: every
one ends in a clear error naming the option or the file's row and column (exit 1 or 2), never
an internal error (exit 70) and never a number printed for a deployment that cannot exist."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from planner.latency.calibration import predict, read_measurements
from planner.latency.catalog import load_catalog
from planner.latency.profile import choose_profile, load_bundled_profiles
from tests.conftest import ROOT
from tests.e2e.test_cli import run

PUBLISHED = ROOT / "data" / "reference" / "published_latency.csv"
H100 = ["--gpu", "H100-SXM", "--model", "llama-3.1-8b"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def clean_error(result: object, code: int) -> str:
    assert result.returncode == code, (result.stdout, result.stderr)  # type: ignore[attr-defined]
    stderr: str = result.stderr  # type: ignore[attr-defined]
    assert "internal error" not in stderr and "Traceback" not in stderr
    assert result.stdout == ""  # type: ignore[attr-defined]
    return stderr


# --- planner latency --------------------------------------------------------------------------


def test_a_load_above_capacity_states_the_capacity(home: Path) -> None:
    result = run(home, "latency", *H100, "--qps", "1000")
    assert result.returncode == 0 and result.stderr == ""
    assert "at 1000 req/s" in result.stdout and "SATURATED: capacity about " in result.stdout
    capacity = float(result.stdout.split("SATURATED: capacity about ")[1].split(" req/s")[0])
    served = run(home, "latency", *H100, "--qps", f"{capacity:g}", "--json", "--sim-requests", "0")
    assert served.returncode == 0, served.stderr
    data = json.loads(served.stdout)
    assert data["under_load"]["kind"] == "qps" and data["saturated"] is False
    assert data["under_load"]["ttft_ms"] > 0


def test_a_load_above_capacity_with_json_is_a_result(home: Path) -> None:
    result = run(home, "latency", *H100, "--qps", "1e6", "--json")
    assert result.returncode == 0 and result.stderr == ""
    data = json.loads(result.stdout)
    assert data["saturated"] is True and data["under_load"]["e2e_ms"] is None
    assert data["under_load"]["replicas_needed"] == math.ceil(1e6 / data["capacity_qps"])
    assert "NaN" not in result.stdout and "Infinity" not in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--qps", "nan"], "--qps nan: expected a positive, finite number of requests/s"),
        (["--qps", "inf"], "--qps inf: expected a positive, finite number"),
        (["--qps", "-1"], "--qps -1: expected a positive, finite number"),
        (["--qps", "0"], "--qps 0: expected a positive, finite number"),
        (["--memory-utilization", "nan"], "--gpu-memory-utilization nan: expected a share"),
        (["--gpu-memory-utilization", "nan"], "--gpu-memory-utilization nan: expected a share"),
        (["--memory-utilization", "inf"], "--gpu-memory-utilization inf: expected a share"),
        (["--gpu-memory-utilization", "inf"], "--gpu-memory-utilization inf: expected a share"),
        (["--memory-utilization", "0"], "--gpu-memory-utilization 0: expected a share"),
        (["--gpu-memory-utilization", "0"], "--gpu-memory-utilization 0: expected a share"),
        (["--memory-utilization", "-0.5"], "--gpu-memory-utilization -0.5: expected a share"),
        (["--gpu-memory-utilization", "-0.5"], "--gpu-memory-utilization -0.5: expected a share"),
        (["--memory-utilization", "90"], "--gpu-memory-utilization 90: expected a share"),
        (["--gpu-memory-utilization", "90"], "--gpu-memory-utilization 90: expected a share"),
        (["--concurrency", "0"], "--concurrency"),
        (["--concurrency", "-5"], "--concurrency"),
        (["--concurrency", "1" + "0" * 400], "--concurrency"),
        (["--tp", "0"], "--tp"),
        (["--tp", "-2"], "--tp"),
        (["--batch", "0"], "--batch"),
        (["--batch", "-1"], "--batch"),
        (["--input", "0"], "--input"),
        (["--output", "-3"], "--output"),
        (["--max-seqs", "0"], "--max-seqs"),
        (["--input", "1" + "0" * 400], "--input"),
        (["--batch", "1" + "0" * 400], "--batch"),
        (["--qps", "2", "--concurrency", "4"], "alternatives"),
        (["--engine", "\x1b[31mvllm"], "unknown engine '\\x1b[31mvllm'; known engines: vllm"),
        (["--sim-requests", "-1"], "--sim-requests -1: expected 0 (no simulation)"),
        (["--sim-requests", "1" + "0" * 400], "--sim-requests 1000000"),
        (["--max-seqs", "1" + "0" * 30], "--max-seqs"),
        (["--kv-cache", ""], "--kv-cache '': expected fp32, fp16 or fp8"),
        (["--static", "--concurrency", "2"], "--static describes one static batch"),
    ],
)
def test_bad_numbers_name_their_option(home: Path, args: list[str], message: str) -> None:
    stderr = clean_error(run(home, "latency", *H100, *args), 2)
    assert message in stderr


def test_a_batch_beyond_the_kv_cache_is_refused_with_the_numbers(home: Path) -> None:
    args = ["--gpu", "H100-SXM", "--model", "llama-2-7b"]
    holds = json.loads(run(home, "latency", *args, "--json").stdout)["kv_capacity_tokens"]
    stderr = clean_error(run(home, "latency", *args, "--batch", "1000000"), 2)
    assert "--batch 1000000: 1,000,000 sequences of 1,280 tokens need 1,280,000,000 tokens" in (
        stderr
    )
    assert f"this deployment holds {holds:,}: at most {holds // 1280:,} sequences" in stderr
    static = clean_error(run(home, "latency", *args, "--batch", "1000000", "--static"), 2)
    assert "--batch 1000000" in static


def test_a_prompt_beyond_the_context_window_is_refused(home: Path) -> None:
    args = ["--gpu", "H100-SXM", "--model", "llama-2-7b", "--input", "30000"]
    stderr = clean_error(run(home, "latency", *args), 2)
    assert "--input 30000 + --output 256 = 30,256 tokens exceed the 4,096-token context" in stderr


def test_clients_beyond_the_batch_are_said_to_queue(home: Path) -> None:
    result = run(home, "latency", *H100, "--concurrency", "100000")
    assert result.returncode == 0, result.stderr
    data = json.loads(run(home, "latency", *H100, "--concurrency", "100000", "--json").stdout)
    queued = 100_000 - data["max_concurrent_sequences"]
    assert data["under_load"]["queued_clients"] == queued
    assert f"{queued:,} of the 100,000 clients wait for a slot" in result.stdout


@pytest.mark.parametrize("command", [["catalog", "gpus", "x"], ["catalog", "nope"]])
def test_catalog_with_stray_arguments_is_a_usage_error(home: Path, command: list[str]) -> None:
    result = run(home, *command)
    assert result.returncode == 2 and "Traceback" not in result.stderr


# --- planner calibrate ------------------------------------------------------------------------


def rows() -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(PUBLISHED.read_text(encoding="utf-8"))))


def write_rows(path: Path, data: list[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(data[0]))
        writer.writeheader()
        writer.writerows(data)
    return path


def test_a_negative_input_length_is_a_located_error_and_nothing_is_stored(
    home: Path, tmp_path: Path
) -> None:
    data = rows()
    data[2]["input_len"] = "-1"
    path = write_rows(tmp_path / "m.csv", data)
    export = tmp_path / "profiles.json"
    result = run(home, "calibrate", str(path), "--name", "neg", "--export", str(export))
    stderr = clean_error(result, 1)
    assert f"{path}: row 3, line 4, column 'input_len': expected a whole number of tokens" in (
        stderr
    )
    assert not export.exists()
    listed = run(home, "latency", *H100, "--profile", "neg")
    assert listed.returncode == 2 and "no calibration profile named 'neg'" in listed.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty file; expected a header row"),
        ("\ufeff", "empty file; expected a header row"),
        ("model,gpu\n", "missing required column 'num_gpus'"),
        ("a;b;c\n1;2;3\n", "missing required column 'model'"),
    ],
)
def test_bad_measurement_files(home: Path, tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "m.csv"
    path.write_text(content, encoding="utf-8")
    stderr = clean_error(run(home, "calibrate", str(path), "--name", "x"), 1)
    assert f"error: {path}: {message}" in stderr


def test_a_bom_and_a_header_only_file(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    header = PUBLISHED.read_text(encoding="utf-8").splitlines()[0]
    path.write_text("\ufeff" + header + "\n", encoding="utf-8")
    stderr = clean_error(run(home, "calibrate", str(path), "--name", "x"), 1)
    assert f"error: {path}: no measurement rows after the header" in stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--holdout", "nan"], "--holdout nan: expected a fraction in [0, 1)"),
        (["--holdout", "inf"], "--holdout inf: expected a fraction in [0, 1)"),
        (["--holdout", "-0.1"], "--holdout -0.1: expected a fraction"),
        (["--holdout", "1"], "--holdout 1: expected a fraction"),
        (["--name", ""], "--name: expected a name"),
        (["--name", "a\nb"], "--name 'a\\nb': expected a name"),
        (["--name", "x" * 300], "--name 'xxx"),
        (["--engine", "e" * 100], "--engine 'eee"),
        (["--gpu", "H100-SMX"], "unknown GPU 'H100-SMX'"),
        (["--start", "nope"], "no calibration profile named 'nope'"),
    ],
)
def test_bad_calibrate_options_name_the_option(home: Path, args: list[str], message: str) -> None:
    base = ["calibrate", str(PUBLISHED), "--name", "x", "--gpu", "H100-SXM"]
    stderr = clean_error(run(home, *base, *args), 2)
    assert message in stderr


def test_export_into_a_missing_folder_is_refused_before_the_fit(home: Path, tmp_path: Path) -> None:
    export = tmp_path / "missing" / "p.json"
    base = ["calibrate", str(PUBLISHED), "--name", "x", "--gpu", "H100-SXM"]
    stderr = clean_error(run(home, *base, "--export", str(export)), 2)
    assert f"--export {export}: folder {export.parent} does not exist" in stderr
    assert not export.parent.exists()


def test_a_folder_as_the_measurement_file(home: Path, tmp_path: Path) -> None:
    stderr = clean_error(run(home, "calibrate", str(tmp_path), "--name", "x"), 1)
    assert f"{tmp_path}: is a folder" in stderr


def test_export_into_a_malformed_file_is_refused_before_the_fit(home: Path, tmp_path: Path) -> None:
    export = tmp_path / "profiles.json"
    export.write_text("{not json", encoding="utf-8")
    base = ["calibrate", str(PUBLISHED), "--name", "x", "--gpu", "H100-SXM"]
    stderr = clean_error(run(home, *base, "--export", str(export)), 2)
    assert f"--export {export}" in stderr and "not a profiles file" in stderr
    assert export.read_text(encoding="utf-8") == "{not json"


def contradictory_points(path: Path) -> Path:
    """The H100 points at exactly what the bundled H100 profile predicts, each also measured
    100x slower: the log fit settles between the two, worse in MAPE than the bundled profile."""
    catalog = load_catalog()
    profile = choose_profile(load_bundled_profiles(), "H100-SXM", "trtllm")
    points, _ = read_measurements(PUBLISHED, catalog)
    chosen = {p.row for p in points if p.gpu == "H100-SXM" and p.load_kind == "batch"}
    by_row = {p.row: p for p in points}
    out = []
    for number, row in enumerate(rows(), start=1):
        if number in chosen:
            exact = predict(by_row[number], profile, catalog)
            out.append({**row, "value": f"{exact:.6f}", "unit": "ms"})
            out.append({**row, "value": f"{exact * 100:.6f}", "unit": "ms"})
    return write_rows(path, out)


def test_a_fit_worse_than_the_profile_in_use_is_not_stored_without_force(
    home: Path, tmp_path: Path
) -> None:
    path = contradictory_points(tmp_path / "m.csv")
    export = tmp_path / "profiles.json"
    args = ["calibrate", str(path), "--name", "bad", "--gpu", "H100-SXM", "--holdout", "0"]
    stderr = clean_error(run(home, *args, "--export", str(export)), 1)
    assert "worse than trtllm-default" in stderr and "--force" in stderr
    assert not export.exists()
    assert run(home, "latency", *H100, "--profile", "bad").returncode == 2

    forced = run(home, *args, "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert "worse than trtllm-default" in forced.stderr
    summary = json.loads(forced.stdout)
    assert summary["after_all"]["mape"] > summary["baseline_all"]["mape"]
    assert summary["baseline_profile"] == "trtllm-default"
    used = json.loads(run(home, "latency", *H100, "--profile", "bad", "--json").stdout)
    assert used["profile"] == "bad"


def test_holdout_zero_prints_no_nan(home: Path) -> None:
    args = ["calibrate", str(PUBLISHED), "--name", "all", "--gpu", "H100-SXM", "--holdout", "0"]
    result = run(home, *args)
    assert result.returncode == 0, result.stderr
    assert "nan" not in result.stdout.lower()
    assert "held-out points: none" in result.stdout
    data = run(home, *args, "--json")
    json.loads(data.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
