"""The token stream of an OpenAI-compatible server, read from its server-sent events.

Event framing (``data:`` lines, events spread over several ``data:`` lines, ``:`` keep-alive
comments, CRLF or LF line ends, bytes split anywhere) is httpx-sse's; this module reads what
the events carry, in the dialects real servers send:

- ``/v1/completions`` chunks carry ``choices[0].text``; ``/v1/chat/completions`` chunks carry
  ``choices[0].delta.content`` (or ``reasoning_content`` / ``reasoning`` from reasoning
  models), after a first chunk holding only the role;
- the stream ends with ``data: [DONE]`` (vLLM, SGLang) or simply stops after the chunk with a
  ``finish_reason`` (some TGI and llama.cpp versions);
- token counts (``usage``) come in a final chunk with no choices (``stream_options:
  {"include_usage": true}``), on the last content chunk, cumulatively on every chunk
  (vLLM's ``continuous_usage_stats``), or not at all;
- an error met while streaming comes as a chunk holding ``error`` (vLLM) or an ``event: error``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import EventSource

DONE = "[DONE]"
MAX_SHOWN_DATA = 200  # characters of a bad event quoted in a message


class StreamError(Exception):
    """The stream holds something that is not a completion chunk, or reports an error."""


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


@dataclass
class StreamReader:
    """A response's stream, fed one event at a time with the moment it arrived
    (``time.perf_counter()`` seconds): the arrival time of every chunk that carried text, the
    text, the last usage reported, and whether the response said it was finished."""

    token_times: list[float] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    done: bool = False  # the [DONE] sentinel arrived
    events: int = 0

    def feed(self, data: str, at: float) -> None:
        """Read one event's data that arrived at ``at``; raises :class:`StreamError`."""
        self.events += 1
        chunk = parse_chunk(data)
        if chunk is None:
            self.done = True
            return
        if chunk.text:
            self.token_times.append(at)
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


async def event_data(response: httpx.Response) -> AsyncIterator[str]:
    """The data of each event of a streaming response, as it arrives; comments and events with
    no data (keep-alives) are skipped. An ``event: error`` raises :class:`StreamError`."""
    async for event in EventSource(response).aiter_sse():
        if event.event == "error":
            raise StreamError(f"the server reported an error: {_quoted(event.data)}")
        if event.data == "":
            continue
        yield event.data
