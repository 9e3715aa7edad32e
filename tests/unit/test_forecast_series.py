"""Hourly series from CSV files and ServeGen's rates file: gaps, zeros, bad input."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planner.errors import InputFileError, NotFoundError, UsageError
from planner.forecast.series import (
    SERVEGEN_START,
    HourlySeries,
    read_series,
    read_series_csv,
    read_servegen,
)
from tests.conftest import SERVEGEN, WriteFile


def test_csv_series_with_missing_rows_empty_values_and_zeros(write: WriteFile) -> None:
    path = write(
        "s.csv",
        "ds,y\n"
        "2025-01-06T00:00:00Z,10\n"
        "2025-01-06T01:00:00Z,0\n"
        "2025-01-06T02:00:00Z,0\n"
        "2025-01-06T03:00:00Z,\n"  # flagged gap
        "2025-01-06T06:00:00Z,7.5\n"  # 04:00 and 05:00 have no row: gap
        "2025-01-06T07:00:00+01:00,NaN\n",  # 06:00 UTC: repeats the previous row
    )
    with pytest.raises(InputFileError, match=r"row 6, line 7, column 'ds'.*repeats"):
        read_series_csv(path)
    path.write_text(path.read_text().replace("07:00:00+01:00", "08:00:00+01:00"))
    series = read_series_csv(path)
    assert series.hours == 8 and series.observed_hours == 4
    np.testing.assert_array_equal(series.values[:3], [10, 0, 0])
    assert series.values[6] == 7.5
    report = series.report
    assert report.missing_hours == 4
    assert [(r.start.hour, r.hours) for r in report.missing] == [(3, 3), (7, 1)]
    assert [(r.start.hour, r.hours) for r in report.zeros] == [(1, 2)]
    lines = report.lines()
    assert "4 missing hour(s) in 2 gap(s)" in lines[0]
    assert "2 zero-rate hour(s) in 1 run(s), kept as zeros" in lines[1]
    assert "2 hour(s) have no row in the file: missing" in lines[2]
    assert series.start == datetime(2025, 1, 6, tzinfo=UTC)


def test_flagging_gaps_and_zeros(write: WriteFile) -> None:
    rows = "".join(f"2025-01-06T{h:02d}:00:00,{h % 3}\n" for h in range(6))
    series = read_series_csv(write("s.csv", "ds,y\n" + rows))
    assert series.report.zero_hours == 2 and series.report.missing_hours == 0
    gapped = series.with_gaps(
        [(datetime(2025, 1, 6, 1, 30, tzinfo=UTC), datetime(2025, 1, 6, 3, tzinfo=UTC))]
    )
    assert np.isnan(gapped.values[1]) and np.isnan(gapped.values[2]) and gapped.values[4] == 1
    assert "2 hour(s) flagged as collection gaps" in gapped.report.notes[-1]
    no_zeros = series.zeros_as_gaps()
    assert no_zeros.report.zero_hours == 0 and no_zeros.report.missing_hours == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", r"s\.csv: the file is empty; expected a CSV with columns ds,y"),
        ("ds,y\n", r"no data rows"),
        (
            "when,y\n2025-01-06T00:00:00Z,1\n",
            r"line 1, column 'ds': missing column.*found 'when', 'y'",
        ),
        (
            "ds,y\n2025-01-06T00:00:00Z,ten\n",
            r"row 1, line 2, column 'y': 'ten': expected a non-negative number",
        ),
        (
            "ds,y\n2025-01-06T00:00:00Z,1\n2025-01-06T01:00:00Z,-3\n",
            r"row 2, line 3, column 'y': '-3'",
        ),
        (
            "ds,y\n2025-01-06T00:30:00Z,1\n",
            r"row 1, line 2, column 'ds': '2025-01-06T00:30:00Z' is not the start of an hour",
        ),
        (
            "ds,y\nyesterday,1\n",
            r"row 1, line 2, column 'ds': 'yesterday' is not a date and time; expected an ISO 8601 hour start",
        ),
        (
            "ds,y\n2025-01-06T02:00:00Z,1\n2025-01-06T01:00:00Z,1\n",
            r"row 2, line 3, column 'ds'.*is before the previous row's hour 2025-01-06T02:00:00Z",
        ),
        (
            "ds,y\n2025-01-06T00:00:00Z,1,2\n",
            r"row 1, line 2: 3 fields, expected 2 like the header \(line 1\)",
        ),
        ("ds,y\n\n2025-01-06T00:00:00Z,inf\n", r"row 1, line 3, column 'y': 'inf'"),
    ],
)
def test_bad_series_files_name_file_row_line_column(
    write: WriteFile, content: str, message: str
) -> None:
    path = write("s.csv", content)
    with pytest.raises(InputFileError, match=message) as caught:
        read_series(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_missing_file_and_binary_file(tmp_path: Path, write: WriteFile) -> None:
    with pytest.raises(InputFileError, match="file not found"):
        read_series(tmp_path / "nope.csv")
    with pytest.raises(InputFileError, match="not UTF-8 text"):
        read_series(write("b.csv", b"\xff\xfe\x00bad"))


def test_servegen_hours_gaps_and_models() -> None:
    small = read_servegen(SERVEGEN, model="m-small")
    mid = read_series(SERVEGEN, model="m-mid")  # told apart by the header
    assert small.hours == mid.hours == 14 * 24
    assert small.start == SERVEGEN_START and SERVEGEN_START.weekday() == 0  # a Monday
    raw = pd.read_csv(SERVEGEN)
    raw["hour"] = raw["window_start_s"] // 3600
    for series, name in ((small, "m-small"), (mid, "m-mid")):
        part = raw[raw["model"] == name]
        gap_hours = set(part.loc[part["requests_in_window"] == 0, "hour"])
        assert set(np.flatnonzero(np.isnan(series.values))) == gap_hours
        sums = part.groupby("hour")["requests_in_window"].sum()
        kept = [h for h in range(series.hours) if h not in gap_hours]
        np.testing.assert_allclose(series.values[kept], sums.loc[kept].to_numpy())
    assert small.report.missing_hours == 13 and mid.report.missing_hours == 16
    assert "37 zero-rate 10-minute window(s) taken as collection gaps" in small.report.lines()[-1]
    # the near-outage hour of m-mid (rates of 1-8 req/s against ~1,000) is reported, kept
    assert [r.start for r in mid.report.near_zero] == [datetime(2025, 1, 15, 15, tzinfo=UTC)]

    total = read_servegen(SERVEGEN)
    both = np.isfinite(small.values) & np.isfinite(mid.values)
    np.testing.assert_array_equal(np.isfinite(total.values), both)
    np.testing.assert_allclose(total.values[both], small.values[both] + mid.values[both])
    assert any("all 2 models summed (m-mid, m-small)" in n for n in total.notes)

    as_zeros = read_servegen(SERVEGEN, model="m-small", zero_windows="zero")
    assert as_zeros.report.missing_hours == 0
    assert np.nansum(as_zeros.values) == pytest.approx(
        raw.loc[raw["model"] == "m-small", "requests_in_window"].sum()
    )


def test_servegen_errors(write: WriteFile) -> None:
    with pytest.raises(NotFoundError, match="no model 'm-large'; its models: m-small, m-mid"):
        read_servegen(SERVEGEN, model="m-large")
    bad = write(
        "sg.csv",
        "model,window_start_s,total_rate_rps,requests_in_window\nm,0,1,600\nm,600,1,lots\n",
    )
    with pytest.raises(
        InputFileError,
        match=r"sg\.csv: row 2, line 3, column 'requests_in_window': 'lots': expected a non-negative",
    ):
        read_series(bad)
    plain = write("p.csv", "ds,y\n2025-01-06T00:00:00Z,1\n")
    with pytest.raises(UsageError, match="--model applies to datasets and ServeGen"):
        read_series(plain, model="m")


def test_series_frame_must_be_consecutive_hours() -> None:
    ds = pd.to_datetime(["2025-01-06 00:00", "2025-01-06 02:00"])
    with pytest.raises(ValueError, match="consecutive hours"):
        HourlySeries(pd.DataFrame({"ds": ds, "y": [1.0, 2.0]}))
