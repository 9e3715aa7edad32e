"""The run summary against numbers worked out by hand, vLLM's definitions where they are
subtle (TPOT of one-token responses, ITL over every gap, goodput), and the files a run writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.bench.metrics import (
    RequestRecord,
    SloTargets,
    read_jsonl,
    requests_path,
    summarize,
    write_jsonl,
    write_run,
)
from planner.errors import UsageError


def _ok(
    index: int, start: float, ttft: float, itl: list[float], tail: float = 0.0, prompt: int = 10
) -> RequestRecord:
    """A completed request whose tokens arrive ``itl`` apart after ``ttft``; the stream ends
    ``tail`` seconds after its last token."""
    output = len(itl) + 1
    return RequestRecord(
        index=index,
        start_s=start,
        status="ok",
        input_tokens=prompt,
        output_tokens=output,
        output_tokens_source="usage",
        requested_output_tokens=output,
        e2el_s=ttft + sum(itl) + tail,
        ttft_s=ttft,
        tpot_s=sum(itl) / (output - 1) if output > 1 else None,
        itl_s=itl,
        http_status=200,
    )


def _failed(index: int, kind: str, start: float = 0.0) -> RequestRecord:
    return RequestRecord(
        index=index,
        start_s=start,
        status="failed",
        input_tokens=10,
        output_tokens=0,
        output_tokens_source="chunks",
        requested_output_tokens=3,
        e2el_s=0.01,
        error_kind=kind,
        error=f"{kind} happened",
    )


RECORDS = [
    _ok(0, 0.0, 0.100, [0.010, 0.030]),  # TPOT 20 ms, E2E 140 ms
    _ok(1, 0.2, 0.300, [0.020, 0.020], tail=0.005),  # TPOT 20 ms, E2E 345 ms
    _ok(2, 0.4, 0.050, []),  # one token: no TPOT, no ITL
    _failed(3, "http_500", 0.5),
    _failed(4, "timeout", 0.6),
    _failed(5, "http_500", 0.7),
]


def test_summary_matches_hand_computed_values() -> None:
    summary = summarize(RECORDS, duration=2.0)
    assert summary["completed"] == 3
    assert summary["failed"] == 3
    assert summary["incomplete"] == 0
    assert summary["total_input_tokens"] == 30  # completed requests only, as vLLM counts
    assert summary["total_output_tokens"] == 3 + 3 + 1
    assert summary["request_throughput"] == pytest.approx(1.5)
    assert summary["output_throughput"] == pytest.approx(3.5)
    assert summary["total_token_throughput"] == pytest.approx(18.5)
    assert summary["request_goodput"] is None  # no SLO given
    assert summary["mean_ttft_ms"] == pytest.approx(150.0)
    assert summary["median_ttft_ms"] == pytest.approx(100.0)
    # population standard deviation of 100, 300, 50
    assert summary["std_ttft_ms"] == pytest.approx(108.0123, rel=1e-5)
    assert summary["p50_ttft_ms"] == pytest.approx(100.0)
    assert summary["p90_ttft_ms"] == pytest.approx(260.0)  # linear: 100 + 0.8 * (300 - 100)
    assert summary["p99_ttft_ms"] == pytest.approx(296.0)
    # TPOT over requests with more than one token; ITL over every gap
    assert summary["mean_tpot_ms"] == pytest.approx(20.0)
    assert summary["std_tpot_ms"] == pytest.approx(0.0)
    assert summary["mean_itl_ms"] == pytest.approx(20.0)
    assert summary["median_itl_ms"] == pytest.approx(20.0)
    assert summary["p99_itl_ms"] == pytest.approx(29.7)  # 20 + 0.97 * (30 - 20)
    assert summary["mean_e2el_ms"] == pytest.approx((140 + 345 + 50) / 3)
    assert summary["failure_reasons"] == {"http_500": 2, "timeout": 1}
    # every token of the three requests arrives within the first second, all three overlap
    assert summary["max_output_tokens_per_s"] == 7.0
    assert summary["max_concurrent_requests"] == 3


def test_goodput_counts_completed_requests_meeting_every_target() -> None:
    # TTFT <= 120 ms: requests 0 and 2; TPOT <= 25 ms: all (one token counts as 0)
    assert summarize(RECORDS, 2.0, SloTargets(ttft_ms=120))["request_goodput"] == 1.0
    assert summarize(RECORDS, 2.0, SloTargets(tpot_ms=19.9))["request_goodput"] == 0.5
    both = SloTargets(ttft_ms=120, e2el_ms=100)
    assert summarize(RECORDS, 2.0, both)["request_goodput"] == 0.5  # only the 50 ms one
    assert summarize(RECORDS, 2.0, SloTargets(e2el_ms=346))["request_goodput"] == 1.5


def test_a_run_with_nothing_completed_has_no_statistics() -> None:
    summary = summarize([_failed(0, "connect_error")], duration=1.0)
    assert summary["completed"] == 0
    assert summary["mean_ttft_ms"] is None
    assert summary["p99_e2el_ms"] is None
    assert summary["request_throughput"] == 0.0
    assert summary["max_concurrent_requests"] == 0
    empty = summarize([], duration=0.0)
    assert empty["request_throughput"] == 0.0


def test_other_percentiles_can_be_asked_for() -> None:
    summary = summarize(RECORDS, 2.0, percentiles=(75, 99.9))
    assert "p75_ttft_ms" in summary
    assert "p99.9_ttft_ms" in summary
    assert "p90_ttft_ms" not in summary


@pytest.mark.parametrize("value", [0.0, -5.0, float("nan"), float("inf")])
def test_slo_targets_must_be_positive_milliseconds(value: float) -> None:
    with pytest.raises(UsageError, match="--slo-tpot"):
        SloTargets(tpot_ms=value)


def test_records_survive_the_jsonl_round_trip_exactly(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    write_jsonl(RECORDS, path)
    assert read_jsonl(path) == RECORDS
    assert len(path.read_text().splitlines()) == len(RECORDS)


def test_write_run_writes_summary_and_sidecar(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    summary = summarize(RECORDS, 2.0)
    sidecar = write_run(out, summary, {"tool": "test"}, RECORDS)
    assert sidecar == tmp_path / "run.jsonl"
    document = json.loads(out.read_text())
    assert document["completed"] == 3
    assert document["planner"] == {"tool": "test", "requests_file": "run.jsonl"}
    assert read_jsonl(sidecar) == RECORDS
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no leftovers
    assert requests_path(tmp_path / "run") == tmp_path / "run.jsonl"
    assert requests_path(tmp_path / "run.JSON") == tmp_path / "run.jsonl"
