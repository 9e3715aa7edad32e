"""One streamed request to an OpenAI-compatible server (vLLM, SGLang, TGI, TensorRT-LLM/Triton,
NIM, llama.cpp, ``planner bench serve``), timed token by token.

A request never raises: whatever goes wrong (an HTTP error status, a timeout, a connection
refused or dropped mid-stream, a stream that is not one) becomes a failed
:class:`~planner.bench.metrics.RequestRecord` with a short ``error_kind`` and a message saying
what happened, so a run always completes.

Prompts are built from one repeated word, which common tokenizers read as one token a word, so
``input_tokens`` words ask for about that many prompt tokens (the server's ``usage`` says how
many it counted). ``max_tokens`` is the output length; with ``exact_output`` the request also
asks the server to ignore end-of-sequence (``ignore_eos``, ``min_tokens``: vLLM and SGLang
honour them) so every response has that length; a response that ends before it (``[DONE]``
after 20 of 128 tokens) is recorded as ``short``, not completed.

Every request is bounded: ``timeout`` seconds in all, from connecting to the last byte (not
only the server's silences), and the stream's sizes (:mod:`planner.bench.sse`: a line, an
event, the whole response, the chunks of text for the tokens asked); past a size limit the
request fails as ``bad_stream``, with the limit in its message.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from planner.bench.metrics import RequestRecord
from planner.bench.sse import (
    EventDecoder,
    StreamError,
    StreamReader,
    events,
    response_limit,
    size_text,
    token_chunk_limit,
)
from planner.common.net import is_loopback_host
from planner.common.secrets import redact_url, scrub, url_secrets
from planner.common.text import shown
from planner.errors import UsageError

EndpointKind = Literal["completions", "chat"]
ENDPOINT_PATHS: dict[str, str] = {
    "completions": "/v1/completions",
    "chat": "/v1/chat/completions",
}
DEFAULT_URL = "http://127.0.0.1:8000"
PROMPT_WORD = "hello"
MAX_ERROR_BODY = 2000  # bytes of an error response read for its message
MAX_SHOWN_ERROR = 300  # characters of it quoted
MAX_MODELS_BYTES = 4 * 1024 * 1024  # a /v1/models answer, at most


def check_url(url: str) -> str:
    """The base URL of a server (``http://host:port``, a trailing ``/v1`` or ``/`` dropped);
    :class:`UsageError` for anything else."""
    text = url.strip()
    try:
        parsed = httpx.URL(text)
    except (httpx.InvalidURL, TypeError, ValueError):
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise UsageError(
            f"--url {shown(redact_url(url))}: expected the server's address, e.g. {DEFAULT_URL}"
        )
    if parsed.query or parsed.fragment:
        raise UsageError(
            f"--url {shown(redact_url(url))}: give the server's address without a query"
        )
    base = text.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base


def is_loopback_url(url: str) -> bool:
    """Whether ``url`` names this machine."""
    return is_loopback_host(httpx.URL(url).host)


@dataclass(frozen=True)
class Target:
    """Where requests go: a server's base URL, which endpoint, which model."""

    base_url: str
    endpoint: EndpointKind
    model: str
    api_key: str | None = None

    @property
    def url(self) -> str:
        return self.base_url + ENDPOINT_PATHS[self.endpoint]

    @property
    def shown_url(self) -> str:
        """:attr:`url` as messages, files and the store show it: without credentials."""
        return redact_url(self.url)

    @property
    def shown_base_url(self) -> str:
        return redact_url(self.base_url)

    def secrets(self) -> list[str]:
        """The API key and the URL's credentials, to scrub from what a server or a library says."""
        return [*([self.api_key] if self.api_key else []), *url_secrets(self.base_url)]

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


@dataclass(frozen=True)
class RequestShape:
    """Prompt and output lengths in tokens."""

    input_tokens: int
    output_tokens: int
    exact_output: bool = True  # ask the server to ignore end-of-sequence

    def __post_init__(self) -> None:
        for option, value, most in (
            ("--input-tokens", self.input_tokens, 10_000_000),
            ("--output-tokens", self.output_tokens, 1_000_000),
        ):
            if not 1 <= value <= most:
                raise UsageError(f"{option} {value}: expected a number of tokens, 1 to {most:,}")


def build_prompt(tokens: int) -> str:
    """A prompt of ``tokens`` words, one token each for common tokenizers."""
    return " ".join([PROMPT_WORD] * tokens)


def request_body(target: Target, shape: RequestShape) -> dict[str, Any]:
    """The JSON body of one streamed request."""
    body: dict[str, Any] = {
        "model": target.model,
        "max_tokens": shape.output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    prompt = build_prompt(shape.input_tokens)
    if target.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if shape.exact_output:
        body["ignore_eos"] = True
        body["min_tokens"] = shape.output_tokens
    return body


def error_message(body: bytes) -> str:
    """The message of an error response: OpenAI's ``{"error": {"message": ...}}``, FastAPI's
    ``{"detail": ...}``, TGI's ``{"error": "..."}``, else the start of the text."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        payload = json.loads(text)
    except json.JSONDecodeError:
        payload = None
    if isinstance(payload, dict):
        for key in ("error", "detail", "message"):
            value = payload.get(key)
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                value = value["message"]
            if isinstance(value, str) and value:
                text = value
                break
    text = " ".join(text.split())
    if len(text) > MAX_SHOWN_ERROR:
        text = text[:MAX_SHOWN_ERROR] + "..."
    return text or "(no message)"


class _FailureError(Exception):
    def __init__(self, kind: str, message: str, http_status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.http_status = http_status


def _transport_failure(
    exc: httpx.HTTPError, url: str, timeout: float, started: bool, secrets: list[str] | None = None
) -> _FailureError:
    """A transport error as a failure a person understands (``url`` and the error's words
    without credentials: ``secrets`` are the ones to scrub)."""
    url = redact_url(url)
    detail = scrub(str(exc) or type(exc).__name__, secrets or url_secrets(url))
    if isinstance(exc, httpx.ConnectTimeout):
        return _FailureError("timeout", f"no connection to {url} within {timeout:g} s")
    if isinstance(exc, httpx.PoolTimeout):
        return _FailureError("timeout", f"no free connection within {timeout:g} s")
    if isinstance(exc, httpx.TimeoutException):
        where = "mid-stream" if started else "before the response began"
        return _FailureError(
            "timeout", f"the server sent nothing for {timeout:g} s {where} (read timeout)"
        )
    if isinstance(exc, httpx.ConnectError):
        return _FailureError("connect_error", f"cannot connect to {url}: {detail}")
    if started and isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return _FailureError("stream_dropped", f"the connection was closed mid-stream: {detail}")
    return _FailureError("http_error", f"{type(exc).__name__}: {detail}")


def _check_event_stream(response: httpx.Response) -> None:
    content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    if content_type != "text/event-stream":
        raise _FailureError(
            "not_a_stream",
            f"expected a stream (text/event-stream), the server answered "
            f"{content_type or 'with no content type'}; does it support stream=true?",
            response.status_code,
        )


async def measure_request(
    client: httpx.AsyncClient,
    target: Target,
    shape: RequestShape,
    *,
    index: int,
    origin: float,
    timeout: float,
) -> RequestRecord:
    """Send one streamed request and time it. ``origin`` is the ``time.perf_counter()`` at
    which the measured phase began (``start_s`` is counted from it); ``timeout`` is the seconds
    the request may take in all, from connecting to the end of the stream (the client's own
    timeouts, of a connection and of a silence, are no longer)."""
    reader = StreamReader(keep_text=False, max_token_chunks=token_chunk_limit(shape.output_tokens))
    started = False  # response headers arrived
    status: int | None = None
    start = time.perf_counter()
    try:
        async with (
            asyncio.timeout(timeout),
            client.stream(
                "POST",
                target.url,
                json=request_body(target, shape),
                # uncompressed: the stream's limits count the bytes as sent
                headers={**target.headers(), "Accept-Encoding": "identity"},
            ) as response,
        ):
            status = response.status_code
            started = True
            if status != 200:
                body = b""
                async for part in response.aiter_bytes():
                    body += part
                    if len(body) >= MAX_ERROR_BODY:
                        break
                said = scrub(error_message(body), target.secrets())  # a server may echo the key
                raise _FailureError(f"http_{status}", f"HTTP {status}: {said}", status)
            _check_event_stream(response)
            decoder = EventDecoder(max_total=response_limit(shape.output_tokens))
            async for event in events(response, decoder):
                reader.feed_event(event, time.perf_counter())
        end = time.perf_counter()
        if not reader.finished:
            raise _FailureError(
                "stream_incomplete",
                "the stream ended before the response finished (no finish_reason, no [DONE])",
                status,
            )
        if not reader.token_times:
            raise _FailureError("no_tokens", "the response carried no tokens", status)
    except _FailureError as failure:
        return _failed(index, start, origin, shape, reader, failure)
    except TimeoutError:
        late = _deadline(timeout, started, reader)
        late.http_status = status
        return _failed(index, start, origin, shape, reader, late)
    except StreamError as exc:
        return _failed(
            index,
            start,
            origin,
            shape,
            reader,
            _FailureError("bad_stream", scrub(str(exc), target.secrets()), status),
        )
    except httpx.HTTPError as exc:
        lost = _transport_failure(exc, target.url, timeout, started, target.secrets())
        lost.http_status = status
        return _failed(index, start, origin, shape, reader, lost)
    return _completed(index, start, end, origin, shape, reader)


def _deadline(timeout: float, started: bool, reader: StreamReader) -> _FailureError:
    """A request past its ``--timeout``: how far it got."""
    limit = f"within {timeout:g} s (--timeout, the limit of one request)"
    if not started:
        return _FailureError("timeout", f"no response {limit}")
    chunks = len(reader.token_times)
    progress = (
        f"{chunks} chunk{'s' if chunks > 1 else ''} of text had arrived, the last "
        f"{time.perf_counter() - reader.token_times[-1]:.2f} s before"
        if chunks
        else "no text had arrived"
    )
    return _FailureError("timeout", f"the response did not finish {limit}: {progress}")


def _failed(
    index: int,
    start: float,
    origin: float,
    shape: RequestShape,
    reader: StreamReader,
    failure: _FailureError,
) -> RequestRecord:
    return RequestRecord(
        index=index,
        start_s=start - origin,
        status="failed",
        input_tokens=shape.input_tokens,
        output_tokens=len(reader.token_times),
        output_tokens_source="chunks",
        requested_output_tokens=shape.output_tokens,
        e2el_s=time.perf_counter() - start,
        ttft_s=reader.token_times[0] - start if reader.token_times else None,
        http_status=failure.http_status,
        error_kind=failure.kind,
        error=failure.message,
        invalid_utf8=reader.invalid_utf8,
    )


def _completed(
    index: int,
    start: float,
    end: float,
    origin: float,
    shape: RequestShape,
    reader: StreamReader,
) -> RequestRecord:
    times = reader.token_times
    usage = reader.usage
    reported = usage.completion_tokens if usage is not None else None
    # a usage of 0 tokens beside chunks of text is a server's slip: count the chunks
    from_usage = reported is not None and reported > 0
    output_tokens = reported if reported is not None and from_usage else len(times)
    prompt = usage.prompt_tokens if usage is not None else None
    tpot = (times[-1] - times[0]) / (output_tokens - 1) if output_tokens > 1 else None
    if tpot is not None and not math.isfinite(tpot):
        tpot = None
    short = _short(shape, output_tokens, from_usage, reader.finish_reason)
    return RequestRecord(
        index=index,
        start_s=start - origin,
        status="short" if short is not None else "ok",
        input_tokens=prompt if prompt is not None else shape.input_tokens,
        output_tokens=output_tokens,
        output_tokens_source="usage" if from_usage else "chunks",
        requested_output_tokens=shape.output_tokens,
        e2el_s=end - start,
        ttft_s=times[0] - start,
        tpot_s=tpot,
        itl_s=[b - a for a, b in itertools.pairwise(times)],
        http_status=200,
        error_kind="short" if short is not None else None,
        error=short,
        invalid_utf8=reader.invalid_utf8,
    )


def _short(
    shape: RequestShape, output_tokens: int, from_usage: bool, finish_reason: str | None
) -> str | None:
    """Why a finished response asked for its exact length (``exact_output``: ignore_eos) is
    short of it, or None. Tokens counted from chunks (no usage) fall short without it when a
    chunk carries several tokens: a ``length`` finish says the server reached max_tokens."""
    if not shape.exact_output or output_tokens >= shape.output_tokens:
        return None
    if not from_usage and finish_reason == "length":
        return None
    counted = "the server's usage" if from_usage else "chunks of text, no usage sent"
    return (
        f"the response finished after {output_tokens} of the {shape.output_tokens} tokens "
        f"asked for with ignore_eos ({counted}; finish_reason {finish_reason or 'none'}); is "
        "ignore_eos honoured? --allow-eos counts such responses completed"
    )


async def list_models(client: httpx.AsyncClient, base_url: str, timeout: float = 60.0) -> list[str]:
    """The model names a server serves (``GET /v1/models``, read for ``timeout`` seconds and
    :data:`MAX_MODELS_BYTES` at most); :class:`UsageError` when it cannot be reached or does
    not say."""
    # the credentials (the URL's, the API key in the client's headers) are never shown
    secrets = [*url_secrets(base_url), client.headers.get("authorization", "")[len("Bearer ") :]]
    url = redact_url(base_url + "/v1/models")
    body = bytearray()
    try:
        async with (
            asyncio.timeout(timeout),
            client.stream("GET", base_url + "/v1/models") as response,
        ):
            async for part in response.aiter_bytes():
                body += part
                if len(body) > MAX_MODELS_BYTES:
                    raise UsageError(
                        f"{url} answered more than {size_text(MAX_MODELS_BYTES)}; "
                        "name the model with --model"
                    )
    except TimeoutError:
        raise UsageError(
            f"{url} did not answer within {timeout:g} s (--timeout); name the model with --model"
        ) from None
    except httpx.HTTPError as exc:
        raise UsageError(
            f"cannot reach {url}: {scrub(str(exc) or type(exc).__name__, secrets)}; is the "
            "server running (e.g. `planner bench serve`)? Give its address with --url"
        ) from None
    if response.status_code != 200:
        said = scrub(error_message(bytes(body)), secrets)
        raise UsageError(
            f"{url} answered HTTP {response.status_code}: {said}; name the model with --model"
        )
    try:
        data = json.loads(body).get("data")
        names = [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
    except (ValueError, AttributeError, TypeError, RecursionError):
        names = []
    if not names:
        raise UsageError(f"{url} lists no models; name the model with --model")
    return names
