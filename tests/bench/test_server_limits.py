"""``planner bench serve``'s limits over real loopback sockets: JSON nested too deep is answered
400 (the server stays up), a request that does not arrive whole in time is answered 408 and
closed (half-sent headers, a short body, a connection that sends nothing), an idle kept-alive
connection is closed, and connections over the cap are answered 503."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator

import pytest

from planner.bench.server import (
    MAX_JSON_DEPTH,
    BenchServer,
    ModelEngine,
    ServerThread,
    json_nesting_problem,
)
from planner.errors import UsageError

READ_TIMEOUT = 0.5  # seconds: the tests' own, so they end quickly


@pytest.fixture(scope="module")
def engine() -> ModelEngine:
    return ModelEngine(speed=100.0)


@pytest.fixture
def server(engine: ModelEngine) -> Iterator[BenchServer]:
    served = BenchServer(
        engine,
        model_name=engine.model_name,
        port=0,
        read_timeout=READ_TIMEOUT,
        idle_timeout=0.3,
        max_connections=40,
    )
    with ServerThread(served) as running:
        yield running


def _connect(server: BenchServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


def _answer(raw: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while chunk := raw.recv(65536):
        received += chunk
    return received


def _post(body: bytes, path: str = "/v1/completions") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def _healthy(server: BenchServer) -> bool:
    with _connect(server) as raw:
        raw.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return _answer(raw).startswith(b"HTTP/1.1 200 OK")


def test_deep_json_is_answered_400_and_the_server_stays_up(
    server: BenchServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    deep = b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with _connect(server) as raw:
        raw.sendall(_post(deep))
        answer = _answer(raw)
    assert answer.startswith(b"HTTP/1.1 400 Bad Request"), answer[:200]
    message = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["message"]
    assert message == f"the body's JSON nests more than {MAX_JSON_DEPTH} levels deep"
    assert _healthy(server)
    assert "RecursionError" not in caplog.text and "Traceback" not in caplog.text


def test_nesting_is_measured_outside_strings() -> None:
    assert json_nesting_problem(b"[" * 64 + b"]" * 64) is None
    assert json_nesting_problem(b"[" * 65 + b"]" * 65) is not None
    # objects and lists alternating count one level each
    assert json_nesting_problem(b'{"a":[' * 32 + b"1" + b"]}" * 32) is None
    assert json_nesting_problem(b'{"a":[' * 33 + b"1" + b"]}" * 33) is not None
    # brackets inside strings (escaped quotes too) are text, not nesting
    text = json.dumps({"prompt": '[[{{"]]\\' * 500, "stream": True}).encode()
    assert json_nesting_problem(text) is None
    assert json_nesting_problem(b"[" * 70) == "the body is not JSON (its brackets do not pair)"


def test_half_sent_headers_are_answered_408_and_closed(server: BenchServer) -> None:
    connections = [_connect(server) for _ in range(30)]
    started = time.perf_counter()
    try:
        for raw in connections:
            raw.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # and nothing more
        answers = [_answer(raw) for raw in connections]
    finally:
        for raw in connections:
            raw.close()
    elapsed = time.perf_counter() - started
    assert READ_TIMEOUT * 0.8 < elapsed < READ_TIMEOUT + 3.0, elapsed
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout"), answer[:200]
        assert b"did not arrive whole within 0.5 s" in answer
    assert _healthy(server)


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # a connection that never sends a request
        b'POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{"prompt"',  # short body
    ],
)
def test_requests_that_never_arrive_whole_are_closed(server: BenchServer, sent: bytes) -> None:
    with _connect(server) as raw:
        started = time.perf_counter()
        raw.sendall(sent)
        answer = _answer(raw)
        assert time.perf_counter() - started < READ_TIMEOUT + 3.0
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout")


def test_an_idle_kept_alive_connection_is_closed(server: BenchServer) -> None:
    with _connect(server) as raw:
        raw.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = raw.recv(4096)
        assert first.startswith(b"HTTP/1.1 200 OK") and b"keep-alive" in first
        started = time.perf_counter()
        assert _answer(raw) == b""  # closed without a word once idle
        assert time.perf_counter() - started < 3.0


def test_connections_over_the_cap_are_answered_503(engine: ModelEngine) -> None:
    served = BenchServer(engine, model_name=engine.model_name, port=0, max_connections=2)
    with ServerThread(served) as running:
        held = [_connect(running) for _ in range(2)]
        try:
            for raw in held:
                raw.sendall(b"GET /health HTTP/1.1\r\n")  # half-sent: each holds its place
            time.sleep(0.2)
            with _connect(running) as third:
                answer = _answer(third)
            assert answer.startswith(b"HTTP/1.1 503 Service Unavailable")
            assert b"limit of 2 connections" in answer
        finally:
            for raw in held:
                raw.close()
        time.sleep(0.2)
        assert _healthy(running)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"read_timeout": 0}, "--read-timeout 0: expected seconds above 0"),
        ({"idle_timeout": float("nan")}, "--idle-timeout nan"),
        ({"max_connections": 0}, "--max-connections 0: expected at least 1"),
    ],
)
def test_limits_are_checked(engine: ModelEngine, options: dict[str, float], expected: str) -> None:
    with pytest.raises(UsageError, match=expected):
        BenchServer(engine, model_name="m", port=0, **options)  # type: ignore[arg-type]
