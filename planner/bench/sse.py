"""The token stream of an OpenAI-compatible server, read from its server-sent events.

This module reads what the events carry, in the dialects real servers send:

- ``/v1/completions`` chunks carry ``choices[0].text``; ``/v1/chat/completions`` chunks carry
  ``choices[0].delta.content`` (or ``reasoning_content`` / ``reasoning`` from reasoning
  models), after a first chunk holding only the role;
- the stream ends with ``data: [DONE]`` (vLLM, SGLang) or simply stops after the chunk with a
  ``finish_reason`` (some TGI and llama.cpp versions);
- token counts (``usage``) come in a final chunk with no choices (``stream_options:
  {"include_usage": true}``), on the last content chunk, cumulatively on every chunk
  (vLLM's ``continuous_usage_stats``), or not at all;
- an error met while streaming comes as a chunk holding ``error`` (vLLM) or an ``event: error``.

Event framing follows the SSE standard (``data:`` lines, an event spread over several ``data:``
lines, ``:`` keep-alive comments, CRLF, LF or CR line ends, bytes split anywhere), read here
from the response's bytes so that every read is bounded (httpx-sse, used before, buffers a line
without limit: one endless line grew to 3.4 GB): a line may hold at most
:data:`MAX_LINE_BYTES`, an event's data at most :data:`MAX_EVENT_BYTES`, a whole response at
most :func:`response_limit` bytes; past any of them the stream is refused
(:class:`StreamError`) and nothing more is read. Event data that is not valid UTF-8 is read
with U+FFFD in place of the bad bytes and counted (:attr:`StreamReader.invalid_utf8`), never
silently replaced.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

DONE = "[DONE]"
MAX_SHOWN_DATA = 200  # characters of a bad event quoted in a message
MIB = 1024 * 1024
MAX_LINE_BYTES = 1 * MIB  # one line of the stream
MAX_EVENT_BYTES = 1 * MIB  # the data of one event, all its data: lines together
MAX_RESPONSE_BYTES = 64 * MIB  # a whole response, unless its length asks for more:
RESPONSE_BYTES_PER_TOKEN = 4096  # a response may be this many bytes per requested token
# chunks carrying text, at most, per requested token (and a few over): servers send one per
# token or fewer; a proxy that splits tokens into characters stays well under
TOKEN_CHUNKS_PER_TOKEN = 8
TOKEN_CHUNKS_OVER = 64
_LINE_END = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


class StreamError(Exception):
    """The stream holds something that is not a completion chunk, reports an error, or passes
    a size limit."""


def size_text(count: int) -> str:
    """A byte count as a person reads it: ``1 MiB (1,048,576 bytes)``."""
    if count >= MIB and count % MIB == 0:
        return f"{count // MIB:,} MiB ({count:,} bytes)"
    return f"{count:,} bytes"


def response_limit(output_tokens: int) -> int:
    """The most bytes a response to a request for ``output_tokens`` tokens may hold:
    :data:`MAX_RESPONSE_BYTES`, or :data:`RESPONSE_BYTES_PER_TOKEN` a token when that is
    more (an honest chunk is a few hundred bytes)."""
    return max(MAX_RESPONSE_BYTES, RESPONSE_BYTES_PER_TOKEN * output_tokens)


def token_chunk_limit(output_tokens: int) -> int:
    """The most chunks carrying text a response to a request for ``output_tokens`` tokens may
    hold before it is refused (each is kept as a time)."""
    return TOKEN_CHUNKS_PER_TOKEN * output_tokens + TOKEN_CHUNKS_OVER


@dataclass(frozen=True)
class Usage:
    """Token counts a server reports; either may be missing."""

    prompt_tokens: int | None
    completion_tokens: int | None


@dataclass(frozen=True)
class StreamChunk:
    """What one event carries: generated text (possibly empty), a finish reason, usage."""

    text: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None


def _quoted(data: str) -> str:
    cut = data[:MAX_SHOWN_DATA]
    return repr(cut) + ("..." if len(data) > MAX_SHOWN_DATA else "")


def _count(value: Any) -> int | None:
    # bool is an int in Python; a count of True tokens is nonsense
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _usage(value: Any) -> Usage | None:
    if not isinstance(value, dict):
        return None
    prompt = _count(value.get("prompt_tokens"))
    completion = _count(value.get("completion_tokens"))
    if prompt is None and completion is None:
        return None
    return Usage(prompt, completion)


def _error_message(value: Any) -> str:
    if isinstance(value, dict):
        message = value.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(value, str) and value:
        return value
    return json.dumps(value)[:MAX_SHOWN_DATA]


def _choice_text(choice: dict[str, Any]) -> str:
    """The text of one choice: ``text`` (completions) or the delta's content (chat)."""
    text = choice.get("text")
    if isinstance(text, str):
        return text
    delta = choice.get("delta")
    if isinstance(delta, dict):
        for key in ("content", "reasoning_content", "reasoning"):
            content = delta.get(key)
            if isinstance(content, str) and content:
                return content
    return ""


