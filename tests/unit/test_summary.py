from __future__ import annotations

import numpy as np
import pandas as pd

from planner.workload.summary import HOUR_US, MINUTE_US, peak_in_window, summarize

SECOND = 1_000_000


def frame(arrivals_s: list[float], models: list[str | None] | None = None) -> pd.DataFrame:
    n = len(arrivals_s)
    return pd.DataFrame(
        {
            "arrival_us": (np.array(arrivals_s) * SECOND).astype(np.int64),
            "model": models or [None] * n,
            "input_tokens": np.arange(1, n + 1) * 10,
            "output_tokens": np.full(n, 5),
        }
    )


def test_peak_counts_the_busiest_sliding_window() -> None:
    arrivals = (np.array([0, 10, 50, 65, 70, 100, 119, 130]) * SECOND).astype(np.int64)
    # [50, 110) holds 50, 65, 70, 100; [65, 125) holds 65, 70, 100, 119: both 4
    assert peak_in_window(arrivals, MINUTE_US) == 4
    assert peak_in_window(arrivals[:0], MINUTE_US) == 0


def test_window_is_half_open() -> None:
    arrivals = np.array([0, MINUTE_US], dtype=np.int64)
    assert peak_in_window(arrivals, MINUTE_US) == 1


def test_summary_by_hand() -> None:
    # 121 requests one per minute over two hours
    s = summarize(frame([60.0 * i for i in range(121)]))
    assert s.rows == 121
    assert s.duration_s == 7200
    assert s.per_minute.peak == 1
    assert s.per_hour.peak == 60
    assert s.per_hour.mean == 121 * 3600 / 7200
    assert s.per_hour.span_covers_window
    assert s.input_tokens.mean == 610
    assert s.input_tokens.p50 == 610
    assert s.output_tokens.p99 == 5
    assert s.by_model == []


def test_summary_per_model_when_several() -> None:
    s = summarize(frame([0, 1, 2, 3], ["a", "b", "a", None]))
    assert [m.model for m in s.by_model] == ["(none)", "a", "b"]
    assert [m.rows for m in s.by_model] == [1, 2, 1]
    assert s.to_dict()["by_model"][1]["input_tokens"]["mean"] == 20


def test_single_model_is_named() -> None:
    assert summarize(frame([0, 1], ["m", "m"])).model == "m"


def test_short_logs_say_their_hourly_figures_cover_less_than_an_hour() -> None:
    s = summarize(frame([0, 30, 1800]))
    assert not s.per_hour.span_covers_window
    assert s.per_hour.mean == 3 and s.per_hour.peak == 3
    assert HOUR_US == 3600 * SECOND
