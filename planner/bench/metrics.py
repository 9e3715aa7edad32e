"""What one benchmark run measured: a record per request, and the summary ``vllm bench serve``
prints, computed the way it computes it.

Summary keys follow vLLM's ``--save-result`` JSON: ``duration``, ``completed``, ``failed``,
``total_input_tokens``, ``total_output_tokens``, ``request_throughput``, ``request_goodput``,
``output_throughput``, ``total_token_throughput``, ``max_output_tokens_per_s``,
``max_concurrent_requests`` and ``{mean,median,std,p50,p90,p99}_{ttft,tpot,itl,e2el}_ms``.
As in vLLM: TTFT, TPOT and end-to-end latency are taken over completed requests (TPOT over
those with more than one output token), inter-token latencies over every gap of every completed
request, ``std`` is the population standard deviation, percentiles interpolate linearly, and
goodput counts the completed requests per second that meet every SLO target given (a request
with one output token meets any TPOT target). Where vLLM writes 0 for a statistic with no
values (no request completed), planner writes null. Beyond vLLM's keys: ``incomplete`` (requests
cut off by the run's time limit or Ctrl-C), ``failure_reasons`` (failed requests by kind),
``short`` (responses that finished before the output length asked for with ignore_eos, with
``short_output_tokens`` they carried of the ``short_requested_output_tokens`` asked: neither
completed nor failed, and left out of every latency and throughput, so of TPOT and of the
calibration rows made from it) and ``invalid_utf8_events`` / ``invalid_utf8_requests`` (events
whose bytes were not UTF-8, and the requests that had any).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from planner.common.files import atomic_output
from planner.errors import UsageError

Status = Literal["ok", "failed", "incomplete", "short"]
DEFAULT_PERCENTILES = (50, 90, 99)
METRICS = ("ttft", "tpot", "itl", "e2el")


@dataclass
class RequestRecord:
    """One request as measured. Times are seconds: ``start_s`` from the start of the measured
    phase; ``ttft_s`` from sending to the first chunk carrying text; ``itl_s`` the gaps between
    consecutive chunks carrying text; ``tpot_s`` = (last token - first token) / (output - 1);
    ``e2el_s`` from sending to the end of the stream (for a failed request: to the failure)."""

    index: int
    start_s: float
    status: Status
    input_tokens: int  # the server's usage.prompt_tokens, else the prompt length asked for
    output_tokens: int  # the server's usage.completion_tokens, else token chunks counted
    output_tokens_source: Literal["usage", "chunks"]
    requested_output_tokens: int
    e2el_s: float
    ttft_s: float | None = None
    tpot_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    http_status: int | None = None
    error_kind: str | None = None  # a short, stable name: http_500, timeout, stream_dropped...
    error: str | None = None  # what happened, for a person
    invalid_utf8: int = 0  # events of the response whose bytes were not UTF-8

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> RequestRecord:
        return cls(**{**row, "itl_s": list(row.get("itl_s") or [])})

    def token_times(self) -> list[float]:
        """When each chunk carrying text arrived, seconds from the start of the measured
        phase."""
        if self.ttft_s is None:
            return []
        first = self.start_s + self.ttft_s
        return [first, *(first + gap for gap in np.cumsum(self.itl_s).tolist())]


@dataclass(frozen=True)
class SloTargets:
    """Service-level targets in milliseconds (vLLM's ``--goodput ttft:.. tpot:.. e2el:..``)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2el_ms: float | None = None

    def __post_init__(self) -> None:
        for option, value in (
            ("--slo-ttft", self.ttft_ms),
            ("--slo-tpot", self.tpot_ms),
            ("--slo-e2e", self.e2el_ms),
        ):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise UsageError(f"{option} {value:g}: expected a positive number of milliseconds")

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2el_ms))

    def met_by(self, record: RequestRecord) -> bool:
        """Whether a completed request meets every target given (vLLM: TPOT of a one-token
        response counts as 0)."""
        checks = (
            (self.ttft_ms, record.ttft_s),
            (self.tpot_ms, record.tpot_s if record.tpot_s is not None else 0.0),
            (self.e2el_ms, record.e2el_s),
        )
        return all(
            target is None or (value is not None and value * 1000.0 <= target)
            for target, value in checks
        )

    def to_dict(self) -> dict[str, float]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def _statistics(
    name: str, seconds: Sequence[float], percentiles: Sequence[float]
) -> dict[str, float | None]:
    values = np.asarray(seconds, dtype=np.float64) * 1000.0
    empty = values.size == 0
    stats: dict[str, float | None] = {
        f"mean_{name}_ms": None if empty else float(np.mean(values)),
        f"median_{name}_ms": None if empty else float(np.median(values)),
        f"std_{name}_ms": None if empty else float(np.std(values)),
    }
    for p in percentiles:
        stats[f"p{p:g}_{name}_ms"] = None if empty else float(np.percentile(values, p))
    return stats