def parse_chunk(data: str) -> StreamChunk | None:
    """One event's data as a chunk; None for the ``[DONE]`` sentinel. Raises
    :class:`StreamError` for data that is not a completion chunk or that reports an error."""
    if data.strip() == DONE:
        return None
    try:
        payload = json.loads(data)
    except json.JSONDecodeError:
        raise StreamError(f"an event is not JSON: {_quoted(data)}") from None
    if not isinstance(payload, dict):
        raise StreamError(f"an event is not a JSON object: {_quoted(data)}")
    if payload.get("error") is not None:
        raise StreamError(f"the server reported an error: {_error_message(payload['error'])}")
    usage = _usage(payload.get("usage"))
    choices = payload.get("choices")
    if choices is None or choices == []:
        if usage is None:
            raise StreamError(f"an event holds neither choices nor usage: {_quoted(data)}")
        return StreamChunk(usage=usage)
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise StreamError(f"an event's choices are not a list of objects: {_quoted(data)}")
    # one completion per request (n=1): the first choice is the one
    choice = min(choices, key=lambda c: c.get("index", 0) if isinstance(c.get("index"), int) else 0)
    reason = choice.get("finish_reason")
    return StreamChunk(
        text=_choice_text(choice),
        finish_reason=reason if isinstance(reason, str) and reason else None,
        usage=usage,
    )


@dataclass(frozen=True)
class Event:
    """One server-sent event: its type (``message`` unless named), its data (``data:`` lines
    joined with newlines) and whether any of its bytes were not UTF-8."""

    event: str
    data: str
    invalid_utf8: bool = False


