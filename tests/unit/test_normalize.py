from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest

from planner.ingest.formats import AZURE_LLM, MOONCAKE, LogFormat, TimeKind, TimeSpec, TimeUnit
from planner.ingest.normalize import NormalizedChunk, normalize_chunk
from planner.ingest.readers import RawChunk

START = datetime(2024, 5, 1, tzinfo=UTC)
START_US = int(START.timestamp() * 1_000_000)


def azure_chunk(ts: list[str | None], inp: list[str | None], out: list[str | None]) -> RawChunk:
    table = pa.table(
        {
            "TIMESTAMP": pa.array(ts, pa.string()),
            "ContextTokens": pa.array(inp, pa.string()),
            "GeneratedTokens": pa.array(out, pa.string()),
        }
    )
    return RawChunk(table, 1, range(2, 2 + len(ts)), header_lines=1)


def run(
    chunk: RawChunk, fmt: LogFormat = AZURE_LLM, default_model: str | None = None
) -> NormalizedChunk:
    start_us = START_US if fmt is MOONCAKE else None
    return normalize_chunk(
        chunk, fmt, dict(fmt.columns), start_us=start_us, default_model=default_model
    )


def test_azure_timestamps_keep_microseconds_as_utc() -> None:
    chunk = azure_chunk(
        ["2023-11-16 18:15:46.6805900", "2023-11-16 18:15:50.9951690"],
        ["374", "396"],
        ["44", "109"],
    )
    result = run(chunk)
    expected = datetime(2023, 11, 16, 18, 15, 46, 680590, tzinfo=UTC)
    assert result.columns["arrival_us"][0] == int(expected.timestamp()) * 1_000_000 + 680590
    assert result.columns["arrival_us"][1] - result.columns["arrival_us"][0] == 4_314_579
    assert result.columns["input_tokens"].tolist() == [374, 396]
    assert result.problems == []


def test_offsets_in_timestamps_are_converted_to_utc() -> None:
    chunk = azure_chunk(
        ["2024-05-01T02:00:00+02:00", "2024-05-01T00:00:00Z"], ["1", "1"], ["1", "1"]
    )
    result = run(chunk)
    assert result.columns["arrival_us"].tolist() == [START_US, START_US]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("12.5", "got a fraction '12.5'"),
        ("-3", "expected a non-negative integer, got '-3'"),
        ("NaN", "expected a non-negative integer, got 'NaN'"),
        ("ten", "expected a non-negative integer, got 'ten'"),
        ("", "missing value, expected a non-negative integer"),
        ("99999999999", "too large"),
    ],
)
def test_bad_token_counts_are_located(value: str, fragment: str) -> None:
    chunk = azure_chunk(["2024-05-01 00:00:00"] * 3, ["1", value, "3"], ["1", "1", "1"])
    result = run(chunk)
    assert result.bad_rows == 1
    problem = result.problems[0]
    assert (problem.row, problem.line, problem.column) == (2, 3, "ContextTokens")
    assert fragment in problem.message
    assert result.columns["input_tokens"].tolist() == [1, 3]  # the bad row is left out


def test_integral_floats_are_accepted_as_token_counts() -> None:
    chunk = azure_chunk(["2024-05-01 00:00:00"], ["12.0"], ["3"])
    assert run(chunk).columns["input_tokens"].tolist() == [12]


def test_unparsable_timestamp_names_the_expected_shape() -> None:
    chunk = azure_chunk(["2024-05-01 00:00:00", "yesterday"], ["1", "1"], ["1", "1"])
    problem = run(chunk).problems[0]
    assert problem.column == "TIMESTAMP"
    assert "expected a date-time (ISO 8601" in problem.message
    assert "'yesterday'" in problem.message


def test_problems_are_reported_in_row_order_across_columns() -> None:
    chunk = azure_chunk(["x", "2024-05-01", "2024-05-01"], ["1", "-1", "1"], ["1", "1", "bad"])
    result = run(chunk)
    assert [p.row for p in result.problems] == [1, 2, 3]
    assert result.bad_rows == 3
    assert result.num_rows == 0


