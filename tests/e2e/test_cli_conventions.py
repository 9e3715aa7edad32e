"""Conventions every command keeps: a closed pipe is not an error, results fit a terminal."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import DEMO_SAMPLE
from tests.e2e.test_cli import PLANNER


def environment(home: Path, columns: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLANNER_")}
    env.update(PLANNER_HOME=str(home), COLUMNS=str(columns))
    return env


@pytest.mark.parametrize(
    "args",
    [["prices", "list", "--json"], ["prices", "list"]],  # typer.echo, and a rich table
)
def test_output_piped_into_head_exits_cleanly(tmp_path: Path, args: list[str]) -> None:
    # `planner ... | head -1`: the reader closes the pipe after one line. The pipe holds one
    # page, far less than the output (tens of kB), so planner is still writing when it closes.
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    with subprocess.Popen(
        [PLANNER, *args], stdout=write_end, stderr=subprocess.PIPE, env=environment(tmp_path, 200)
    ) as process:
        os.close(write_end)
        with os.fdopen(read_end, "rb") as reader:
            assert reader.readline()
        assert process.stderr is not None
        errors = process.stderr.read().decode()
        assert process.wait(timeout=60) == 0, errors
    assert "rror" not in errors and "Exception" not in errors


def test_errors_print_user_text_as_text(tmp_path: Path) -> None:
    # a column named like an emoji code stays text; a file name with control characters is
    # escaped, never sent raw to the terminal
    weird = tmp_path / "log\x1b[31m\n.csv"
    weird.write_text("a:b:c,x\n1,2\n", encoding="utf-8")
    done = subprocess.run(
        [PLANNER, "ingest", str(weird)],
        capture_output=True,
        text=True,
        env=environment(tmp_path, 200),
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "a:b:c" in done.stderr
    assert "\x1b" not in done.stderr and "log\\x1b[31m\\n.csv" in done.stderr


def test_dataset_names_stay_whole_at_80_columns(tmp_path: Path) -> None:
    env = environment(tmp_path, 80)
    name = "azure-conversation-trace-2023-november-sample"
    ingest = [PLANNER, "ingest", str(DEMO_SAMPLE), "--name", name]
    assert subprocess.run(ingest, env=env, capture_output=True, check=False).returncode == 0
    listed = subprocess.run(
        [PLANNER, "datasets", "list"], env=env, capture_output=True, text=True, check=False
    )
    assert listed.returncode == 0, listed.stderr
    assert name in listed.stdout
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80


def test_recommendation_alternatives_keep_instance_and_model_whole_at_80_columns(
    tmp_path: Path,
) -> None:
    env = environment(tmp_path, 80)
    ingest = [PLANNER, "ingest", str(DEMO_SAMPLE), "--name", "conv"]
    assert subprocess.run(ingest, env=env, capture_output=True, check=False).returncode == 0
    done = subprocess.run(
        [
            *(PLANNER, "recommend", "--dataset", "conv", "--load-scale", "0.05"),
            *("--model", "llama-3.1-8b", "--slo-ttft-p99", "2s", "--slo-tpot-p99", "200ms"),
            *("--provider", "gcp", "--gpu", "L4"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    table = done.stdout[done.stdout.index("alternatives") :].splitlines()
    # the first alternative's instance and model whole (which g2 size wins follows the profiles)
    assert re.search(r"gcp g2-standard-\d+ ", table[3]) and "llama-3.1-8b" in table[3]
    assert max(len(line) for line in table) <= 80
    assert "left out" in done.stdout
