"""`bench run` against servers that misbehave without ever failing outright, over real loopback
sockets: one SSE line that never ends (refused at the line limit, memory bounded), bytes that
trickle forever (--max-seconds is a hard wall, --timeout a deadline for the whole request), a
stream that ends early although ignore_eos asked for every token (short, kept out of TPOT and
of calibration), and bytes that are not UTF-8 (counted)."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
import typer
from typer.testing import CliRunner

from planner.bench.client import RequestShape, Target, measure_request
from planner.bench.harness import bench_run_of
from planner.bench.loadgen import LoadPlan, run_load
from planner.bench.metrics import RequestRecord, read_jsonl, summarize
from planner.bench.results import Load, RunInfo
from planner.bench.sse import MAX_LINE_BYTES
from planner.cli.bench_run import run_command
from planner.cli.context import user_errors

ROOT = Path(__file__).resolve().parents[2]
RUN_SCRIPT = (
    # the child writes its own peak memory (VmHWM, KiB) where PEAK_FILE says, as it exits: the
    # peak of its own address space (ru_maxrss survives exec, and would count the forked copy
    # of a pytest that has grown to a GB)
    "import atexit, os, re; atexit.register(lambda: open(os.environ['PEAK_FILE'], 'w')"
    ".write(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])); "
    "import typer; from planner.cli.context import user_errors; "
    "from planner.cli.bench_run import run_command; app = typer.Typer(); "
    "app.command()(user_errors(run_command)); app()"
)
BLOCK = b"x" * 65536


def _chunk(text: str, finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    choice = {"index": 0, "text": text, "finish_reason": finish}
    return b"data: " + json.dumps({"choices": [choice], "usage": usage}).encode() + b"\n\n"


def _tokens(count: int, *, finish: str = "length", total: int | None = None) -> list[bytes]:
    """``count`` one-token chunks, the last with ``finish`` and usage (``total`` tokens, if
    more were sent before), then [DONE]."""
    whole = total if total is not None else count
    usage = {"prompt_tokens": 4, "completion_tokens": whole, "total_tokens": whole + 4}
    parts = [_chunk(" a") for _ in range(count - 1)]
    return [*parts, _chunk(" a", finish, usage), b"data: [DONE]\n\n"]


class _Misbehaving(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible stream per path: ``/endless`` one line forever, ``/trickle`` a
    keep-alive comment every 50 ms forever, ``/short`` 20 tokens whatever was asked (with
    20 ms between them), ``/alternate`` the same every other request and every token asked
    otherwise (at once), ``/utf8`` an event holding bytes that are not UTF-8."""

    requests = 0
    encodings: ClassVar[list[str | None]] = []  # each request's Accept-Encoding
    lock = threading.Lock()

    def do_POST(self) -> None:
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["max_tokens"]
        with self.lock:
            type(self).requests += 1
            number = type(self).requests
            self.encodings.append(self.headers.get("Accept-Encoding"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()  # HTTP/1.0: the body ends when the connection closes
        mode = self.path.split("/")[1]
        try:
            if mode == "endless":
                self.wfile.write(b"data: ")
                while True:
                    self.wfile.write(BLOCK)
            elif mode == "trickle":
                while True:
                    self.wfile.write(b": keep-alive\n")
                    self.wfile.flush()
                    time.sleep(0.05)
            elif mode == "short" or (mode == "alternate" and number % 2 == 0):
                for part in _tokens(20, finish="stop"):
                    self.wfile.write(part)
                    self.wfile.flush()
                    time.sleep(0.02)
            elif mode == "alternate":
                self.wfile.write(b"".join(_tokens(asked)))
            elif mode == "utf8":
                bad = b'data: {"choices":[{"index":0,"text":" \xff\xfe"}]}\n\n'
                self.wfile.write(_chunk(" a") + bad + b"".join(_tokens(asked - 2, total=asked)))
        except OSError:
            pass  # the client went away: what these tests want

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def misbehaving() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Misbehaving)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _measure(url: str, shape: RequestShape, timeout: float = 10.0) -> RequestRecord:
    async def one() -> RequestRecord:
        async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
            return await measure_request(
                client,
                Target(url, "completions", "m"),
                shape,
                index=0,
                origin=time.perf_counter(),
                timeout=timeout,
            )

    return asyncio.run(one())


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(user_errors(run_command))
    return app


# --- a line that never ends ---------------------------------------------------------------------


def test_a_line_that_never_ends_fails_as_bad_stream_within_bounded_memory(
    misbehaving: str,
) -> None:
    tracemalloc.start()
    try:
        record = _measure(misbehaving + "/endless", RequestShape(4, 128))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (record.status, record.error_kind) == ("failed", "bad_stream")
    assert record.error == (
        "a line of the stream passed 1 MiB (1,048,576 bytes) without ending (the limit of one line)"
    )
    # the line's 1 MiB and the pieces it came in, not the gigabytes the server would send
    assert peak < 4 * MAX_LINE_BYTES, peak


def test_bench_run_against_an_endless_line_stays_small_and_says_why(
    misbehaving: str, tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    peak = tmp_path / "peak-kib"
    process = subprocess.Popen(
        [
            sys.executable, "-c", RUN_SCRIPT,
            "--url", misbehaving + "/endless", "--model", "m", "--requests", "3",
            "--warmup", "0", "--max-seconds", "30", "--no-store", "--out", str(out),
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "PEAK_FILE": str(peak)},
    )  # fmt: skip
    try:
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    # the child's own peak (RUSAGE_CHILDREN would be the largest of every child the test
    # session ran before: a dashboard or a torch engine is larger than this bound)
    peak_mib = int(peak.read_text()) / 1024
    assert process.returncode == 1, stderr
    assert "no request completed (3 x bad_stream)" in stderr
    assert "a line of the stream passed 1 MiB" in stderr
    assert "MemoryError" not in stderr and "Traceback" not in stderr
    document = json.loads(out.read_text())
    assert (document["failed"], document["failure_reasons"]) == (3, {"bad_stream": 3})
    assert document["planner"]["limits"]["line_bytes"] == MAX_LINE_BYTES
    # unbounded, the client grew by about 250 MB a second on loopback until MemoryError
    assert peak_mib < 400, peak_mib


# --- bytes that trickle forever -------------------------------------------------------------


def test_max_seconds_is_a_hard_wall_however_long_bytes_keep_coming(misbehaving: str) -> None:
    target = Target(misbehaving + "/trickle", "completions", "m")
    wall = 1.0
    began = time.perf_counter()
    result = asyncio.run(
        run_load(target, RequestShape(4, 8), LoadPlan("sync", 3, wall, warmup=0), timeout=60.0)
    )
    took = time.perf_counter() - began
    assert took < 1.5 * wall, took
    assert result.stopped == "seconds"
    [cut] = result.records
    assert (cut.status, cut.error_kind) == ("incomplete", "cut_off")
    assert cut.error == "cut off at the run's time limit (--max-seconds 1)"
    summary = summarize(result.records, result.duration)
    assert (summary["completed"], summary["failed"], summary["incomplete"]) == (0, 0, 1)


def test_the_warm_up_counts_against_the_wall(misbehaving: str) -> None:
    target = Target(misbehaving + "/trickle", "completions", "m")
    began = time.perf_counter()
    plan = LoadPlan("concurrency", 4, 1.0, concurrency=2, warmup=2, ramp_s=0.0)
    result = asyncio.run(run_load(target, RequestShape(4, 8), plan, timeout=60.0))
    assert time.perf_counter() - began < 1.5
    assert result.stopped == "seconds"
    assert result.records == []  # the warm-up reached the wall: nothing measured
    assert [r.error_kind for r in result.warmup_records] == ["cut_off", "cut_off"]


def test_bench_run_ends_at_max_seconds_and_says_so(misbehaving: str, tmp_path: Path) -> None:
    import planner.store.bench_runs  # noqa: F401  # imported before the clock starts (1.5 s)

    out = tmp_path / "run.json"
    began = time.perf_counter()
    result = CliRunner().invoke(
        _app(),
        [
            "--url", misbehaving + "/trickle", "--model", "m", "--requests", "5",
            "--max-seconds", "1.5", "--no-store", "--out", str(out),
        ],
    )  # fmt: skip
    took = time.perf_counter() - began
    assert took < 1.5 * 1.5, took
    assert result.exit_code == 1
    assert "stopped at --max-seconds 1.5 after 0 requests (the warm-up reached it" in result.output
    assert "no request completed (the warm-up reached --max-seconds 1.5)" in result.output
    assert "cut off at the run's time limit (--max-seconds 1.5)" in result.output


def test_timeout_bounds_the_whole_request_not_only_silences(misbehaving: str) -> None:
    began = time.perf_counter()
    record = _measure(misbehaving + "/trickle", RequestShape(4, 8), timeout=0.5)
    assert time.perf_counter() - began < 1.5
    assert (record.status, record.error_kind) == ("failed", "timeout")
    assert record.error == (
        "the response did not finish within 0.5 s (--timeout, the limit of one request): "
        "no text had arrived"
    )


# --- short responses --------------------------------------------------------------------------


def test_a_response_short_of_its_ignore_eos_length_is_short_not_completed(
    misbehaving: str,
) -> None:
    record = _measure(misbehaving + "/short", RequestShape(4, 128))
    assert (record.status, record.error_kind) == ("short", "short")
    assert (record.output_tokens, record.requested_output_tokens) == (20, 128)
    assert record.error is not None
    assert "finished after 20 of the 128 tokens" in record.error
    # the stream is asked for uncompressed: its limits count the bytes the server sends
    assert _Misbehaving.encodings[-1] == "identity"
    # asked without ignore_eos, a server may stop early: completed
    allowed = _measure(misbehaving + "/short", RequestShape(4, 128, exact_output=False))
    assert allowed.ok
    assert allowed.output_tokens == 20


def test_short_responses_are_left_out_of_tpot_and_of_calibration(
    misbehaving: str, tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    result = CliRunner().invoke(
        _app(),
        [
            "--url", misbehaving + "/alternate", "--model", "m", "--requests", "6",
            "--warmup", "0", "--output-tokens", "32", "--no-store", "--out", str(out), "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    records = read_jsonl(out.with_suffix(".jsonl"))
    short = [r for r in records if r.status == "short"]
    done = [r for r in records if r.ok]
    assert len(short) + len(done) == 6
    assert short and done
    assert (document["completed"], document["short"]) == (len(done), len(short))
    assert document["short_output_tokens"] == 20 * len(short)
    assert document["short_requested_output_tokens"] == 32 * len(short)
    assert document["total_output_tokens"] == 32 * len(done)
    # the short responses' tokens came 20 ms apart, the full ones' at once: a mean TPOT under
    # 5 ms is the full ones' alone
    assert all(r.tpot_s is not None and r.tpot_s > 0.015 for r in short)
    assert document["mean_tpot_ms"] < 5
    assert "short: " in result.output and "Does the server honour ignore_eos?" in result.output

    # calibration reads the run as bench_run_of makes it: the short ones are no part of it
    run = bench_run_of(summarize(records, document["duration"]), _info())
    assert run.completed == len(done)
    assert run.output_len == 32
    assert run.tpot.mean == pytest.approx(document["mean_tpot_ms"])


def _info() -> RunInfo:
    return RunInfo(
        tool="planner bench run",
        tool_version="0",
        source_file="",
        source_format="planner bench run",
        benchmark=0,
        load=Load("concurrency", 1.0),
        gpu=None,
        gpu_count=None,
        engine=None,
        model=None,
        precision=None,
        tp=1,
    )


# --- bytes that are not UTF-8 ------------------------------------------------------------------


def test_invalid_utf8_is_counted_in_the_record_and_the_summary(misbehaving: str) -> None:
    record = _measure(misbehaving + "/utf8", RequestShape(4, 6))
    assert record.ok, record.error
    assert record.invalid_utf8 == 1
    clean = _measure(misbehaving + "/short", RequestShape(4, 6, exact_output=False))
    assert (clean.ok, clean.invalid_utf8) == (True, 0)
    summary = summarize([record, clean], 1.0)
    assert (summary["invalid_utf8_events"], summary["invalid_utf8_requests"]) == (1, 1)
