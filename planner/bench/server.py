"""``planner bench serve``: an OpenAI-compatible streaming server on this machine, so the
benchmark client is tested end to end over real sockets.

It answers ``POST /v1/completions`` and ``POST /v1/chat/completions`` (``stream`` true or
false, ``stream_options.include_usage``), ``GET /v1/models`` and ``GET /health``, over a small
HTTP/1.1 implementation on asyncio (keep-alive, chunked streams), bound to loopback unless a
caller allows another address.

Tokens come from an :class:`Engine`. The built-in :class:`ModelEngine` is a model-driven
stand-in until the in-process PyTorch engine lands: it computes nothing, it emits placeholder
words at the times planner's own latency model predicts for a catalog deployment (prefill time
for the first token, one decode step per token after it, with the batch the server is running
at that moment), divided by ``speed`` so tests run fast. Its timings are therefore planner's
predictions, never a measurement of hardware.

For testing clients, :class:`Faults` makes every Nth generation request fail with HTTP 500,
stall (send the first token and then nothing), or drop its stream halfway.

Limits, so that no client holds the server: a request line or header line of at most 64 KiB,
100 headers, a body of at most 16 MiB whose JSON nests at most 64 levels (else HTTP 431, 413
or 400); a request must arrive whole (head and body) within ``read_timeout`` seconds of its
first byte, and a new connection must send its first byte within it too (else HTTP 408 and the
connection closes); a kept-alive connection may wait ``idle_timeout`` seconds for its next
request; at most ``max_connections`` connections at once (the others are answered HTTP 503).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import re
import resource
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from planner.common.net import check_listen_host, is_loopback_host
from planner.common.text import shown
from planner.errors import PlannerError, UsageError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
LINE_LIMIT = 64 * 1024  # request line and each header
MAX_HEADERS = 100
MAX_BODY = 16 * 1024 * 1024  # a prompt of a million tokens, as text or as token ids, fits
MAX_JSON_DEPTH = 64  # a request nests three or four levels
READ_TIMEOUT = 10.0  # seconds for a request's head and body, from its first byte
IDLE_TIMEOUT = 60.0  # seconds a kept-alive connection waits for its next request
DEFAULT_MAX_TOKENS = 16  # OpenAI's default for completions
MAX_SPEED = 1_000_000.0
PLACEHOLDER_WORDS = ("lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit")
STATUS_TEXT = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}
GenerationKind = Literal["completions", "chat"]
ROUTES: dict[str, GenerationKind] = {
    "/v1/completions": "completions",
    "/v1/chat/completions": "chat",
}


class Engine(Protocol):
    """What produces tokens. ``generate`` yields ``(token_text, delay)`` pairs, one per output
    token: the server waits ``delay`` seconds (counted from the previous token, or from the
    request for the first) and then sends the token. An engine that does real work does it
    inside the iterator and yields a delay of 0."""

    description: str  # what the startup line says is serving
    max_context: int | None  # prompt + output tokens it accepts; None: no limit

    def generate(self, prompt_tokens: int, max_tokens: int) -> AsyncIterator[tuple[str, float]]:
        """The tokens of one request."""
        ...


def check_speed(speed: float) -> float:
    if not (math.isfinite(speed) and 0 < speed <= MAX_SPEED):
        raise UsageError(
            f"--speed {speed:g}: expected a positive factor, at most {MAX_SPEED:,.0f} "
            "(1 = the latency model's times, 100 = a hundred times faster)"
        )
    return speed


class ModelEngine:
    """Tokens timed by planner's latency model for a catalog deployment (``gpu``, ``model``,
    ``precision``, sized as ``engine`` sizes it, with its calibration profile): the first
    after the prompt's prefill time, each next after one decode step of the batch running
    then. All times are divided by ``speed``. A stand-in, not an engine: no queueing, no
    interference of prefills with decodes, placeholder text."""

    def __init__(
        self,
        gpu: str = "L4",
        model: str = "llama-3.1-8b",
        precision: str = "bf16",
        *,
        engine: str = "vllm",
        speed: float = 1.0,
    ) -> None:
        from planner.latency.catalog import load_catalog
        from planner.latency.engines import deploy, get_engine
        from planner.latency.model import LatencyModel, memory_summary
        from planner.latency.registry import all_profiles, engine_profile

        self.speed = check_speed(speed)
        catalog = load_catalog()
        spec = get_engine(engine)
        deployment = deploy(
            spec,
            catalog.gpus.get(gpu),
            catalog.models.get(model),
            catalog.precisions.get(precision),
        )
        memory_summary(deployment)  # raises when the weights do not fit the GPU
        profile = engine_profile(all_profiles(), deployment.gpu.name, spec, None)
        self.latency = LatencyModel(deployment, profile)
        self.model_name = deployment.model.name
        self.max_context: int | None = deployment.model.max_context
        self.description = (
            f"a model-driven stand-in for {deployment.model.name} on {deployment.gpu.name} "
            f"({deployment.precision.name}, {spec.name}'s sizing, profile {profile.name}), "
            f"{speed:g}x the predicted speed"
        )
        self._running: dict[int, int] = {}  # request -> tokens of context it holds
        self._context_total = 0
        self._ids = itertools.count()

    def first_token_delay(self, prompt_tokens: int) -> float:
        return float(self.latency.prefill_time(prompt_tokens)) / self.speed

    def step_delay(self) -> float:
        """One decode step of every request generating now."""
        batch = max(1, len(self._running))
        return float(self.latency.decode_time(batch, self._context_total)) / self.speed

    async def generate(
        self, prompt_tokens: int, max_tokens: int
    ) -> AsyncIterator[tuple[str, float]]:
        key = next(self._ids)
        self._running[key] = prompt_tokens
        self._context_total += prompt_tokens
        try:
            for position in range(max_tokens):
                delay = (
                    self.first_token_delay(prompt_tokens) if position == 0 else self.step_delay()
                )
                yield " " + PLACEHOLDER_WORDS[position % len(PLACEHOLDER_WORDS)], delay
                self._running[key] += 1
                self._context_total += 1
        finally:
            self._context_total -= self._running.pop(key)


@dataclass(frozen=True)
class Faults:
    """Injected failures for testing clients, each on every Nth generation request (counted
    from 1 in arrival order; 0 = never; the first that applies wins): an HTTP 500 answer; a
    stall (the first token, then nothing for ``stall_s`` seconds, then the connection closes);
    a dropped stream (the connection closes halfway through the tokens)."""

    error_every: int = 0
    stall_every: int = 0
    drop_every: int = 0
    stall_s: float = 3600.0

    def __post_init__(self) -> None:
        for option, value in (
            ("--fail-every", self.error_every),
            ("--stall-every", self.stall_every),
            ("--drop-every", self.drop_every),
        ):
            if value < 0:
                raise UsageError(f"{option} {value}: expected 0 (never) or a positive count")
        if not (math.isfinite(self.stall_s) and self.stall_s > 0):
            raise UsageError(f"--stall-seconds {self.stall_s:g}: expected a positive number")

    def for_request(self, number: int) -> Literal["error", "stall", "drop"] | None:
        if self.error_every and number % self.error_every == 0:
            return "error"
        if self.stall_every and number % self.stall_every == 0:
            return "stall"
        if self.drop_every and number % self.drop_every == 0:
            return "drop"
        return None


class _HttpError(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


@dataclass(frozen=True)
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"


@dataclass(frozen=True)
class _Generation:
    kind: GenerationKind
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool


def default_max_connections() -> int:
    """Connections the server holds at once: what the process may open (``ulimit -n``) less a
    margin for its own files, so that one more is answered 503 rather than failing to open."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 100_000
    return max(16, soft - 64)


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_ONE_KIND = bytes.maketrans(b"{}", b"[]")  # depth does not care which kind


