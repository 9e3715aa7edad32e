"""The SSE reader on the byte streams real OpenAI-compatible servers send: each dialect read
through a real httpx response, with its bytes split at every possible place."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.bench.sse import (
    MAX_EVENT_BYTES,
    MAX_LINE_BYTES,
    MAX_RESPONSE_BYTES,
    Event,
    EventDecoder,
    StreamError,
    StreamReader,
    Usage,
    event_data,
    events,
    parse_chunk,
    response_limit,
)


class _Bytes(httpx.AsyncByteStream):
    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part


def _read(raw: bytes, parts: list[bytes] | None = None) -> StreamReader:
    """``raw`` through an httpx response delivered as ``parts`` (default: one piece)."""
    response = httpx.Response(
        200,
        headers={"content-type": "text/event-stream; charset=utf-8"},
        stream=_Bytes(parts if parts is not None else [raw]),
    )
    reader = StreamReader()

    async def feed() -> None:
        clock = 0.0
        async for data in event_data(response):
            clock += 1.0  # each event one "second" later: token_times number the events
            reader.feed(data, clock)

    asyncio.run(feed())
    return reader


def _splits(raw: bytes) -> list[list[bytes]]:
    """The stream in one piece, byte by byte, and split in two at every position."""
    return [[raw], [raw[i : i + 1] for i in range(len(raw))]] + [
        [raw[:cut], raw[cut:]] for cut in range(1, len(raw))
    ]


def _completion(text: str, finish: str | None = None, usage: object = None) -> bytes:
    chunk = {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
    }
    return f"data: {json.dumps(chunk)}\n\n".encode()


USAGE = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}

# vLLM / SGLang, /v1/completions, stream_options.include_usage: null usage on every chunk,
# a last chunk with no choices carrying usage, then [DONE]
VLLM_COMPLETIONS = (
    _completion(" a")
    + _completion(" b")
    + _completion(" c", "length")
    + b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3}}\n\n'
    b"data: [DONE]\n\n"
)

# vLLM, /v1/chat/completions: a first chunk with the role and empty content
VLLM_CHAT = (
    b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
    b'{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
    b'{"content":"Hi"},"logprobs":null,"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
    b'{"content":" there"},"logprobs":null,"finish_reason":"length"}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","choices":[],'
    b'"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}\n\n'
    b"data: [DONE]\n\n"
)

# TGI-style chat: usage on the last content chunk, no [DONE]; CRLF line ends
TGI_CHAT_NO_DONE = (
    b'data:{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant",'
    b'"content":"x"},"finish_reason":null}],"usage":null}\r\n\r\n'
    b'data:{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant",'
    b'"content":"y"},"finish_reason":"length"}],"usage":{"prompt_tokens":4,'
    b'"completion_tokens":2,"total_tokens":6}}\r\n\r\n'
)

# keep-alive comments between events, an event with no data, and one JSON spread over two
# data lines (joined with a newline, which JSON reads as white space)
KEEPALIVE_MULTILINE = (
    b": keep-alive\n\n"
    + _completion(" one")
    + b": ping\n"
    + b"event: ping\n\n"
    + b'data: {"choices":[{"index":0,"text":" two",\n'
    + b'data: "finish_reason":"stop"}]}\n\n'
    + b": bye\n\n"
)

# no usage anywhere: output tokens are counted from chunks
NO_USAGE = _completion(" p") + _completion(" q") + _completion("", "stop") + b"data: [DONE]\n\n"

# vLLM continuous_usage_stats: cumulative usage on every chunk (the last one is whole)
CONTINUOUS_USAGE = (
    _completion(" a", usage={"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6})
    + _completion(" b", "length", {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7})
    + b"data: [DONE]\n\n"
)

# a reasoning model's chat stream: reasoning_content before content
REASONING = (
    b'data: {"choices":[{"index":0,"delta":{"reasoning_content":"think"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


@pytest.mark.parametrize(
    ("raw", "text", "times", "usage", "finish", "done"),
    [
        pytest.param(VLLM_COMPLETIONS, " a b c", [1, 2, 3], Usage(5, 3), "length", True, id="vllm-completions"),
        pytest.param(VLLM_CHAT, "Hi there", [2, 3], Usage(9, 2), "length", True, id="vllm-chat"),
        pytest.param(TGI_CHAT_NO_DONE, "xy", [1, 2], Usage(4, 2), "length", False, id="tgi-no-done-crlf"),
        pytest.param(KEEPALIVE_MULTILINE, " one two", [1, 2], None, "stop", False, id="keepalive-multiline"),
        pytest.param(NO_USAGE, " p q", [1, 2], None, "stop", True, id="no-usage"),
        pytest.param(CONTINUOUS_USAGE, " a b", [1, 2], Usage(5, 2), "length", True, id="continuous-usage"),
        pytest.param(REASONING, "thinkok", [1, 2], None, "stop", True, id="reasoning"),
    ],
)  # fmt: skip
def test_dialects_read_alike_however_the_bytes_are_split(
    raw: bytes,
    text: str,
    times: list[float],
    usage: Usage | None,
    finish: str,
    done: bool,
) -> None:
    for parts in _splits(raw):
        reader = _read(raw, parts)
        assert reader.text == text
        assert reader.token_times == times  # events numbered from 1; role/usage chunks no token
        assert reader.usage == usage
        assert reader.finish_reason == finish
        assert reader.done is done
        assert reader.finished


def test_a_stream_cut_short_is_not_finished() -> None:
    reader = _read(_completion(" a") + _completion(" b"))
    assert reader.text == " a b"
    assert not reader.finished


def test_an_unterminated_last_event_is_dropped_as_the_sse_standard_says() -> None:
    # a server that dies mid-event leaves half a line: never read as a chunk
    reader = _read(_completion(" a") + b'data: {"choices":[{"index":0,"text":" b"')
    assert reader.text == " a"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'data: {"error":{"message":"CUDA out of memory","code":500}}\n\n', "CUDA out of memory"),
        (b"event: error\ndata: engine died\n\n", "engine died"),
        (b"data: <html>502 Bad Gateway</html>\n\n", "not JSON"),
        (b"data: [1, 2]\n\n", "not a JSON object"),
        (b'data: {"id": "x"}\n\n', "neither choices nor usage"),
        (b'data: {"choices": "a"}\n\n', "not a list of objects"),
    ],
)
def test_errors_and_garbage_in_a_stream_raise_with_the_reason(raw: bytes, message: str) -> None:
    with pytest.raises(StreamError, match=message):
        _read(_completion(" a") + raw)


def test_parse_chunk_reads_each_field() -> None:
    assert parse_chunk("[DONE]") is None
    assert parse_chunk(" [DONE] ") is None
    chunk = parse_chunk('{"choices":[{"index":0,"text":"z","finish_reason":"stop"}]}')
    assert chunk is not None
    assert (chunk.text, chunk.finish_reason, chunk.usage) == ("z", "stop", None)
    # bad counts are no usage: a server's true or -1 is not a token count
    odd = parse_chunk('{"choices":[],"usage":{"prompt_tokens":true,"completion_tokens":4}}')
    assert odd is not None
    assert odd.usage == Usage(None, 4)
    # the first choice by index, whatever the order
    two = parse_chunk('{"choices":[{"index":1,"text":"second"},{"index":0,"text":"first"}]}')
    assert two is not None
    assert two.text == "first"


# --- every buffer bounded --------------------------------------------------------------------


def _feed_all(decoder: EventDecoder, raw: bytes, piece: int) -> list[Event]:
    return [e for at in range(0, len(raw), piece) for e in decoder.feed(raw[at : at + piece])]


def test_a_line_that_never_ends_is_refused_at_the_line_limit() -> None:
    decoder = EventDecoder()
    decoder.feed(b"data: ")
    block = b"x" * 65536
    with pytest.raises(StreamError, match=r"a line of the stream passed 1 MiB \(1,048,576 bytes\)"):
        for _ in range(MAX_LINE_BYTES // len(block) + 2):
            decoder.feed(block)
    assert decoder.bytes_read <= MAX_LINE_BYTES + len(block)  # refused at once, not later
    # a line of exactly the limit is read
    exact = b"data: " + b"y" * (MAX_LINE_BYTES - len(b"data: ")) + b"\n\n"
    assert [len(e.data) for e in EventDecoder().feed(exact)] == [MAX_LINE_BYTES - 6]


def test_an_event_of_many_lines_is_refused_at_the_event_limit() -> None:
    line = b"data: " + b"z" * 1000 + b"\n"  # never a blank line: one event that grows
    with pytest.raises(StreamError, match=r"an event's data passed 1 MiB"):
        _feed_all(EventDecoder(), line * (MAX_EVENT_BYTES // 1000 + 2), 65536)


def test_a_response_is_refused_past_its_limit_however_its_events_are_shaped() -> None:
    event = _completion(" a")
    decoder = EventDecoder(max_total=len(event) * 10)
    assert len(_feed_all(decoder, event * 10, 7)) == 10  # exactly the limit: read
    with pytest.raises(StreamError, match=r"the response passed .* without ending"):
        decoder.feed(b":")
    # the default: 64 MiB, more for a request of many tokens
    assert response_limit(128) == MAX_RESPONSE_BYTES == 64 * 1024 * 1024
    assert response_limit(1_000_000) == 4096 * 1_000_000


def test_keep_alive_comments_alone_are_bounded_only_by_the_response() -> None:
    # comments are dropped as they come: a million of them hold nothing
    decoder = EventDecoder()
    assert _feed_all(decoder, b": ping\n" * 100_000, 4096) == []
    assert decoder._line_bytes == 0 and decoder._data == []


def test_too_many_text_chunks_for_the_tokens_asked_are_refused() -> None:
    reader = StreamReader(keep_text=False, max_token_chunks=3)
    for at in range(3):
        reader.feed('{"choices":[{"text":"a"}]}', at)
    assert reader.text == ""  # kept no text, only times
    with pytest.raises(StreamError, match="more than 3 chunks of text"):
        reader.feed('{"choices":[{"text":"a"}]}', 4)


def test_invalid_utf8_is_counted_not_silently_replaced() -> None:
    bad = b'data: {"choices":[{"index":0,"text":" \xff\xfe"}]}\n\n'
    raw = _completion(" a") + bad + b"data: [DONE]\n\n"
    for parts in ([raw], [raw[i : i + 1] for i in range(len(raw))]):
        reader = StreamReader()
        response = httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Bytes(parts)
        )

        async def feed(response: httpx.Response = response, reader: StreamReader = reader) -> None:
            async for event in events(response):
                reader.feed_event(event, 1.0)

        asyncio.run(feed())
        assert reader.invalid_utf8 == 1
        assert reader.text == " a \ufffd\ufffd"
        assert reader.done
    # a multi-byte character split between pieces is valid UTF-8
    split = 'data: {"choices":[{"index":0,"text":" é"}]}\n\n'.encode()
    cut = split.index("é".encode()) + 1
    decoder = EventDecoder()
    assert [e.invalid_utf8 for e in decoder.feed(split[:cut]) + decoder.feed(split[cut:])] == [
        False
    ]


def test_a_byte_order_mark_and_a_crlf_split_between_pieces_are_read_as_the_standard_says() -> None:
    raw = b"\xef\xbb\xbf" + _completion(" a").replace(b"\n", b"\r\n")
    for cut in range(1, len(raw)):
        decoder = EventDecoder()
        got = decoder.feed(raw[:cut]) + decoder.feed(raw[cut:])
        assert [json.loads(e.data)["choices"][0]["text"] for e in got] == [" a"]
    # CR alone ends a line; an event named error keeps its name
    assert EventDecoder().feed(b"event: error\rdata: boom\r\r") == [Event("error", "boom")]


# A stream with every kind of line: data over several lines, a named event, comments, an id,
# an empty data line, a non-UTF-8 byte, a multi-byte character and a keep-alive.
MIXED = (
    b': hello\n\ndata: {"a": 1}\n\nevent: error\ndata: x\ndata:y\n\nid: 7\ndata: \n\n'
    b"data: caf\xc3\xa9 \xff\n\n: ping\n\ndata: [DONE]\n\n"
)


def _decoded(pieces: list[bytes]) -> list[tuple[str, str, bool]]:
    decoder = EventDecoder()
    return [(e.event, e.data, e.invalid_utf8) for p in pieces for e in decoder.feed(p)]


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(0, len(MIXED)), max_size=12), crlf=st.booleans())
def test_any_split_and_either_line_end_give_the_same_events(cuts: list[int], crlf: bool) -> None:
    """The LF fast path and the general path (taken by a piece holding a CR) read the same
    events, wherever the stream is cut into pieces."""
    data = MIXED.replace(b"\n", b"\r\n") if crlf else MIXED
    bounds = sorted({0, len(data), *(min(c, len(data)) for c in cuts)})
    pieces = [data[a:b] for a, b in itertools.pairwise(bounds)]
    assert _decoded(pieces) == _decoded([MIXED])


def test_the_fast_path_keeps_the_limits() -> None:
    line = EventDecoder(max_line=64)
    with pytest.raises(StreamError, match="the limit of one line"):
        line.feed(b"data: " + b"x" * 80 + b"\n")
    event = EventDecoder(max_event=16)
    with pytest.raises(StreamError, match="the limit of one event"):
        event.feed(b"data: 0123456789\ndata: 0123456789\n")
    pending = EventDecoder(max_line=64)
    pending.feed(b"data: " + b"x" * 40)  # a line not yet ended, then its end in the next piece
    with pytest.raises(StreamError, match="the limit of one line"):
        pending.feed(b"x" * 40 + b"\n\n")