def test_mooncake_relative_ms_and_block_ids() -> None:
    table = pa.table(
        {
            "timestamp": pa.array([0, 1500]),
            "input_length": pa.array([10, 20]),
            "output_length": pa.array([1, 2]),
            "hash_ids": pa.array([[0, 1, 2], [0, 3]]),
        }
    )
    result = run(RawChunk(table, 1, [1, 2]), MOONCAKE)
    assert result.columns["arrival_us"].tolist() == [START_US, START_US + 1_500_000]
    assert result.columns["prefix_block_ids"] == ["0 1 2", "0 3"]


def test_negative_relative_offsets_are_rejected() -> None:
    table = pa.table(
        {
            "timestamp": pa.array([-5.0]),
            "input_length": pa.array([1]),
            "output_length": pa.array([1]),
        }
    )
    fields = {
        "arrival": "timestamp",
        "input_tokens": "input_length",
        "output_tokens": "output_length",
    }
    result = normalize_chunk(
        RawChunk(table, 1, [7]), MOONCAKE, fields, start_us=0, default_model=None
    )
    assert result.problems[0].line == 7
    assert "non-negative offset" in result.problems[0].message


def test_epoch_nanoseconds_are_exact() -> None:
    fmt = LogFormat(
        "generic",
        {"arrival": "t", "input_tokens": "i", "output_tokens": "o"},
        TimeSpec(TimeKind.EPOCH, TimeUnit.NS),
    )
    table = pa.table(
        {"t": pa.array([1_714_521_600_123_456_789]), "i": pa.array([1]), "o": pa.array([1])}
    )
    result = normalize_chunk(
        RawChunk(table, 1, None), fmt, dict(fmt.columns), start_us=None, default_model=None
    )
    assert result.columns["arrival_us"].tolist() == [1_714_521_600_123_456]


def test_local_timezone_for_naive_times() -> None:
    fmt = LogFormat(
        "generic",
        {"arrival": "t", "input_tokens": "i", "output_tokens": "o"},
        TimeSpec(TimeKind.DATETIME, timezone="Europe/Berlin", format="%d/%m/%Y %H:%M"),
    )
    table = pa.table(
        {"t": pa.array(["01/05/2024 02:00"]), "i": pa.array(["1"]), "o": pa.array(["1"])}
    )
    result = normalize_chunk(
        RawChunk(table, 1, None), fmt, dict(fmt.columns), start_us=None, default_model=None
    )
    assert result.columns["arrival_us"].tolist() == [START_US]  # 02:00 CEST is 00:00 UTC


def test_default_model_fills_missing_models() -> None:
    chunk = azure_chunk(["2024-05-01"], ["1"], ["1"])
    assert run(chunk, default_model="llama-3.1-8b").columns["model"] == ["llama-3.1-8b"]


def test_optional_latencies_and_counts_keep_nulls() -> None:
    fmt = LogFormat(
        "generic",
        {
            "arrival": "t",
            "input_tokens": "i",
            "output_tokens": "o",
            "ttft_ms": "ttft",
            "cached_tokens": "c",
        },
        TimeSpec(TimeKind.EPOCH, TimeUnit.S),
    )
    table = pa.table(
        {
            "t": pa.array(["1", "2"]),
            "i": pa.array(["1", "1"]),
            "o": pa.array(["1", "1"]),
            "ttft": pa.array(["120.5", ""]),
            "c": pa.array([None, "64"], pa.string()),
        }
    )
    result = normalize_chunk(
        RawChunk(table, 1, None), fmt, dict(fmt.columns), start_us=None, default_model=None
    )
    ttft = result.columns["ttft_ms"]
    assert ttft[0] == 120.5 and np.isnan(ttft[1])
    assert result.columns["cached_tokens"] == [None, 64]