class EventDecoder:
    """Server-sent events from a response's bytes, fed in pieces split anywhere, as the SSE
    standard reads them (CRLF, LF or CR line ends; ``:`` comments; ``data:``, ``event:``
    fields; a blank line ends an event; a leading byte-order mark skipped), with every buffer
    bounded: :class:`StreamError` for a line over ``max_line`` bytes, an event's data over
    ``max_event`` bytes, or more than ``max_total`` bytes in all."""

    def __init__(
        self,
        *,
        max_line: int = MAX_LINE_BYTES,
        max_event: int = MAX_EVENT_BYTES,
        max_total: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.max_line = max_line
        self.max_event = max_event
        self.max_total = max_total
        self.bytes_read = 0
        self._line: list[bytes] = []  # the pieces of a line not yet ended
        self._line_bytes = 0
        self._after_cr = False  # the last piece ended with CR: a LF next belongs to it
        self._started = False  # past a leading byte-order mark
        self._event = ""
        self._data: list[str] = []
        self._data_bytes = 0
        self._invalid = False

    def feed(self, piece: bytes) -> list[Event]:
        """The events that ``piece`` completes."""
        if not piece:
            return []
        self.bytes_read += len(piece)
        if self.bytes_read > self.max_total:
            raise StreamError(
                f"the response passed {size_text(self.max_total)} without ending "
                "(the limit of one response)"
            )
        if not self._started:
            pending = b"".join(self._line) + piece
            if len(pending) < len(_BOM) and _BOM.startswith(pending):
                self._line, self._line_bytes = [pending], len(pending)
                return []
            self._started = True
            self._line, self._line_bytes = [], 0
            piece = pending.removeprefix(_BOM)
        at = 0
        if self._after_cr and piece[:1] == b"\n":
            at = 1
        self._after_cr = False
        if b"\r" not in piece:
            return self._feed_lf(piece, at)
        events: list[Event] = []
        for end in _LINE_END.finditer(piece, at):
            self._extend(piece, at, end.start())
            line = b"".join(self._line)
            self._line, self._line_bytes = [], 0
            event = self._read_line(line)
            if event is not None:
                events.append(event)
            at = end.end()
            if end.group() == b"\r" and at == len(piece):
                self._after_cr = True
        self._extend(piece, at, len(piece))
        return events

    def _feed_lf(self, piece: bytes, at: int) -> list[Event]:
        """:meth:`feed` for a piece whose lines all end in LF (what servers send): split at
        once (a data line read in place), the same events and limits as the general path, about
        twice as fast."""
        lines = piece[at:].split(b"\n") if at else piece.split(b"\n")
        rest = lines.pop()  # after the last LF: the start of a line not yet ended
        if lines and self._line:
            lines[0] = b"".join(self._line) + lines[0]
            self._line, self._line_bytes = [], 0
        events: list[Event] = []
        for line in lines:
            if len(line) > self.max_line:
                raise self._line_too_long()
            if line[:6] == b"data: " and self._data_bytes + len(line) - 5 <= self.max_event:
                self._data_bytes += len(line) - 5  # the value and its newline, as _read_line
                self._data.append(self._text(line[6:]))
                continue
            event = self._read_line(line)
            if event is not None:
                events.append(event)
        self._extend(rest, 0, len(rest))
        return events

    def _extend(self, piece: bytes, start: int, stop: int) -> None:
        if stop <= start:
            return
        self._line_bytes += stop - start
        if self._line_bytes > self.max_line:
            raise self._line_too_long()
        self._line.append(piece[start:stop])

    def _line_too_long(self) -> StreamError:
        return StreamError(
            f"a line of the stream passed {size_text(self.max_line)} without ending "
            "(the limit of one line)"
        )

    def _text(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self._invalid = True
            return raw.decode("utf-8", errors="replace")

    def _read_line(self, line: bytes) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None  # a comment: a keep-alive
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data_bytes += len(value) + 1
            if self._data_bytes > self.max_event:
                raise StreamError(
                    f"an event's data passed {size_text(self.max_event)} (the limit of one event)"
                )
            self._data.append(self._text(value))
        elif name == b"event":
            self._event = self._text(value)
        return None  # id, retry and unknown fields: nothing a benchmark reads

    def _dispatch(self) -> Event | None:
        if not self._data and not self._event:
            self._invalid = False
            return None
        event = Event(self._event or "message", "\n".join(self._data), self._invalid)
        self._event, self._data, self._data_bytes, self._invalid = "", [], 0, False
        return event


@dataclass
class StreamReader:
    """A response's stream, fed one event at a time with the moment it arrived
    (``time.perf_counter()`` seconds): the arrival time of every chunk that carried text, the
    text (unless ``keep_text`` is off), the last usage reported, whether the response said it
    was finished, and how many events held bytes that are not UTF-8. More than
    ``max_token_chunks`` chunks carrying text is a :class:`StreamError`."""

    token_times: list[float] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    done: bool = False  # the [DONE] sentinel arrived
    events: int = 0
    invalid_utf8: int = 0  # events whose bytes were not all UTF-8
    keep_text: bool = True
    max_token_chunks: int | None = None

    def feed_event(self, event: Event, at: float) -> None:
        """Read one event that arrived at ``at``: an ``event: error`` raises
        :class:`StreamError`; an event with no data (a keep-alive) is skipped."""
        if event.invalid_utf8:
            self.invalid_utf8 += 1
        if event.event == "error":
            raise StreamError(f"the server reported an error: {_quoted(event.data)}")
        if event.data == "":
            return
        self.feed(event.data, at)

    def feed(self, data: str, at: float) -> None:
        """Read one event's data that arrived at ``at``; raises :class:`StreamError`."""
        self.events += 1
        chunk = parse_chunk(data)
        if chunk is None:
            self.done = True
            return
        if chunk.text:
            if self.max_token_chunks is not None and len(self.token_times) >= self.max_token_chunks:
                raise StreamError(
                    f"the stream sent more than {self.max_token_chunks:,} chunks of text "
                    "(the limit for the tokens requested)"
                )
            self.token_times.append(at)
            if self.keep_text:
                self.text_parts.append(chunk.text)
        if chunk.usage is not None:
            self.usage = chunk.usage  # cumulative when sent on every chunk: the last is whole
        if chunk.finish_reason is not None:
            self.finish_reason = chunk.finish_reason

    @property
    def finished(self) -> bool:
        """The server said the response was complete: ``[DONE]`` or a finish reason (usage is
        no sign: some servers send it on every chunk). A stream that ends without either was
        cut short."""
        return self.done or self.finish_reason is not None

    @property
    def text(self) -> str:
        return "".join(self.text_parts)


async def events(
    response: httpx.Response, decoder: EventDecoder | None = None
) -> AsyncIterator[Event]:
    """The events of a streaming response as they arrive, read by ``decoder`` (default: one
    with the standard limits); an event cut off by the end of the stream is dropped, as the
    SSE standard says."""
    reading = decoder if decoder is not None else EventDecoder()
    async for piece in response.aiter_bytes():
        for event in reading.feed(piece):
            yield event


async def event_data(
    response: httpx.Response, decoder: EventDecoder | None = None
) -> AsyncIterator[str]:
    """The data of each event of a streaming response, as it arrives; comments and events with
    no data (keep-alives) are skipped. An ``event: error`` raises :class:`StreamError`."""
    async for event in events(response, decoder):
        if event.event == "error":
            raise StreamError(f"the server reported an error: {_quoted(event.data)}")
        if event.data == "":
            continue
        yield event.data
