"""``planner bench`` as a user runs it: a stand-in server on loopback measured by ``bench run``
over real sockets, and a real ``vllm bench serve`` result imported."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.conftest import ROOT
from tests.dashboard.browser import free_port
from tests.e2e.test_cli import PLANNER, run

VLLM_RESULT = ROOT / "tests" / "fixtures" / "bench-results" / "vllm-bench-serve-0.32.0_c4.json"


def _wait_healthy(url: str, process: subprocess.Popen[str], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)  # the server is still starting
    raise AssertionError(f"{url} not up after {seconds:g} s")


def test_bench_run_measures_bench_serve_over_loopback(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PLANNER_DATABASE_URL"}
    env["PLANNER_HOME"] = str(tmp_path)
    server = subprocess.Popen(
        [PLANNER, "bench", "serve", "--port", str(port), "--speed", "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/health", server)
        out = tmp_path / "run.json"
        result = run(
            tmp_path, "bench", "run", "--url", f"http://127.0.0.1:{port}", "--pattern",
            "concurrency", "--concurrency", "2", "--requests", "8", "--input-tokens", "64",
            "--output-tokens", "16", "--out", str(out), "--json",
        )  # fmt: skip
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["completed"] == 8 and summary["failed"] == 0
    assert 0 < summary["mean_ttft_ms"] <= summary["mean_e2el_ms"]
    assert summary["planner"]  # the metadata block
    assert json.loads(out.read_text())["completed"] == 8


def test_bench_import_reads_a_vllm_result(tmp_path: Path) -> None:
    result = run(
        tmp_path, "bench", "import", str(VLLM_RESULT), "--gpu", "CPU", "--engine", "vllm",
        "--precision", "fp32", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [imported] = json.loads(result.stdout)
    assert imported["completed"] > 0 and imported["mean_ttft_ms"] > 0


def test_bench_help_lists_its_commands(tmp_path: Path) -> None:
    result = run(tmp_path, "bench", "--help")
    assert result.returncode == 0
    for command in ("run", "serve", "import"):
        assert command in result.stdout
