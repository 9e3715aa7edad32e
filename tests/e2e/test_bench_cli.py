"""``planner bench`` as a user runs it: a stand-in server on loopback measured by ``bench run``
over real sockets (one pattern, a sweep, a replayed dataset), and a real ``vllm bench serve``
result imported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from planner.bench.results import BenchRun
from planner.bench.server import BenchServer, ModelEngine, ServerThread
from planner.latency.calibration import read_measurements
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


def test_bench_serve_torch_computes_tokens_that_bench_run_measures_and_stores(
    tmp_path: Path,
) -> None:
    """The in-process PyTorch engine behind the HTTP server: every token is computed by a real
    (random-weight) transformer; the run lands in the store under its name, and a second run
    with the same name is refused before it sends anything."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PLANNER_DATABASE_URL"}
    env["PLANNER_HOME"] = str(tmp_path)
    server = subprocess.Popen(
        [PLANNER, "bench", "serve", "--backend", "torch", "--port", str(port), "--max-seqs", "4",
         "--max-len", "256"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/health", server)
        args = (
            "bench", "run", "--url", f"http://127.0.0.1:{port}", "--pattern", "concurrency",
            "--concurrency", "2", "--requests", "6", "--input-tokens", "32",
            "--output-tokens", "8", "--name", "torch-cpu",
        )  # fmt: skip
        result = run(tmp_path, *args, "--json")
        again = run(tmp_path, *args)
    finally:
        server.terminate()
        _, served_log = server.communicate(timeout=30)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["completed"] == 6 and summary["failed"] == 0
    assert summary["total_output_tokens"] == 6 * 8  # the engine made every token asked for
    assert "in-process" in served_log or "bench-llama-tiny" in served_log
    assert "stored as torch-cpu" in result.stderr
    assert again.returncode == 2 and "already has that name" in again.stderr
    shown = run(tmp_path, "bench", "runs", "show", "torch-cpu", "--json")
    assert shown.returncode == 0, shown.stderr
    stored = json.loads(shown.stdout)
    assert stored["name"] == "torch-cpu" and stored["completed"] == 6


def test_bench_import_stores_each_run_unless_told_not_to(tmp_path: Path) -> None:
    kept = run(
        tmp_path, "bench", "import", str(VLLM_RESULT), "--engine", "vllm", "--name", "vllm-cpu-c4"
    )
    assert kept.returncode == 0, kept.stderr
    skipped = run(tmp_path, "bench", "import", str(VLLM_RESULT), "--engine", "vllm", "--no-store")
    assert skipped.returncode == 0, skipped.stderr
    listed = run(tmp_path, "bench", "runs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["name"] for r in json.loads(listed.stdout)] == ["vllm-cpu-c4"]


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
    for command in ("run", "serve", "import", "engine", "runs"):
        assert command in result.stdout


# --- sweeps, replays and calibration rows --------------------------------------------------------

# Azure's log format: five requests over 2 s, one logged with 0 output tokens
TRACE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2024-06-01 00:00:10.000,100,10\n"
    "2024-06-01 00:00:10.400,20,3\n"
    "2024-06-01 00:00:10.600,300,0\n"
    "2024-06-01 00:00:11.200,7,40\n"
    "2024-06-01 00:00:12.000,50,5\n"
)
CALIBRATION = ("--gpu", "L4", "--precision", "bf16", "--engine", "vllm")


@pytest.fixture(scope="module")
def served() -> Iterator[BenchServer]:
    """planner's stand-in server (llama-3.1-8b on an L4, 200 times faster), in this process."""
    engine = ModelEngine(speed=200.0)
    with ServerThread(BenchServer(engine, model_name=engine.model_name, port=0)) as server:
        yield server


@pytest.fixture(scope="module")
def trace_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store holding TRACE as the dataset "trace", ingested by the CLI."""
    folder = tmp_path_factory.mktemp("trace-store")
    db = f"sqlite:///{folder / 'store.db'}"
    log = folder / "trace.csv"
    log.write_text(TRACE, encoding="utf-8")
    ingested = run(folder, "ingest", str(log), "--name", "trace", db=db)
    assert ingested.returncode == 0, ingested.stderr
    return db


def test_a_sweep_prints_writes_and_makes_calibration_rows(
    tmp_path: Path, served: BenchServer
) -> None:
    out, rows = tmp_path / "sweep.json", tmp_path / "rows.csv"
    result = run(
        tmp_path, "bench", "run", "--url", served.url, "--pattern", "sweep", "--sweep-points",
        "4", "--concurrency", "4", "--ramp", "0", "--requests", "12", "--input-tokens", "32",
        "--output-tokens", "64", "--slo-ttft", "1000", "--out", str(out), "--out-csv",
        str(rows), *CALIBRATION, "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    written = json.loads(out.read_text())
    assert printed["runs"] == written["runs"]
    assert set(printed) == {"planner", "runs"}
    sweep = written["planner"]
    assert sweep["load"]["pattern"] == "sweep" and sweep["stopped"] == "done"
    assert sweep["deployment"] == {
        "gpu": "L4",
        "model": "llama-3.1-8b",
        "precision": "bf16",
        "engine": "vllm",
        "tp": 1,
    }
    runs = written["runs"]
    assert [r["planner"]["stage"]["kind"] for r in runs] == [
        "synchronous",
        "throughput",
        "rate",
        "rate",
    ]
    assert all(r["completed"] == 12 and r["request_goodput"] is not None for r in runs)
    floor, ceiling = sweep["floor_request_rate"], sweep["ceiling_request_rate"]
    rates = [r["planner"]["stage"]["load"]["rate"] for r in runs[2:]]
    assert floor < rates[0] < rates[1] < ceiling
    # each stage reads back as a run, its load in calibration's terms
    loads = [BenchRun.from_dict(r).info.load.label() for r in runs]
    assert loads[:2] == ["concurrency=1", "concurrency=4"]
    assert loads[2:] == [f"QPS={rate:g}" for rate in rates]
    # the requests file: every stage's requests, tagged
    lines = [json.loads(line) for line in (tmp_path / "sweep.jsonl").read_text().splitlines()]
    assert [line["stage"] for line in lines] == [i for i in range(4) for _ in range(12)]
    # calibration reads the rows back: 5 metrics a stage
    points, excluded = read_measurements(rows)
    assert not excluded
    assert len(points) == 4 * 5
    loads_read = sorted({(p.load_kind, p.load) for p in points})
    assert loads_read[:2] == [("concurrency", 1.0), ("concurrency", 4.0)]
    assert [kind for kind, _ in loads_read[2:]] == ["qps", "qps"]
    assert [load for _, load in loads_read[2:]] == pytest.approx(rates, rel=1e-5)
    assert {(p.gpu, p.model, p.precision, p.engine, p.tp) for p in points} == {
        ("L4", "llama-3.1-8b", "bf16", "vllm", 1)
    }
    assert {(p.input_tokens, p.output_tokens) for p in points} == {(32, 64)}


def test_a_sweep_prints_one_row_per_stage(tmp_path: Path, served: BenchServer) -> None:
    result = run(
        tmp_path, "bench", "run", "--url", served.url, "--pattern", "sweep", "--sweep-points",
        "3", "--concurrency", "4", "--ramp", "0", "--requests", "12", "--input-tokens", "32",
        "--output-tokens", "64",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    table = result.stdout
    assert "synchronous" in table and "throughput, 4 clients" in table and "rate " in table
    assert "goodput" not in table  # no SLO given


def test_ctrl_c_keeps_a_sweeps_finished_stages(tmp_path: Path, served: BenchServer) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PLANNER_DATABASE_URL",)}
    env["PLANNER_HOME"] = str(tmp_path)
    before = served.generation_requests
    command = [
        PLANNER, "bench", "run", "--url", served.url, "--pattern", "sweep", "--sweep-points",
        "5", "--concurrency", "4", "--ramp", "0", "--requests", "60", "--warmup", "0",
        "--output-tokens", "64", "--json",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    deadline = time.monotonic() + 60
    # the first two stages send 120 requests: a few more and the third stage is under way
    while served.generation_requests - before < 125 and time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    assert "interrupted: kept 2 finished stage(s)" in stderr
    document = json.loads(stdout)
    assert document["planner"]["stopped"] == "interrupted"
    runs = document["runs"]
    assert [r["planner"]["stage"]["stopped"] for r in runs] == [
        "requests",
        "requests",
        "interrupted",
    ]
    assert [r["completed"] for r in runs[:2]] == [60, 60]
    assert runs[2]["completed"] + runs[2]["incomplete"] >= 1  # sent before the stop
    assert runs[2]["completed"] < 60


def test_a_replay_sends_an_ingested_datasets_requests(
    tmp_path: Path, served: BenchServer, trace_db: str
) -> None:
    rows = tmp_path / "rows.csv"
    result = run(
        tmp_path, "bench", "run", "--url", served.url, "--pattern", "replay", "--dataset",
        "trace", "--speedup", "4", "--warmup", "0", "--out", str(tmp_path / "replay.json"),
        "--out-csv", str(rows), "--json", db=trace_db,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "--out-csv is skipped for --pattern replay" in result.stderr
    assert not rows.exists()
    summary = json.loads(result.stdout)
    assert summary["completed"] == 5 and summary["failed"] == 0
    # the logged lengths reached the server (a logged 0 output asks for 1 token)
    assert summary["total_input_tokens"] == 100 + 20 + 300 + 7 + 50
    assert summary["total_output_tokens"] == 10 + 3 + 1 + 40 + 5
    replay = summary["planner"]["replay"]
    assert replay["dataset"] == "trace" and replay["speedup"] == 4.0
    assert replay["requests"] == 5 and replay["span_s"] == pytest.approx(0.5)
    assert summary["planner"]["load"]["pattern"] == "replay"
    assert summary["request_rate"] == pytest.approx(4 / 0.5)  # the trace's mean rate
    records = [json.loads(line) for line in (tmp_path / "replay.jsonl").read_text().splitlines()]
    starts = [r["start_s"] for r in records]
    assert starts == sorted(starts)
    assert 0.5 <= starts[-1] < 0.7


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pattern", "replay", "--dataset", "trac"], "known datasets: trace"),
        (["--pattern", "replay"], "--pattern replay needs --dataset"),
        (["--pattern", "sync", "--dataset", "trace"], "--dataset goes with --pattern replay"),
        (["--pattern", "sync", "--sweep-points", "4"], "--sweep-points goes with --pattern sweep"),
        (["--pattern", "sweep", "--rate", "3"], "--pattern sweep measures its rates"),
        (["--pattern", "sweep", "--sweep-points", "1"], "--sweep-points 1"),
        (["--out-csv", "rows.csv", "--gpu", "L4"], "--out-csv needs --precision"),
        (["--out-csv", "rows.csv", *CALIBRATION[2:]], "--out-csv needs --gpu"),
    ],
)
def test_bench_run_refuses_bad_options_before_measuring(
    tmp_path: Path, served: BenchServer, trace_db: str, args: list[str], message: str
) -> None:
    before = served.generation_requests
    result = run(tmp_path, "bench", "run", "--url", served.url, *args, db=trace_db)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert served.generation_requests == before  # nothing was sent


def test_out_csv_names_are_checked_before_the_first_request(
    tmp_path: Path, served: BenchServer
) -> None:
    before = served.generation_requests
    result = run(
        tmp_path, "bench", "run", "--url", served.url, "--out-csv", str(tmp_path / "rows.csv"),
        "--gpu", "H9000", "--precision", "bf16", "--engine", "vllm",
    )  # fmt: skip
    assert result.returncode == 2
    assert "--out-csv:" in result.stderr and "H9000" in result.stderr and "--gpu" in result.stderr
    assert served.generation_requests == before
    assert not (tmp_path / "rows.csv").exists()


def test_bench_serve_closes_a_half_sent_request_after_its_read_timeout(tmp_path: Path) -> None:
    """`--read-timeout` reaches the server: a request whose head never ends is answered 408
    within about that time (a slowloris holds no connection for long), and a bad value is
    refused before any engine is built."""
    import socket

    refused = run(tmp_path, "bench", "serve", "--read-timeout", "nan")
    assert refused.returncode != 0 and "--read-timeout nan" in refused.stderr
    assert "Traceback" not in refused.stderr
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PLANNER_DATABASE_URL"}
    env["PLANNER_HOME"] = str(tmp_path)
    server = subprocess.Popen(
        [PLANNER, "bench", "serve", "--port", str(port), "--read-timeout", "0.5"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/health", server)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # and nothing more
            started = time.monotonic()
            answer = raw.recv(4096)
            elapsed = time.monotonic() - started
    finally:
        server.terminate()
        _, log = server.communicate(timeout=30)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert elapsed < 5, elapsed
    assert "Traceback" not in log
