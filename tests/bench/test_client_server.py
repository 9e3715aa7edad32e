"""The streaming client against planner's own OpenAI-compatible server over real loopback
sockets: both endpoints, the server's answers and refusals, a server that errors, stalls or
drops its stream, the `bench run` and `bench serve` commands (Ctrl-C included), and a run's
summary recomputed from its per-request records."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from planner.bench.client import RequestShape, Target, check_url, list_models, measure_request
from planner.bench.loadgen import LoadPlan, RunResult, run_load
from planner.bench.metrics import RequestRecord, read_jsonl
from planner.bench.server import BenchServer, Faults, ModelEngine, ServerThread
from planner.cli.bench_run import run_command, serve_command
from planner.cli.context import user_errors
from planner.errors import UsageError

SPEED = 100.0
ROOT = Path(__file__).resolve().parents[2]
# `planner bench run|serve` as the lead wires them: each a Typer command behind user_errors
RUN_SCRIPT = (
    "import typer; from planner.cli.context import user_errors; "
    "from planner.cli.bench_run import {name}; app = typer.Typer(); "
    "app.command()(user_errors({name})); app()"
)


def _app(command: Any) -> typer.Typer:
    app = typer.Typer()
    app.command()(user_errors(command))
    return app


@pytest.fixture(scope="module")
def engine() -> ModelEngine:
    return ModelEngine(speed=SPEED)


@pytest.fixture(scope="module")
def server(engine: ModelEngine) -> Iterator[BenchServer]:
    with ServerThread(BenchServer(engine, model_name=engine.model_name, port=0)) as running:
        yield running


def _measure(target: Target, shape: RequestShape, timeout: float = 10.0) -> RequestRecord:
    async def one() -> RequestRecord:
        async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
            return await measure_request(
                client, target, shape, index=0, origin=time.perf_counter(), timeout=timeout
            )

    return asyncio.run(one())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


# --- one request ---------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_a_streamed_request_is_timed_token_by_token(
    server: BenchServer, engine: ModelEngine, endpoint: str
) -> None:
    target = Target(server.url, endpoint, server.model_name)  # type: ignore[arg-type]
    record = _measure(target, RequestShape(input_tokens=40, output_tokens=24))
    assert record.ok, record.error
    assert record.input_tokens == 40  # the server's usage: a prompt word a token
    assert (record.output_tokens, record.output_tokens_source) == (24, "usage")
    assert len(record.itl_s) == 23
    assert record.ttft_s is not None
    assert record.tpot_s is not None
    assert record.tpot_s == pytest.approx(sum(record.itl_s) / 23)
    # the server waits what the latency model predicts: never less, and not much more
    assert record.ttft_s >= engine.first_token_delay(40) * 0.99
    step = engine.step_delay()  # nothing else runs: a batch of one
    assert step * 0.9 <= record.tpot_s <= step + 0.005
    assert record.e2el_s >= record.ttft_s + sum(record.itl_s)


def test_without_usage_output_tokens_are_counted(server: BenchServer) -> None:
    # the same server, asked without stream_options: no usage in the stream
    async def raw() -> list[str]:
        async with (
            httpx.AsyncClient(trust_env=False) as client,
            client.stream(
                "POST",
                server.url + "/v1/completions",
                json={
                    "model": server.model_name,
                    "prompt": "a b c",
                    "max_tokens": 5,
                    "stream": True,
                },
            ) as response,
        ):
            return [line async for line in response.aiter_lines() if line]

    lines = asyncio.run(raw())
    assert lines[-1] == "data: [DONE]"
    assert not any('"usage": {' in line for line in lines)
    assert len(lines) == 6  # five tokens and [DONE]


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_non_streamed_answers_hold_the_whole_text_and_usage(
    server: BenchServer, endpoint: str
) -> None:
    body: dict[str, Any] = {"model": server.model_name, "max_tokens": 7, "stream": False}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": "one two three"}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = "one two three"
        path = "/v1/completions"
    answer = httpx.post(server.url + path, json=body, trust_env=False).json()
    choice = answer["choices"][0]
    text = choice["message"]["content"] if endpoint == "chat" else choice["text"]
    assert len(text.split()) == 7
    assert choice["finish_reason"] == "length"
    assert answer["usage"] == {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10}


def test_models_and_health(server: BenchServer) -> None:
    with httpx.Client(base_url=server.url, trust_env=False) as client:
        assert client.get("/health").status_code == 200
        models = client.get("/v1/models").json()
        assert [m["id"] for m in models["data"]] == ["llama-3.1-8b"]
        assert asyncio.run(_models(server.url)) == ["llama-3.1-8b"]


async def _models(url: str) -> list[str]:
    async with httpx.AsyncClient(trust_env=False) as client:
        return await list_models(client, url)


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "message"),
    [
        ("GET", "/v2/nothing", None, 404, "no route '/v2/nothing'"),
        ("GET", "/v1/completions", None, 405, "takes POST"),
        ("POST", "/v1/completions", b"{not json", 400, "not JSON"),
        ("POST", "/v1/completions", {"model": "gpt-9", "prompt": "a"}, 404, "`gpt-9` does not exist"),
        ("POST", "/v1/completions", {"prompt": ""}, 400, "prompt is empty"),
        ("POST", "/v1/completions", {"prompt": "a", "max_tokens": 0}, 400, "max_tokens"),
        ("POST", "/v1/completions", {"prompt": "a", "n": 2}, 400, "n=1"),
        ("POST", "/v1/chat/completions", {"messages": []}, 400, "'messages'"),
        ("POST", "/v1/completions", {"prompt": "a " * 131000, "max_tokens": 100}, 400, "maximum context length is 131072"),
    ],
)  # fmt: skip
def test_bad_requests_get_openai_style_errors(
    server: BenchServer, method: str, path: str, body: Any, status: int, message: str
) -> None:
    content = body if isinstance(body, bytes) else None
    payload = body if isinstance(body, dict) else None
    with httpx.Client(base_url=server.url, trust_env=False) as client:
        response = client.request(method, path, content=content, json=payload)
        assert response.status_code == status
        error = response.json()["error"]
        assert message in error["message"]
        assert error["code"] == status
        # the connection stays usable after an error
        assert client.get("/health").status_code == 200


def test_malformed_http_is_answered_400_and_closed(server: BenchServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        raw.sendall(b"NONSENSE\r\n\r\n")
        answer = raw.recv(4096)
        assert answer.startswith(b"HTTP/1.1 400 Bad Request")
        assert raw.recv(4096) == b""  # closed


def test_a_client_expecting_100_continue_gets_it(server: BenchServer) -> None:
    body = json.dumps({"prompt": "a b", "max_tokens": 2}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        raw.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n".encode()
        )
        assert raw.recv(4096) == b"HTTP/1.1 100 Continue\r\n\r\n"
        raw.sendall(body)
        assert raw.recv(4096).startswith(b"HTTP/1.1 200 OK")


def test_only_loopback_unless_allowed() -> None:
    engine = ModelEngine(speed=SPEED)
    with pytest.raises(UsageError, match="not a loopback address"):
        BenchServer(engine, model_name="m", host="0.0.0.0")
    assert BenchServer(engine, model_name="m", host="0.0.0.0", allow_remote=True).host == "0.0.0.0"
    assert BenchServer(engine, model_name="m", host="::1").url.startswith("http://[::1]:")


def test_urls_are_checked() -> None:
    assert check_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000"
    assert check_url(" https://example.com ") == "https://example.com"
    for bad in ("ftp://host", "127.0.0.1:8000", "http://", "http://h/?q=1"):
        with pytest.raises(UsageError, match="--url"):
            check_url(bad)


# --- failing servers: every failure counted with its reason, the run completes -------------


@pytest.fixture
def faulty() -> Iterator[BenchServer]:
    engine = ModelEngine(speed=SPEED)
    faults = Faults(error_every=4, drop_every=5, stall_every=7, stall_s=30.0)
    with ServerThread(
        BenchServer(engine, model_name=engine.model_name, port=0, faults=faults)
    ) as running:
        yield running


def _run(server: BenchServer, plan: LoadPlan, timeout: float, endpoint: str = "chat") -> RunResult:
    target = Target(server.url, endpoint, server.model_name)  # type: ignore[arg-type]
    return asyncio.run(run_load(target, RequestShape(16, 12), plan, timeout=timeout))


def test_errors_stalls_and_drops_are_failed_requests_with_reasons(faulty: BenchServer) -> None:
    result = _run(faulty, LoadPlan("sync", max_requests=12, max_seconds=60), timeout=0.3)
    assert result.stopped == "requests"
    # one request at a time: request index i is the server's request i + 1
    failed = {r.index: r for r in result.records if not r.ok}
    assert {i: r.error_kind for i, r in failed.items()} == {
        3: "http_500",
        4: "stream_dropped",
        6: "timeout",
        7: "http_500",
        9: "stream_dropped",
        11: "http_500",
    }
    assert failed[3].http_status == 500
    assert failed[3].error == "HTTP 500: injected failure: request 4 (every 4th fails)"
    assert failed[4].error is not None
    assert failed[4].error.startswith("the connection was closed mid-stream")
    assert failed[4].output_tokens == 6  # half the stream arrived before the drop
    # --timeout bounds the whole request: the stall passes it after the first token
    assert failed[6].error is not None
    assert failed[6].error.startswith(
        "the response did not finish within 0.3 s (--timeout, the limit of one request): "
        "1 chunk of text had arrived, the last "
    )
    assert all(r.ok and r.output_tokens == 12 for r in result.records if r.index not in failed)


def test_faults_under_concurrency_are_counted_exactly(faulty: BenchServer) -> None:
    plan = LoadPlan("concurrency", max_requests=20, max_seconds=60, concurrency=4, ramp_s=0.0)
    result = _run(faulty, plan, timeout=0.3, endpoint="completions")
    kinds = Counter(r.error_kind for r in result.records if not r.ok)
    # of requests 1..20: 4, 8, 12, 16, 20 error; 5, 10, 15 drop; 7, 14 stall
    assert kinds == {"http_500": 5, "stream_dropped": 3, "timeout": 2}
    assert sum(r.ok for r in result.records) == 10


# Servers that answer oddly: fixed answers from the standard library's HTTP server, one per
# path prefix (the client's --url may carry a path)
CANNED: dict[str, tuple[int, str, bytes]] = {
    "/json": (200, "application/json", b'{"choices":[{"index":0,"text":"a b"}]}'),
    "/cut": (200, "text/event-stream", b'data: {"choices":[{"index":0,"text":" a"}]}\n\n'),
    "/empty": (
        200,
        "text/event-stream",
        b'data: {"choices":[{"index":0,"text":"","finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
    ),
    "/busy": (503, "application/json", b'{"detail":"server overloaded, retry later"}'),
    "/garbage": (200, "text/event-stream", b"data: <html>oops</html>\n\n"),
    "/no-done": (
        200,
        "text/event-stream",
        b'data: {"choices":[{"index":0,"text":" a"}]}\n\n'
        b'data: {"choices":[{"index":0,"text":" b","finish_reason":"length"}],'
        b'"usage":{"prompt_tokens":4,"completion_tokens":2}}\n\n',
    ),
}


class _Canned(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        status, content_type, body = CANNED["/" + self.path.split("/")[1]]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def canned() -> Iterator[str]:
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Canned) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
        httpd.shutdown()


@pytest.mark.parametrize(
    ("prefix", "kind", "message"),
    [
        ("/json", "not_a_stream", "the server answered application/json; does it support stream=true?"),
        ("/cut", "stream_incomplete", "the stream ended before the response finished"),
        ("/empty", "no_tokens", "the response carried no tokens"),
        ("/busy", "http_503", "HTTP 503: server overloaded, retry later"),
        ("/garbage", "bad_stream", "an event is not JSON: '<html>oops</html>'"),
    ],
)  # fmt: skip
def test_odd_answers_are_failed_requests_with_reasons(
    canned: str, prefix: str, kind: str, message: str
) -> None:
    record = _measure(Target(canned + prefix, "completions", "m"), RequestShape(4, 2))
    assert record.status == "failed"
    assert record.error_kind == kind
    assert record.error is not None
    assert message in record.error


def test_a_stream_without_done_but_finished_is_complete(canned: str) -> None:
    record = _measure(Target(canned + "/no-done", "completions", "m"), RequestShape(4, 2))
    assert record.ok, record.error
    assert (record.input_tokens, record.output_tokens) == (4, 2)


def test_a_server_that_is_not_there_fails_every_request() -> None:
    dead = Target(f"http://127.0.0.1:{_free_port()}", "completions", "m")
    result = asyncio.run(run_load(dead, RequestShape(4, 4), LoadPlan("sync", 3, 10.0), timeout=1.0))
    assert [r.error_kind for r in result.records] == ["connect_error"] * 3
    assert all(r.error and "cannot connect to http://127.0.0.1" in r.error for r in result.records)


def test_list_models_says_when_the_server_cannot_be_reached() -> None:
    with pytest.raises(UsageError, match="cannot reach .*planner bench serve"):
        asyncio.run(_models(f"http://127.0.0.1:{_free_port()}"))


# --- the commands ------------------------------------------------------------------------


def _recomputed(records: list[RequestRecord], duration: float) -> dict[str, float]:
    """The summary's main numbers worked out again from the per-request records."""
    done = [r for r in records if r.ok]
    ttft = np.array([r.ttft_s for r in done], dtype=float) * 1000
    tpot = np.array([r.tpot_s for r in done if r.tpot_s is not None], dtype=float) * 1000
    itl = np.array([gap for r in done for gap in r.itl_s]) * 1000
    e2el = np.array([r.e2el_s for r in done]) * 1000
    output = sum(r.output_tokens for r in done)
    return {
        "completed": len(done),
        "failed": sum(r.status == "failed" for r in records),
        "total_output_tokens": output,
        "request_throughput": len(done) / duration,
        "output_throughput": output / duration,
        "total_token_throughput": (output + sum(r.input_tokens for r in done)) / duration,
        "mean_ttft_ms": float(ttft.mean()),
        "median_ttft_ms": float(np.median(ttft)),
        "p99_ttft_ms": float(np.percentile(ttft, 99)),
        "mean_tpot_ms": float(tpot.mean()),
        "p90_tpot_ms": float(np.percentile(tpot, 90)),
        "mean_itl_ms": float(itl.mean()),
        "std_itl_ms": float(itl.std()),
        "p50_e2el_ms": float(np.percentile(e2el, 50)),
        "p99_e2el_ms": float(np.percentile(e2el, 99)),
    }