def _peaks(records: Sequence[RequestRecord]) -> tuple[float, int]:
    """vLLM's ``max_output_tokens_per_s`` (token chunks in the busiest whole second of the run)
    and ``max_concurrent_requests`` (requests in flight during the busiest second)."""
    done = [r for r in records if r.ok]
    if not done:
        return 0.0, 0
    origin = min(r.start_s for r in records)
    end = max(r.start_s + r.e2el_s for r in done)
    seconds = math.ceil(end - origin) + 1
    tokens = np.zeros(seconds)
    in_flight = np.zeros(seconds)
    for record in done:
        for at in record.token_times():
            bucket = int(at - origin)
            if 0 <= bucket < seconds:
                tokens[bucket] += 1
        first = int(record.start_s - origin)
        last = int(record.start_s + record.e2el_s - origin)
        in_flight[first : min(last, seconds - 1) + 1] += 1
    return float(tokens.max()), int(in_flight.max())


def summarize(
    records: Sequence[RequestRecord],
    duration: float,
    slo: SloTargets | None = None,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
) -> dict[str, Any]:
    """The run's summary under vLLM's names, from its records and the measured phase's
    ``duration`` in seconds (throughputs are per second of it)."""
    done = [r for r in records if r.ok]
    failed = [r for r in records if r.status == "failed"]
    short = [r for r in records if r.status == "short"]
    total_input = sum(r.input_tokens for r in done)
    total_output = sum(r.output_tokens for r in done)
    per_second = 1.0 / duration if duration > 0 else 0.0
    goodput = None
    if slo is not None and slo.given:
        goodput = sum(1 for r in done if slo.met_by(r)) * per_second
    max_tokens_per_s, max_concurrent = _peaks(records)
    summary: dict[str, Any] = {
        "duration": duration,
        "completed": len(done),
        "failed": len(failed),
        "incomplete": sum(1 for r in records if r.status == "incomplete"),
        "short": len(short),
        "short_output_tokens": sum(r.output_tokens for r in short),
        "short_requested_output_tokens": sum(r.requested_output_tokens for r in short),
        "invalid_utf8_events": sum(r.invalid_utf8 for r in records),
        "invalid_utf8_requests": sum(1 for r in records if r.invalid_utf8),
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": len(done) * per_second,
        "request_goodput": goodput,
        "output_throughput": total_output * per_second,
        "total_token_throughput": (total_input + total_output) * per_second,
        "max_output_tokens_per_s": max_tokens_per_s,
        "max_concurrent_requests": max_concurrent,
    }
    samples = {
        "ttft": [r.ttft_s for r in done if r.ttft_s is not None],
        "tpot": [r.tpot_s for r in done if r.tpot_s is not None],
        "itl": [gap for r in done for gap in r.itl_s],
        "e2el": [r.e2el_s for r in done],
    }
    for name in METRICS:
        summary.update(_statistics(name, samples[name], percentiles))
    summary["failure_reasons"] = dict(
        sorted(Counter(r.error_kind or "unknown" for r in failed).items())
    )
    return summary


def write_jsonl(records: Iterable[RequestRecord], path: Path) -> None:
    """One JSON object per request, one a line, written whole or not at all."""
    with atomic_output(path, "--out") as temp, temp.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record.to_dict(), allow_nan=False) + "\n")


def read_jsonl(path: Path) -> list[RequestRecord]:
    """The records :func:`write_jsonl` wrote."""
    with path.open(encoding="utf-8") as lines:
        return [RequestRecord.from_dict(json.loads(line)) for line in lines if line.strip()]


def requests_path(summary_path: Path) -> Path:
    """The per-request file beside a run's JSON: ``run.json`` -> ``run.jsonl``."""
    if summary_path.suffix.lower() == ".json":
        return summary_path.with_suffix(".jsonl")
    return summary_path.with_name(summary_path.name + ".jsonl")


def write_run(
    path: Path, summary: dict[str, Any], metadata: dict[str, Any], records: Sequence[RequestRecord]
) -> Path:
    """The run's JSON (summary keys at the top level as vLLM writes them, planner's metadata
    under ``planner``) and its per-request JSONL beside it, each written whole. Returns the
    JSONL's path."""
    sidecar = requests_path(path)
    write_jsonl(records, sidecar)
    document = {**summary, "planner": {**metadata, "requests_file": sidecar.name}}
    with atomic_output(path, "--out") as temp:
        temp.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return sidecar
