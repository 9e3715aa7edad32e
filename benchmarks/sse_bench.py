"""How fast `planner bench run` reads a server's token stream, against httpx-sse, which it used
before reading it with its own bounded decoder (issue 30: httpx-sse buffers a line without
limit, so one endless line grew the client to 3.4 GB).

    python benchmarks/sse_bench.py [--tokens 2000] [--streams 200] [--repeats 5]

Each stream is what vLLM sends for a completion of ``--tokens`` tokens (one ``data:`` chunk a
token, a usage chunk, ``[DONE]``), cut into pieces of 1,460 bytes (a TCP segment's payload)
and read through an ``httpx.Response`` as the client reads it: planner's ``EventDecoder`` over
``iter_bytes()``, and httpx-sse's ``EventSource.iter_sse()`` when httpx-sse is installed
(``pip install httpx-sse``; it is no longer a dependency). Both run in this one process,
alternated; the best of ``--repeats`` is kept, and the ratio is of the two bests.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import time
from collections.abc import Callable, Iterator

import httpx

from planner.bench.sse import EventDecoder

SEGMENT = 1460


def stream_bytes(tokens: int) -> bytes:
    """A completions stream as vLLM writes it."""
    parts = []
    for index in range(tokens):
        choice = {"index": 0, "text": f" tok{index % 97}", "logprobs": None, "finish_reason": None}
        chunk = {
            "id": "cmpl-0",
            "object": "text_completion",
            "created": 1764000000,
            "model": "llama",
            "choices": [choice],
        }
        parts.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    usage = {"prompt_tokens": 128, "completion_tokens": tokens, "total_tokens": tokens + 128}
    parts.append(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def pieces(data: bytes) -> Iterator[bytes]:
    for start in range(0, len(data), SEGMENT):
        yield data[start : start + SEGMENT]


def read_planner(data: bytes) -> int:
    response = httpx.Response(200, content=pieces(data))
    decoder = EventDecoder()
    count = 0
    for piece in response.iter_bytes():
        count += len(decoder.feed(piece))
    return count


def read_httpx_sse(data: bytes) -> int:
    # imported by name: httpx-sse is installed only to compare (mypy need not know it)
    event_source = importlib.import_module("httpx_sse").EventSource
    response = httpx.Response(
        200, content=pieces(data), headers={"content-type": "text/event-stream"}
    )
    return sum(1 for _ in event_source(response).iter_sse())


def best_seconds(read: Callable[[bytes], int], data: bytes, streams: int) -> tuple[float, int]:
    started = time.perf_counter()
    events = 0
    for _ in range(streams):
        events += read(data)
    return time.perf_counter() - started, events


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=2000, help="tokens a stream")
    parser.add_argument("--streams", type=int, default=200, help="streams a timed round")
    parser.add_argument("--repeats", type=int, default=5, help="rounds; the best is kept")
    args = parser.parse_args(argv)
    data = stream_bytes(args.tokens)
    readers: dict[str, Callable[[bytes], int]] = {"planner EventDecoder": read_planner}
    if importlib.util.find_spec("httpx_sse") is None:
        print("httpx-sse is not installed: planner's decoder alone (pip install httpx-sse)")
    else:
        readers["httpx-sse iter_sse"] = read_httpx_sse
    best: dict[str, float] = {}
    for _ in range(args.repeats):
        for name, read in readers.items():  # alternated: drift on the machine hits both
            seconds, events = best_seconds(read, data, args.streams)
            assert events == args.streams * (args.tokens + 2), (name, events)
            best[name] = min(best.get(name, seconds), seconds)
    megabytes = len(data) * args.streams / 1e6
    print(f"{args.streams} streams of {args.tokens:,} tokens ({len(data):,} bytes each)")
    for name, seconds in best.items():
        events_per_s = args.streams * (args.tokens + 2) / seconds
        print(f"  {name:22} {events_per_s:12,.0f} events/s {megabytes / seconds:8.1f} MB/s")
    if len(best) == 2:
        ours, theirs = best["planner EventDecoder"], best["httpx-sse iter_sse"]
        print(f"  planner / httpx-sse: {theirs / ours:.2f}x as fast")


if __name__ == "__main__":
    main()