def test_bench_run_writes_a_summary_its_records_reproduce(
    faulty: BenchServer, tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    result = CliRunner().invoke(
        _app(run_command),
        [
            "--url", faulty.url, "--endpoint", "chat", "--pattern", "concurrency",
            "--concurrency", "3", "--ramp", "0.05", "--requests", "16", "--warmup", "2",
            "--input-tokens", "20", "--output-tokens", "10", "--timeout", "0.3",
            "--slo-ttft", "1000", "--out", str(out), "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert document["model_id"] == "llama-3.1-8b"  # asked of the server: no --model given
    assert document["max_concurrency"] == 3
    assert document["planner"]["load"]["pattern"] == "concurrency"
    assert document["planner"]["warmup_completed"] + document["planner"]["warmup_failed"] == 2
    assert document["planner"]["stopped"] == "requests"
    records = read_jsonl(tmp_path / document["planner"]["requests_file"])
    assert len(records) == 16
    assert [r.index for r in records] == list(range(16))
    for key, value in _recomputed(records, document["duration"]).items():
        assert document[key] == pytest.approx(value, rel=1e-9), key
    # the faulty server's requests 1..18 (two warm-up): requests 4, 8, 12, 16 error, 5, 10,
    # 15 drop, 7, 14 stall, whichever phase they fall in
    assert document["failed"] == sum(document["failure_reasons"].values())
    assert document["completed"] + document["failed"] == 16
    # everything completed met a one-second TTFT target
    assert document["request_goodput"] == pytest.approx(document["request_throughput"])
    assert result.stdout.startswith("{")
    assert json.loads(result.stdout) == document


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pattern", "rate"], "--pattern rate needs --rate"),
        (["--concurrency", "4"], "--concurrency goes with --pattern concurrency"),
        (["--pattern", "concurrency"], "needs --concurrency"),
        (["--pattern", "sync", "--rate", "3"], "--rate goes with --pattern rate or poisson"),
        (["--endpoint", "embeddings"], "--endpoint 'embeddings'"),
        (["--url", "localhost:8000"], "--url 'localhost:8000'"),
        (["--timeout", "0"], "--timeout 0"),
        (["--input-tokens", "0"], "--input-tokens 0"),
        (["--out", "/nonexistent/run.json"], "folder /nonexistent does not exist"),
    ],
)
def test_bench_run_refuses_bad_options_before_any_request(args: list[str], message: str) -> None:
    result = CliRunner().invoke(_app(run_command), ["--url", "http://127.0.0.1:1", *args])
    assert result.exit_code == 2
    assert message in result.output


def test_bench_run_fails_clearly_when_nothing_completes(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    url = f"http://127.0.0.1:{_free_port()}"
    result = CliRunner().invoke(
        _app(run_command),
        ["--url", url, "--model", "m", "--requests", "2", "--warmup", "0", "--out", str(out)],
    )
    assert result.exit_code == 1
    assert "no request completed (2 x connect_error); first error: cannot connect" in result.output
    assert json.loads(out.read_text())["failed"] == 2  # what was measured is still written


def test_bench_serve_refuses_what_cannot_be_served() -> None:
    cases = [
        (["--model", "llama-2-70b", "--gpu", "L4"], "does not fit"),
        (["--speed", "0"], "--speed 0"),
        (["--host", "a b"], "--host 'a b'"),
        (["--fail-every", "-1"], "--fail-every -1"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(_app(serve_command), args)
        assert result.exit_code != 0, args
        assert message in result.output, (args, result.output)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}


def test_ctrl_c_ends_bench_run_and_keeps_what_was_measured(
    server: BenchServer, tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    before = server.generation_requests
    process = subprocess.Popen(
        [
            sys.executable, "-c", RUN_SCRIPT.format(name="run_command"),
            "--url", server.url, "--model", server.model_name, "--pattern", "rate",
            "--rate", "20", "--requests", "100000", "--warmup", "0",
            "--output-tokens", "8", "--out", str(out),
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while server.generation_requests - before < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    assert "interrupted: kept the" in stderr
    document = json.loads(out.read_text())
    assert document["planner"]["stopped"] == "interrupted"
    assert document["completed"] >= 5
    records = read_jsonl(out.with_suffix(".jsonl"))
    assert len(records) == document["completed"] + document["failed"] + document["incomplete"]
    assert "TTFT" in stdout


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_bench_serve_serves_until_ctrl_c_or_sigterm(tmp_path: Path, stop: signal.Signals) -> None:
    process = subprocess.Popen(
        [
            sys.executable, "-c", RUN_SCRIPT.format(name="serve_command"),
            "--port", "0", "--speed", "500", "--gpu", "H100", "--model", "llama-3.1-8b",
            "--precision", "fp8",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        match = re.search(r"at (http://127\.0\.0\.1:\d+) ", line)
        assert match, line
        assert "model-driven stand-in for llama-3.1-8b on H100-SXM (fp8" in line
        record = _measure(Target(match[1], "chat", "llama-3.1-8b"), RequestShape(10, 5))
        assert record.ok, record.error
        assert record.output_tokens == 5
        process.send_signal(stop)
        _, rest = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0, rest
    assert "stopped" in rest