def json_nesting_problem(body: bytes, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Why ``body`` is refused before it is parsed: its JSON nests deeper than ``limit`` (the
    parser would recurse once a level), or its brackets do not pair; None when neither."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return None  # too few containers to nest that deep
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    if brackets.count(b"[") != brackets.count(b"]") or brackets.count(b"{") != brackets.count(b"}"):
        return "the body is not JSON (its brackets do not pair)"
    brackets = brackets.translate(_ONE_KIND)
    for _ in range(limit):  # each pass removes the innermost level: replace never rescans
        brackets = brackets.replace(b"[]", b"")
        if not brackets:
            return None
    return f"the body's JSON nests more than {limit} levels deep"


async def _read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes = b""
) -> _Request | None:
    """The next request on a connection (``first``: its first byte, already read); None when
    the client closed it between requests."""
    try:
        line = first if first == b"\n" else first + await reader.readline()
    except ValueError:
        raise _HttpError(431, "request line too long") from None
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _HttpError(400, "malformed request line")
    method, target, _ = parts
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        try:
            header = await reader.readline()
        except ValueError:
            raise _HttpError(431, "header line too long") from None
        if header in (b"\r\n", b"\n"):
            break
        if not header:
            raise asyncio.IncompleteReadError(header, None)
        name, sep, value = header.decode("latin-1").partition(":")
        if not sep:
            raise _HttpError(400, "malformed header line")
        headers[name.strip().lower()] = value.strip()
    else:
        raise _HttpError(431, f"more than {MAX_HEADERS} headers")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise _HttpError(411, "send the body with a Content-Length", "NotImplementedError")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise _HttpError(400, "Content-Length is not a number") from None
    if not 0 <= length <= MAX_BODY:
        raise _HttpError(413, f"the body exceeds {MAX_BODY // (1024 * 1024)} MiB")
    if length and headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # curl waits for it before a big body
        await writer.drain()
    body = await reader.readexactly(length) if length else b""
    return _Request(method.upper(), target.split("?", 1)[0], headers, body)


