"""Hostile values in request logs: every one a located, skippable row problem or a clear option
error, never a wrapped integer, a crash or a silently wrong value."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

import pyarrow as pa
import pytest

from planner.errors import InputFileError, UsageError
from planner.ingest.formats import AZURE_LLM, MOONCAKE, LogFormat, TimeKind, TimeSpec, TimeUnit
from planner.ingest.normalize import ARRIVAL_MAX_US, NormalizedChunk, normalize_chunk
from planner.ingest.options import check_time_format, check_timezone, parse_start
from planner.ingest.pipeline import check_model, check_name
from planner.ingest.readers import FileKind, RawChunk, inspect_file, iter_chunks, read_columns
from tests.conftest import WriteFile

START = datetime(2024, 5, 1, tzinfo=UTC)
START_US = int(START.timestamp() * 1_000_000)


def run(columns: dict[str, Any], fmt: LogFormat, start_us: int | None = None) -> NormalizedChunk:
    """Normalize one CSV-like chunk (header on line 1) of ``columns``."""
    n = len(next(iter(columns.values())))
    chunk = RawChunk(pa.table(columns), 1, range(2, 2 + n), header_lines=1)
    return normalize_chunk(
        chunk, fmt, fmt.resolve(list(columns)), start_us=start_us, default_model=None
    )


def azure(ts: Any, inp: Any | None = None, out: Any | None = None) -> dict[str, Any]:
    n = len(ts)
    return {
        "TIMESTAMP": ts,
        "ContextTokens": inp if inp is not None else pa.array(["1"] * n),
        "GeneratedTokens": out if out is not None else pa.array(["1"] * n),
    }


def mooncake(ts: Any, hashes: Any | None = None) -> dict[str, Any]:
    n = len(ts)
    columns = {
        "timestamp": ts,
        "input_length": pa.array([1] * n),
        "output_length": pa.array([1] * n),
    }
    if hashes is not None:
        columns["hash_ids"] = hashes
    return columns


# --- arithmetic never wraps -------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [pa.array([18446744073709552, 5]), pa.array(["18446744073709552", "5"])],
    ids=["integers", "text"],
)
def test_huge_relative_time_is_out_of_range_not_wrapped(values: Any) -> None:
    result = run(mooncake(values), MOONCAKE, START_US)
    assert result.bad_rows == 1
    assert result.columns["arrival_us"].tolist() == [START_US + 5_000]
    (problem,) = result.problems
    assert (problem.row, problem.column) == (1, "timestamp")
    assert "'18446744073709552' ms after the start is out of range" in problem.message


def test_epoch_nanoseconds_read_as_seconds_suggest_the_unit() -> None:
    fmt = LogFormat(
        "generic",
        {"arrival": "t", "input_tokens": "i", "output_tokens": "o"},
        TimeSpec(TimeKind.EPOCH, TimeUnit.S),
    )
    columns = {"t": pa.array([1_700_000_000_000_000_000]), "i": pa.array([1]), "o": pa.array([1])}
    result = run(columns, fmt)
    (problem,) = result.problems
    assert "since the Unix epoch is out of range" in problem.message
    assert "pass --time-unit ns" in problem.message


def test_timestamps_beyond_the_range_in_their_own_unit_are_flagged() -> None:
    ts = pa.array([2**62, 1_700_000_000_000], pa.timestamp("ms"))
    result = run(azure(ts, pa.array([1, 2]), pa.array([1, 2])), AZURE_LLM)
    assert result.columns["arrival_us"].tolist() == [1_700_000_000_000_000]
    assert "out of range" in result.problems[0].message


# --- dates outside pandas' range --------------------------------------------------------------


@pytest.mark.parametrize(
    "ts",
    [
        pa.array(["9999-12-31 00:00:00", "2024-05-01"]),
        pa.array(["0001-01-01", "2024-05-01"]),
        pa.array([datetime(9999, 12, 31), datetime(2024, 5, 1)], pa.timestamp("us")),
        pa.array([date(1, 1, 1), date(2024, 5, 1)], pa.date32()),
    ],
    ids=["text-9999", "text-0001", "timestamp-9999", "date-0001"],
)
def test_dates_outside_the_range_are_located_row_problems(ts: Any) -> None:
    result = run(azure(ts), AZURE_LLM)
    assert result.bad_rows == 1
    assert result.columns["arrival_us"].tolist() == [START_US]
    (problem,) = result.problems
    assert (problem.row, problem.line, problem.column) == (1, 2, "TIMESTAMP")
    assert "is out of range: planner handles arrival times from 1678-01-01" in problem.message


def test_a_nanosecond_date_does_not_push_an_old_one_out_silently() -> None:
    ts = pa.array(["0001-01-01", "2024-05-01T00:00:00.000000001"])
    result = run(azure(ts), AZURE_LLM)
    assert "'0001-01-01' is out of range" in result.problems[0].message


def test_mixed_offsets_with_a_local_timezone() -> None:
    fmt = LogFormat(
        "generic",
        {"arrival": "t", "input_tokens": "i", "output_tokens": "o"},
        TimeSpec(TimeKind.DATETIME, timezone="Europe/Berlin"),
    )
    columns = {
        "t": pa.array(
            ["2024-05-01T02:00:00+02:00", "2024-05-01T01:00:00+01:00", "2024-05-01 02:00"]
        ),
        "i": pa.array([1, 1, 1]),
        "o": pa.array([1, 1, 1]),
    }
    assert run(columns, fmt).columns["arrival_us"].tolist() == [START_US] * 3


# --- integers are decimal integers ------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "shown"),
    [
        (pa.array(["0x10", "5"]), "'0x10'"),
        (pa.array(["1_000", "5"]), "'1_000'"),
        (pa.array(["inf", "5"]), "'inf'"),
        (pa.array([True, False]), "'True'"),
        (pa.array(["true", "5"]), "'true'"),
    ],
)
def test_non_decimal_token_counts_are_refused(values: Any, shown: str) -> None:
    result = run(azure(pa.array(["2024-05-01"] * 2), values), AZURE_LLM)
    assert result.problems[0].message == f"expected a non-negative integer, got {shown}"
    assert result.problems[0].column == "ContextTokens"


def test_token_counts_beyond_int64_are_too_large() -> None:
    values = pa.array([2**64 - 1, 5], pa.uint64())
    result = run(azure(pa.array(["2024-05-01"] * 2), values), AZURE_LLM)
    assert result.columns["input_tokens"].tolist() == [5]
    assert "is too large" in result.problems[0].message


@pytest.mark.parametrize(
    "hashes",
    [
        [[1, 2**63], [3]],
        [[1, 2.5], [3]],
        [[1, True], [3]],
        [["1", "0x2"], [3]],
    ],
    ids=["beyond-int64", "fraction", "boolean", "hex"],
)
def test_bad_prefix_block_ids_are_located(hashes: list[list[object]]) -> None:
    array = pa.array([str(h) for h in hashes])
    result = run(mooncake(pa.array([1, 2]), array), MOONCAKE, START_US)
    assert result.columns["prefix_block_ids"] == ["3"]
    assert result.problems[0].column == "hash_ids"
    assert "at most 9223372036854775807" in result.problems[0].message


# --- text the store keeps the same on every backend -------------------------------------------


def test_nul_and_overlong_text_are_row_problems() -> None:
    fmt = LogFormat(
        "generic",
        {"arrival": "t", "input_tokens": "i", "output_tokens": "o", "model": "m"},
        TimeSpec(),
    )
    columns = {
        "t": pa.array(["2024-05-01"] * 3),
        "i": pa.array([1, 1, 1]),
        "o": pa.array([1, 1, 1]),
        "m": pa.array(["a\x00b", "m" * 201, "ok"]),
    }
    result = run(columns, fmt)
    assert result.columns["model"] == ["ok"]
    assert "NUL character" in result.problems[0].message
    assert "longer than the 200 planner keeps" in result.problems[1].message


# --- readers ----------------------------------------------------------------------------------


def test_deeply_nested_json_is_a_located_row_problem(write: WriteFile) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    path = write("deep.jsonl", f'{{"a": 1}}\n{{"a": {deep}}}\n{{"a": 3}}\n')
    (chunk,) = iter_chunks(inspect_file(path), ["a"])
    assert chunk.table.column("a").to_pylist() == [1, 3]
    assert chunk.problems[0].describe() == "row 2, line 2: not valid JSON (nested too deeply)"


def test_bom_files_read_like_any_other(write: WriteFile) -> None:
    csv_path = write("bom.csv", b"\xef\xbb\xbfTIMESTAMP,ContextTokens\n2024-05-01,1\n")
    json_path = write("bom.jsonl", b'\xef\xbb\xbf{"timestamp": 1}\n')
    assert read_columns(inspect_file(csv_path)) == ["TIMESTAMP", "ContextTokens"]
    assert read_columns(inspect_file(json_path)) == ["timestamp"]
    (chunk,) = iter_chunks(inspect_file(json_path), ["timestamp"])
    assert chunk.table.column("timestamp").to_pylist() == [1] and not chunk.problems


def test_non_utf8_csv_value_is_a_located_row_problem(write: WriteFile) -> None:
    path = write("latin.csv", b"a,b\nok,1\ncaf\xe9,2\nfine,3\n")
    (chunk,) = iter_chunks(inspect_file(path), ["a", "b"])
    assert chunk.table.column("a").to_pylist() == ["ok", "fine"]
    assert [chunk.row_of(i) for i in range(2)] == [(1, 2), (3, 4)]
    (problem,) = chunk.problems
    assert (problem.row, problem.line, problem.column) == (2, 3, "a")
    assert "not UTF-8 text (byte 0xe9" in problem.message


def test_non_utf8_json_line_is_a_located_row_problem(write: WriteFile) -> None:
    path = write("latin.jsonl", b'{"a": "ok"}\n{"a": "caf\xe9"}\n')
    (chunk,) = iter_chunks(inspect_file(path), ["a"])
    assert chunk.table.column("a").to_pylist() == ["ok"]
    assert chunk.problems[0].describe().startswith("row 2, line 2: not UTF-8 text (byte 0xe9")


def test_lone_surrogate_in_json_is_a_row_problem(write: WriteFile) -> None:
    path = write("sur.jsonl", '{"a": "ok"}\n{"a": "\\ud800"}\n')
    (chunk,) = iter_chunks(inspect_file(path), ["a"])
    assert chunk.table.column("a").to_pylist() == ["ok"]
    assert "lone surrogate" in chunk.problems[0].message


def test_mixed_json_types_keep_text_as_text(write: WriteFile) -> None:
    path = write("mixed.jsonl", '{"m": "gpt"}\n{"m": 5}\n')
    (chunk,) = iter_chunks(inspect_file(path), ["m"])
    assert chunk.table.column("m").to_pylist() == ["gpt", "5"]


@pytest.mark.parametrize(
    ("delimiter", "name"), [(";", "semi.csv"), ("\t", "tabs.tsv"), ("|", "bar.txt")]
)
def test_other_delimiters_are_read(write: WriteFile, delimiter: str, name: str) -> None:
    path = write(name, f"a{delimiter}b\n1{delimiter}2\n")
    source = inspect_file(path)
    assert (source.kind, source.delimiter) == (FileKind.CSV, delimiter)
    assert read_columns(source) == ["a", "b"]
    (chunk,) = iter_chunks(source, ["a", "b"])
    assert chunk.table.to_pydict() == {"a": ["1"], "b": ["2"]}


def test_utf16_is_named(write: WriteFile) -> None:
    path = write("excel.csv", "a,b\n1,2\n".encode("utf-16"))
    with pytest.raises(InputFileError, match="UTF-16 text; planner reads UTF-8"):
        inspect_file(path)


# --- options ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("evil\x1b[31mred", "control characters"),
        ("two\nlines", "control characters"),
        ("x" * 201, "at most 200 characters"),
        ("  ", "empty"),
    ],
)
def test_bad_dataset_names_are_refused(name: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment) as err:
        check_name(name)
    assert "\x1b" not in str(err.value) and "\n" not in str(err.value)


def test_bad_model_option_is_refused() -> None:
    with pytest.raises(UsageError, match="--model"):
        check_model("a\x00b")
    assert check_model(" m ") == "m"


@pytest.mark.parametrize("value", ["9999-12-31", "0001-01-01", "NaT"])
def test_start_outside_the_range_is_a_usage_error(value: str) -> None:
    with pytest.raises(UsageError, match="--start"):
        parse_start(value)


def test_start_in_range() -> None:
    assert parse_start("2024-05-01") == START
    assert START_US < ARRIVAL_MAX_US


def test_unknown_timezone_and_bad_time_format() -> None:
    with pytest.raises(UsageError, match="--timezone 'Mars/Base': unknown time zone"):
        check_timezone("Mars/Base")
    assert check_timezone("Europe/Berlin") == "Europe/Berlin"
    with pytest.raises(UsageError, match="--time-format '%Q': not a strptime pattern"):
        check_time_format("%Q")
    assert check_time_format("%Y-%m-%d %H:%M:%S") == "%Y-%m-%d %H:%M:%S"


def test_a_local_time_skipped_by_daylight_saving_is_named() -> None:
    fmt = LogFormat(
        "generic",
        {"arrival": "t", "input_tokens": "i", "output_tokens": "o"},
        TimeSpec(TimeKind.DATETIME, timezone="Europe/Berlin"),
    )
    columns = {"t": pa.array(["2024-03-31 02:30:00"]), "i": pa.array([1]), "o": pa.array([1])}
    (problem,) = run(columns, fmt).problems
    assert "does not exist or is ambiguous in Europe/Berlin" in problem.message


def test_header_without_a_newline_has_no_data_rows(write: WriteFile) -> None:
    path = write("h.csv", "TIMESTAMP,ContextTokens")
    with pytest.raises(InputFileError, match="the file has a header but no data rows"):
        list(iter_chunks(inspect_file(path), ["TIMESTAMP"]))


def test_dictionary_columns_from_pandas_categoricals() -> None:
    columns = azure(
        pa.array(["2024-05-01", "2024-05-01"]).dictionary_encode(),
        pa.array(["1", "2"]).dictionary_encode(),
        pa.array([3, 4]).dictionary_encode(),
    )
    result = run(columns, AZURE_LLM)
    assert result.problems == []
    assert result.columns["input_tokens"].tolist() == [1, 2]
    assert result.columns["output_tokens"].tolist() == [3, 4]
    assert result.columns["arrival_us"].tolist() == [START_US, START_US]


# --- plausible values only: times a log can hold, one way of writing them, bounded headers ------


def test_times_before_1970_or_over_a_year_ahead_are_refused_with_row_and_value() -> None:
    from planner.ingest.normalize import plausible_window

    fmt = LogFormat(
        "generic", AZURE_LLM.columns, TimeSpec(TimeKind.EPOCH, TimeUnit.S), "epoch seconds"
    )
    now = datetime(2026, 12, 6, tzinfo=UTC)
    values = pa.array(["-1700000000", "1700000000", "1900000000"])  # 1916, 2023, 2030
    n = len(values)
    chunk = RawChunk(pa.table(azure(values)), 1, range(2, 2 + n), header_lines=1)
    fields = fmt.resolve(list(azure(values)))
    result = normalize_chunk(
        chunk, fmt, fields, start_us=None, default_model=None, window=plausible_window(now)
    )
    assert result.bad_rows == 2 and result.num_rows == 1
    early, late = result.problems
    assert (early.row, early.line, early.column) == (1, 2, "TIMESTAMP")
    assert "'-1700000000' (a number of s since the Unix epoch) is 1916-" in early.message
    assert "before 1970-01-01 00:00:00 UTC" in early.message and "--allow-any-time" in early.message
    assert late.row == 3 and "more than a year from now (after 2027-12-07" in late.message
    anything = normalize_chunk(chunk, fmt, fields, start_us=None, default_model=None)
    assert anything.bad_rows == 0  # no window: any time planner can store


@pytest.mark.parametrize(
    ("values", "with_offset", "without_offset"),
    [
        (["2024-01-01T00:00:00+02:00", "2024-01-01 01:00:00"], 1, 2),
        (["2024-01-01 01:00:00", "2024-01-01T00:00:00Z", "2024-01-01T03:00:00.5-0530"], 2, 1),
        (["2024-01-01", "2024-01-01 00:00:00.250"], None, 1),  # a date alone has no offset
        (["2024-01-01T00:00:00+00:00", "2024-01-01T00:00:01 UTC"], 1, None),
    ],
)
def test_date_times_with_and_without_offset_are_told_apart(
    values: list[str], with_offset: int | None, without_offset: int | None
) -> None:
    result = run(azure(pa.array(values)), AZURE_LLM)
    assert (result.with_offset.row if result.with_offset else None) == with_offset
    assert (result.without_offset.row if result.without_offset else None) == without_offset


@pytest.mark.parametrize(
    ("column", "value", "fragment"),
    [
        ("ContextTokens", "100000001", "is too large (at most 100,000,000 tokens a request)"),
        ("GeneratedTokens", "-5", "expected a non-negative integer, got '-5'"),
        ("ContextTokens", "NaN", "expected a non-negative integer, got 'NaN'"),
        ("GeneratedTokens", "1e308", "is too large"),
    ],
)
def test_token_counts_out_of_range_are_located(column: str, value: str, fragment: str) -> None:
    columns = azure(pa.array(["2024-06-01", "2024-06-02"]))
    columns[column] = pa.array(["1", value])
    result = run(columns, AZURE_LLM)
    assert result.bad_rows == 1
    problem = result.problems[0]
    assert (problem.row, problem.line, problem.column) == (2, 3, column)
    assert fragment in problem.message


def test_a_latency_beyond_a_week_is_refused() -> None:
    fmt = LogFormat("generic", {**AZURE_LLM.columns, "e2e_ms": "e2e"}, TimeSpec(), "with latencies")
    columns = {**azure(pa.array(["2024-06-01", "2024-06-02"])), "e2e": pa.array(["12.5", "1e308"])}
    result = run(columns, fmt)
    assert result.bad_rows == 1 and result.problems[0].column == "e2e"
    assert "'1e308' ms is too long (at most 604,800,000 ms" in result.problems[0].message


def test_a_header_too_wide_or_too_long_says_so(write: WriteFile) -> None:
    wide = write("wide.csv", ",".join(f"c{i}" for i in range(10_001)) + "\n1,2,3\n")
    with pytest.raises(InputFileError) as caught:
        read_columns(inspect_file(wide))
    message = str(caught.value)
    assert message.startswith(f"{wide}: line 1: the header has 10,001 columns; a request log ")
    assert "at most 10,000 (the first data row, line 2, has 3 fields)" in message
    long = write("long.csv", "a," * 600_000 + "a\n1,2,3\n")
    with pytest.raises(InputFileError, match=r"line 1: the header is longer than 1 MiB"):
        read_columns(inspect_file(long))
    jsonl = write("wide.jsonl", json.dumps({f"k{i}": i for i in range(10_001)}) + "\n")
    with pytest.raises(InputFileError, match=r"row 1, line 1: the first JSON object has 10,001"):
        read_columns(inspect_file(jsonl))
    fine = write("fine.csv", ",".join(f"c{i}" for i in range(10_000)) + "\n1\n")
    assert len(read_columns(inspect_file(fine))) == 10_000
