"""Hostile input to the simulator's library: workloads too big to hold, rate curves with bad
hours, request files that cannot be written."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from planner.errors import UsageError
from planner.simulate.metrics import SLO, RequestChunk, RequestWriter
from planner.simulate.workload import Workload, synthetic
from planner.workload.rates import RateCurve
from tests.workloads import uniform_workload

START = datetime(2025, 1, 6, tzinfo=UTC)


def _workload(n: int = 10) -> Workload:
    return uniform_workload(np.arange(n), 100, 10, start=START)


def test_a_rate_curve_too_big_to_draw_is_refused_before_drawing() -> None:
    curve = RateCurve(START, np.array([1e12, 5.0]))
    pool = np.array([100], dtype=np.int64)
    with pytest.raises(
        UsageError, match=r"about 1,000,000,000,005 requests, over the limit of 1,0"
    ):
        synthetic(curve, pool, pool, max_requests=1000)
    with pytest.raises(UsageError, match="over the limit of 2,147,483,648"):
        synthetic(curve, pool, pool)  # no limit given: still never a 7 TB array
    small = RateCurve(START, np.array([500.0]))
    assert 400 < len(synthetic(small, pool, pool, max_requests=1000)) < 600


def test_scaling_a_workload_past_memory_is_refused() -> None:
    with pytest.raises(UsageError, match="10 requests x 1e\\+09"):
        _workload().scaled(1e9)
    assert len(_workload().scaled(3.0)) == 30


@pytest.mark.parametrize(
    ("value", "what"),
    [(-5.0, "negative"), (np.nan, "not a number"), (np.inf, "infinite")],
)
def test_a_bad_rate_says_which_hour_and_what_is_wrong(value: float, what: str) -> None:
    with pytest.raises(UsageError) as caught:
        RateCurve(START, np.array([3.0, value, 4.0]))
    message = str(caught.value)
    assert f"rate curve hour 2 (2025-01-06T01:00:00+00:00): {value:g} requests, {what}" in message
    assert message.endswith("every hour needs a finite number of requests >= 0")


def test_slo_any() -> None:
    assert not SLO().any
    assert SLO(tpot_s=0.1).any


def _chunk(n: int = 3) -> RequestChunk:
    columns = {name: np.zeros(n, dtype=dtype) for name, dtype in RequestChunk.DTYPES.items()}
    columns["output_tokens"][:] = 2
    return RequestChunk(**columns)


@pytest.mark.parametrize("where", ["proc", "folder"])
def test_request_file_that_cannot_be_opened_is_a_usage_error(tmp_path: Path, where: str) -> None:
    path = Path("/proc/requests.csv") if where == "proc" else tmp_path / "folder.csv"
    if where == "folder":
        path.mkdir()
    message = "could not write" if where == "proc" else "is a folder"
    with pytest.raises(UsageError, match=message), RequestWriter(path, ("default",)):
        pass
    assert [p.name for p in tmp_path.iterdir()] == ([] if where == "proc" else ["folder.csv"])


def test_a_full_disk_while_writing_requests_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "requests.jsonl"
    writer = RequestWriter(path, ("default",))

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, os.strerror(28))

    with pytest.raises(UsageError, match="could not write .No space left on device"), writer:
        monkeypatch.setattr(writer, "_write", full)
        writer.write(_chunk())
    assert list(tmp_path.iterdir()) == []
