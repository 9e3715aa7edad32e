"""``planner bench engine`` as a user runs it: through planner's own command group, and as a
process stopped by Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from planner.cli import app
from planner.latency.calibration import read_measurements
from tests.e2e.test_cli import PLANNER

pytestmark = pytest.mark.bench

SMALL = ("--batches", "1,2", "--prompts", "8,16", "--output-tokens", "4", "--repeats", "2")


def _run(*args: str | Path) -> Result:
    return CliRunner().invoke(app, ["bench", "engine", *map(str, args)], env={"COLUMNS": "200"})


def test_json_points_and_calibration_rows(tmp_path: Path) -> None:
    out, rows = tmp_path / "run.json", tmp_path / "rows.csv"
    result = _run(
        *SMALL, "--precision", "bf16", "--gpu", "L4", "--out", out, "--out-csv", rows, "--json"
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert json.loads(out.read_text()) == document
    points = document["points"]
    assert [(p["batch"], p["prompt_tokens"]) for p in points] == [(1, 8), (1, 16), (2, 8), (2, 16)]
    assert all(p["repeats"] == 2 and p["cpu"]["ttft_ms"] > 0 for p in points)
    assert all(p["wall"]["tpot_ms"] > 0 for p in points)
    meta = document["planner"]
    assert meta["dtype"] == "bfloat16" and meta["threads"] == 1 and meta["device"] == "cpu"
    assert meta["model"]["kv_heads"] == 2 and meta["model"]["layers"] == 4
    assert meta["clock"] == "cpu" and meta["torch_version"].startswith("2.13")
    measured, excluded = read_measurements(rows)
    assert excluded == [] and len(measured) == 4 * 3
    assert {(m.gpu, m.model, m.precision, m.load_kind) for m in measured} == {
        ("L4", "bench-llama-tiny", "bf16", "static")
    }
    assert measured[0].value == points[0]["cpu"]["ttft_ms"]  # --clock cpu by default
    assert "wrote 12 rows" in result.stderr


def test_table_with_the_wall_clock_and_a_skipped_batch() -> None:
    result = _run(
        "--batches", "1", "--prompts", "8,4090", "--output-tokens", "8", "--repeats", "1",
        "--warmup", "0", "--clock", "wall",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "static batches (wall clock, ms)" in result.stdout
    assert "TTFT" in result.stdout and "TPOT" in result.stdout
    assert (
        "skipped batch 1 x 4090 tokens: 4090 prompt + 8 output tokens exceed the 4,096-token"
        in result.stderr
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--batches", "1,x"), "--batches '1,x': expected whole numbers"),
        (("--prompts", "0"), "--prompts '0': expected whole numbers"),
        (
            ("--precision", "int8"),
            "--precision 'int8': the in-process engine runs fp32, bf16, fp16",
        ),
        (("--clock", "sundial"), "--clock 'sundial': expected one of cpu, wall"),
        (("--model", "mixtral-8x7b"), "mixtral-8x7b is a mixture of experts"),
        (("--out-csv", "rows.csv"), "--out-csv needs --gpu"),
        (
            ("--out-csv", "rows.csv", "--gpu", "my-laptop"),
            "--gpu: --out-csv rows need catalog names",
        ),
        (("--repeats", "0"), "--repeats 0: expected at least 1"),
    ],
)
def test_bad_options_are_named(args: tuple[str, ...], message: str) -> None:
    result = _run(*args)
    assert result.exit_code != 0
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_ctrl_c_keeps_the_points_measured(tmp_path: Path) -> None:
    prompts = ",".join(str(n) for n in range(8, 400))  # minutes of points: Ctrl-C comes first
    out = tmp_path / "run.json"
    env = {k: v for k, v in os.environ.items() if k != "PLANNER_DEBUG"}
    process = subprocess.Popen(
        [PLANNER, "bench", "engine", "--prompts", prompts, "--batches", "1", "--warmup", "0",
         "--repeats", "1", "--output-tokens", "4", "--out", str(out), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        first_line = process.stderr.readline()  # printed as the measuring starts
        assert first_line.startswith("measuring bench-llama-tiny"), first_line
        time.sleep(2)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    document = json.loads(stdout)
    assert document["planner"]["stopped"] == "interrupted"
    assert 1 <= len(document["points"]) < 392
    assert "interrupted: kept the" in stderr
    assert json.loads(out.read_text()) == document