def _head(status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {STATUS_TEXT.get(status, 'Unknown')}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _count_words(text: str) -> int:
    return len(text.split())


def _prompt_tokens(kind: GenerationKind, body: dict[str, Any]) -> int:
    """Tokens of a prompt, a word a token (the client builds prompts from one repeated
    word); a list of token ids counts its ids."""
    if kind == "completions":
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, str):
            return _count_words(prompt)
        if isinstance(prompt, list) and all(
            isinstance(t, int) and not isinstance(t, bool) for t in prompt
        ):
            return len(prompt)
        raise _HttpError(400, "'prompt' must be a string or a list of token ids (one prompt)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _HttpError(400, "'messages' must be a non-empty list")
    tokens = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            tokens += _count_words(content)
        elif isinstance(content, list):
            tokens += sum(
                _count_words(part["text"])
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
        else:
            raise _HttpError(400, "each message needs a 'content' string or list of parts")
    return tokens


def _generation(kind: GenerationKind, request: _Request, engine: Engine, model: str) -> _Generation:
    """The request's parameters, checked as a server checks them (HTTP 400 or 404)."""
    problem = json_nesting_problem(request.body)
    if problem is not None:
        raise _HttpError(400, problem)
    try:
        body = json.loads(request.body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise _HttpError(400, "the body is not JSON") from None
    except (RecursionError, ValueError) as exc:  # a number of too many digits, among others
        raise _HttpError(
            400, f"the body is not JSON planner reads ({type(exc).__name__})"
        ) from None
    if not isinstance(body, dict):
        raise _HttpError(400, "the body must be a JSON object")
    asked_model = body.get("model")
    if asked_model is not None and asked_model != model:
        raise _HttpError(404, f"The model `{asked_model}` does not exist.", "NotFoundError")
    prompt_tokens = _prompt_tokens(kind, body)
    if prompt_tokens < 1:
        raise _HttpError(400, "the prompt is empty")
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise _HttpError(400, "'max_tokens' must be a positive whole number")
    if body.get("n", 1) != 1:
        raise _HttpError(400, "only n=1 is supported")
    limit = engine.max_context
    if limit is not None and prompt_tokens + max_tokens > limit:
        raise _HttpError(
            400,
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, "
            f"{max_tokens} in the completion).",
        )
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    return _Generation(kind, prompt_tokens, max_tokens, body.get("stream") is True, include_usage)


def check_host(host: str, *, allow_remote: bool) -> str:
    """The address to listen on: loopback, or another one the caller allowed explicitly."""
    check_listen_host(host, example=DEFAULT_HOST)
    if not is_loopback_host(host) and not allow_remote:
        raise UsageError(
            f"--host {shown(host)} is not a loopback address: others could reach the server; "
            "give --host explicitly to allow it"
        )
    return host


def check_limits(read_timeout: float, idle_timeout: float, max_connections: int | None) -> None:
    """Refuse timeouts outside (0, 3600] seconds and fewer than one connection, naming the
    option (checked before an engine is built: a torch engine takes a while)."""
    for option, seconds in (("--read-timeout", read_timeout), ("--idle-timeout", idle_timeout)):
        if not (math.isfinite(seconds) and 0 < seconds <= 3600):
            raise UsageError(f"{option} {seconds:g}: expected seconds above 0, at most 3600")
    if max_connections is not None and max_connections < 1:
        raise UsageError(f"--max-connections {max_connections}: expected at least 1")


class BenchServer:
    """The OpenAI-compatible server over ``engine``. ``port`` 0 takes a free port (read
    :attr:`port` after :meth:`start`)."""

    def __init__(
        self,
        engine: Engine,
        *,
        model_name: str,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        faults: Faults | None = None,
        allow_remote: bool = False,
        read_timeout: float = READ_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
        max_connections: int | None = None,
    ) -> None:
        self.engine = engine
        self.model_name = model_name
        self.host = check_host(host, allow_remote=allow_remote)
        self.port = port
        self.faults = faults or Faults()
        check_limits(read_timeout, idle_timeout, max_connections)
        self.read_timeout = read_timeout
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections or default_max_connections()
        self.generation_requests = 0
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count(1)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(
                self._connection, self.host, self.port, limit=LINE_LIMIT
            )
        except OSError as exc:
            raise PlannerError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}"
            ) from None
        self.port = self._server.sockets[0].getsockname()[1]

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    # --- one connection ----------------------------------------------------------------------

    async def _next_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, kept_alive: bool
    ) -> _Request | None:
        """The next request, the rest of which comes within :attr:`read_timeout` of its first
        byte (else HTTP 408). The first byte comes within :attr:`read_timeout` on a new
        connection (else HTTP 408), :attr:`idle_timeout` on a kept-alive one (else None: the
        connection closes)."""
        try:
            wait = self.idle_timeout if kept_alive else self.read_timeout
            first = await asyncio.wait_for(reader.read(1), wait)
        except TimeoutError:
            if not kept_alive:  # a new connection that never sent a request
                raise self._timed_out() from None
            return None
        if not first:
            return None
        try:
            async with asyncio.timeout(self.read_timeout):
                return await _read_request(reader, writer, first)
        except TimeoutError:
            raise self._timed_out() from None

    def _timed_out(self) -> _HttpError:
        return _HttpError(
            408,
            f"the request did not arrive whole within {self.read_timeout:g} s; the connection "
            "closes",
            "RequestTimeout",
        )

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            if len(self._connections) > self.max_connections:
                error = _HttpError(
                    503,
                    f"the server holds its limit of {self.max_connections} connections; retry "
                    "when one closes",
                    "ServiceUnavailableError",
                )
                await self._send_error(writer, error, keep_alive=False)
                return
            kept_alive = False
            while True:
                try:
                    request = await self._next_request(reader, writer, kept_alive=kept_alive)
                except _HttpError as error:
                    await self._send_error(writer, error, keep_alive=False)
                    break
                if request is None or not await self._respond(request, writer):
                    break
                kept_alive = True
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        except asyncio.CancelledError:
            # the server is closing; ending normally spares asyncio's stream callback (3.11)
            # from logging the cancellation as an error
            pass
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _respond(self, request: _Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must close."""
        keep_alive = request.keep_alive
        try:
            if request.path == "/health":
                self._only(request, "GET")
                await self._send(writer, 200, b"", "text/plain", keep_alive)
            elif request.path == "/v1/models":
                self._only(request, "GET")
                await self._send_json(writer, 200, self._models(), keep_alive)
            elif request.path in ROUTES:
                self._only(request, "POST")
                generation = _generation(
                    ROUTES[request.path], request, self.engine, self.model_name
                )
                self.generation_requests += 1
                return await self._generate(generation, writer, keep_alive)
            else:
                raise _HttpError(
                    404,
                    f"no route {shown(request.path)}; this server answers "
                    f"{', '.join(ROUTES)}, /v1/models and /health",
                    "NotFoundError",
                )
        except _HttpError as error:
            await self._send_error(writer, error, keep_alive)
        return keep_alive

    @staticmethod
    def _only(request: _Request, method: str) -> None:
        if request.method != method:
            raise _HttpError(405, f"{request.path} takes {method}", "MethodNotAllowed")

    def _models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": self.model_name, "object": "model", "created": 0, "owned_by": "planner"}
            ],
        }

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        content_type: str,
        keep_alive: bool,
    ) -> None:
        writer.write(
            _head(
                status,
                [
                    ("Content-Type", content_type),
                    ("Content-Length", str(len(body))),
                    ("Connection", "keep-alive" if keep_alive else "close"),
                ],
            )
            + body
        )
        await writer.drain()

    async def _send_json(
        self, writer: asyncio.StreamWriter, status: int, payload: Any, keep_alive: bool
    ) -> None:
        body = json.dumps(payload).encode()
        await self._send(writer, status, body, "application/json", keep_alive)

    async def _send_error(
        self, writer: asyncio.StreamWriter, error: _HttpError, keep_alive: bool
    ) -> None:
        payload = {"error": {"message": error.message, "type": error.kind, "code": error.status}}
        await self._send_json(writer, error.status, payload, keep_alive)

    # --- generation --------------------------------------------------------------------------

    async def _tokens(self, generation: _Generation) -> AsyncGenerator[str, None]:
        """The engine's tokens, each released at the time its delay says. Close it (as
        ``contextlib.aclosing`` does) when leaving early, so the engine knows the request
        ended."""
        loop = asyncio.get_running_loop()
        due = loop.time()
        tokens = self.engine.generate(generation.prompt_tokens, generation.max_tokens)
        try:
            async for text, delay in tokens:
                # due times add up, so small overshoots of sleep do not accumulate; a token
                # more than one delay late (a busy machine) moves the schedule rather than
                # bursting the tokens after it to catch up
                now = loop.time()
                due = max(due + delay, now - delay)
                wait = due - now
                if wait > 0:
                    await asyncio.sleep(wait)
                yield text
        finally:
            close = getattr(tokens, "aclose", None)
            if close is not None:
                await close()

    async def _generate(
        self, generation: _Generation, writer: asyncio.StreamWriter, keep_alive: bool
    ) -> bool:
        number = self.generation_requests
        fault = self.faults.for_request(number)
        if fault == "error":
            raise _HttpError(
                500,
                f"injected failure: request {number} (every {self.faults.error_every}th fails)",
                "InternalServerError",
            )
        request_id = next(self._ids)
        if generation.stream:
            return await self._stream(generation, writer, keep_alive, request_id, fault)
        if fault is not None:
            if fault == "stall":
                await asyncio.sleep(self.faults.stall_s)
            return False  # a dropped connection: no answer at all
        async with contextlib.aclosing(self._tokens(generation)) as tokens:
            text = "".join([token async for token in tokens])
        await self._send_json(writer, 200, self._whole(generation, request_id, text), keep_alive)
        return keep_alive

    def _usage(self, generation: _Generation, produced: int) -> dict[str, int]:
        return {
            "prompt_tokens": generation.prompt_tokens,
            "completion_tokens": produced,
            "total_tokens": generation.prompt_tokens + produced,
        }

    def _whole(self, generation: _Generation, request_id: int, text: str) -> dict[str, Any]:
        common = {"created": int(time.time()), "model": self.model_name}
        usage = self._usage(generation, generation.max_tokens)
        if generation.kind == "chat":
            return {
                "id": f"chatcmpl-{request_id}",
                "object": "chat.completion",
                **common,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "length",
                    }
                ],
                "usage": usage,
            }
        return {
            "id": f"cmpl-{request_id}",
            "object": "text_completion",
            **common,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}],
            "usage": usage,
        }

    def _chunk(
        self,
        generation: _Generation,
        request_id: int,
        text: str | None,
        finish_reason: str | None = None,
        role: bool = False,
    ) -> dict[str, Any]:
        chat = generation.kind == "chat"
        choice: dict[str, Any] = {"index": 0}
        if chat:
            delta: dict[str, Any] = {"role": "assistant"} if role else {}
            delta["content"] = text or ""
            choice["delta"] = delta
        else:
            choice["text"] = text or ""
        choice.update(logprobs=None, finish_reason=finish_reason)
        return {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{request_id}",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [choice],
        }

    async def _stream(
        self,
        generation: _Generation,
        writer: asyncio.StreamWriter,
        keep_alive: bool,
        request_id: int,
        fault: Literal["stall", "drop"] | None,
    ) -> bool:
        writer.write(
            _head(
                200,
                [
                    ("Content-Type", "text/event-stream; charset=utf-8"),
                    ("Cache-Control", "no-cache"),
                    ("Transfer-Encoding", "chunked"),
                    ("Connection", "keep-alive" if keep_alive else "close"),
                ],
            )
        )

        async def send(data: str) -> None:
            event = f"data: {data}\n\n".encode()
            writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            await writer.drain()

        if generation.kind == "chat":  # vLLM's first chat chunk: the role, no text
            await send(json.dumps(self._chunk(generation, request_id, "", role=True)))
        drop_after = max(1, generation.max_tokens // 2)
        produced = 0
        async with contextlib.aclosing(self._tokens(generation)) as tokens:
            async for text in tokens:
                produced += 1
                last = produced == generation.max_tokens
                chunk = self._chunk(generation, request_id, text, "length" if last else None)
                await send(json.dumps(chunk))
                if fault == "stall":
                    await asyncio.sleep(self.faults.stall_s)
                    return False
                if fault == "drop" and produced >= drop_after:
                    return False  # closed without the chunked stream's end: a broken response
        if generation.include_usage:
            usage_chunk = self._chunk(generation, request_id, None)
            usage_chunk["choices"] = []
            usage_chunk["usage"] = self._usage(generation, produced)
            await send(json.dumps(usage_chunk))
        await send("[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return keep_alive


class ServerThread:
    """A :class:`BenchServer` on its own event loop in a background thread, for tests and
    scripts: ``with ServerThread(server) as running: running.url``."""

    def __init__(self, server: BenchServer, start_timeout: float = 10.0) -> None:
        self.server = server
        self._start_timeout = start_timeout
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="bench-server", daemon=True)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            await self.server.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self.server.close()

    def __enter__(self) -> BenchServer:
        self._thread.start()
        if not self._ready.wait(self._start_timeout):
            raise PlannerError(f"the benchmark server did not start in {self._start_timeout} s")
        if self._error is not None:
            raise self._error
        return self.server

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)
