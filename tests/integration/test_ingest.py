"""Ingestion into a real store (SQLite, and PostgreSQL when configured) from real and made files."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import func, select

from planner.errors import InputFileError, UsageError
from planner.ingest import IngestOptions, TimeKind, TimeSpec, TimeUnit, ingest_file
from planner.store import Dataset, Request, Store
from planner.store.queries import get_dataset
from planner.store.requests import request_frame
from planner.workload.summary import summarize
from tests.conftest import AZURE_CODE, AZURE_CONV, DEMO_SAMPLE, MOONCAKE, WriteFile

START = datetime(2024, 6, 1, tzinfo=UTC)


def frame_of(
    store: Store,
    name: str,
    columns: tuple[str, ...] = ("arrival_us", "model", "input_tokens", "output_tokens"),
) -> pd.DataFrame:
    with store.session() as session:
        return request_frame(session, get_dataset(session, name).id, columns)


def dataset_names(store: Store) -> list[str]:
    with store.session() as session:
        return list(session.scalars(select(Dataset.name)))


def request_count(store: Store) -> int:
    with store.session() as session:
        return int(session.scalar(select(func.count()).select_from(Request)) or 0)


# --- the real traces -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "rows", "input_mean", "output_mean"),
    [(AZURE_CODE, 8819, 2048, 28), (AZURE_CONV, 19366, 1155, 211)],
)
def test_real_azure_traces(
    store: Store, path: Path, rows: int, input_mean: int, output_mean: int
) -> None:
    result = ingest_file(store, path)
    assert (result.status, result.format, result.rows, result.skipped_rows) == (
        "ingested",
        "azure-llm",
        rows,
        0,
    )
    summary = summarize(frame_of(store, result.dataset))
    assert summary.rows == rows
    assert round(summary.input_tokens.mean) == input_mean
    assert round(summary.output_tokens.mean) == output_mean
    assert 55 * 60 < summary.duration_s < 60 * 60  # about one hour
    # first timestamp, to the microsecond, as in the file
    first = pd.read_csv(path, nrows=1)["TIMESTAMP"][0]
    assert summary.start_at == pd.Timestamp(first, tz="UTC").floor("us").to_pydatetime()


def test_real_mooncake_trace_keeps_prefix_blocks(store: Store) -> None:
    result = ingest_file(store, MOONCAKE, IngestOptions(start=START))
    assert (result.format, result.rows) == ("mooncake", 12031)
    frame = frame_of(
        store, result.dataset, ("arrival_us", "input_tokens", "output_tokens", "prefix_block_ids")
    )
    assert round(frame["input_tokens"].mean()) == 12035
    assert round(frame["output_tokens"].mean()) == 343
    assert frame["arrival_us"].iloc[0] == int(START.timestamp() * 1e6)
    assert frame["prefix_block_ids"].iloc[0] == "0 1 2 3 4 5 6 7 8 9 10 11 12 13"
    # 512-token blocks: a prompt of n tokens has ceil(n / 512) blocks
    blocks = frame["prefix_block_ids"].map(lambda ids: len(ids.split()))
    assert (blocks == np.ceil(frame["input_tokens"] / 512)).mean() > 0.99


def test_bundled_demo_sample_is_the_azure_conversation_trace(store: Store) -> None:
    result = ingest_file(store, DEMO_SAMPLE)
    assert (result.dataset, result.rows) == ("azure_llm_conv_2023", 19366)


# --- other formats and containers -----------------------------------------------------------


def test_burstgpt(store: Store, write: WriteFile) -> None:
    path = write(
        "burst.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "45,GPT-4,1087,0,1087,API log\n"
        "118,ChatGPT,417,175,592,Conversation log\n",
    )
    result = ingest_file(store, path, IngestOptions(start=START))
    assert result.format == "burstgpt"
    frame = frame_of(store, "burst", ("arrival_us", "model", "output_tokens", "priority_class"))
    assert frame["model"].tolist() == ["ChatGPT", "GPT-4", "ChatGPT"]
    assert frame["priority_class"].tolist() == ["Conversation log", "API log", "Conversation log"]
    assert (frame["arrival_us"] - int(START.timestamp() * 1e6)).tolist() == [5e6, 45e6, 118e6]
    summary = summarize(frame_of(store, "burst"))
    assert [m.model for m in summary.by_model] == ["ChatGPT", "GPT-4"]


def test_generic_mapping_with_epoch_seconds_and_observed_latency(
    store: Store, write: WriteFile
) -> None:
    path = write(
        "gateway.csv",
        "ts,prompt,completion,llm,ttft,latency,tier,code\n"
        "1714521600.25,100,20,llama-3.1-8b,81.5,900,interactive,200\n"
        "1714521601.5,50,10,llama-3.1-70b,,1500,batch,500\n",
    )
    mapping = {
        "arrival": "ts",
        "input_tokens": "prompt",
        "output_tokens": "completion",
        "model": "llm",
        "ttft_ms": "ttft",
        "e2e_ms": "latency",
        "priority_class": "tier",
        "status": "code",
    }
    options = IngestOptions(
        format="generic", mapping=mapping, time=TimeSpec(TimeKind.EPOCH, TimeUnit.S)
    )
    ingest_file(store, path, options)
    frame = frame_of(
        store, "gateway", ("arrival_us", "model", "ttft_ms", "e2e_ms", "priority_class", "status")
    )
    assert frame["arrival_us"].tolist() == [1714521600250000, 1714521601500000]
    assert frame["ttft_ms"].iloc[0] == 81.5 and np.isnan(frame["ttft_ms"].iloc[1])
    assert frame["e2e_ms"].tolist() == [900.0, 1500.0]
    assert frame["status"].tolist() == ["200", "500"]


def test_parquet_with_native_timestamps(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "log.parquet"
    times = pd.to_datetime(
        ["2024-06-01 00:00:00.000001", "2024-06-01 00:00:02"], format="ISO8601"
    ).tz_localize("UTC")
    pq.write_table(
        pa.table(
            {"TIMESTAMP": pa.array(times), "ContextTokens": [10, 20], "GeneratedTokens": [1, 2]}
        ),
        path,
    )
    result = ingest_file(store, path)
    assert result.rows == 2
    assert frame_of(store, "log")["arrival_us"].iloc[0] == int(START.timestamp() * 1e6) + 1


def test_gzipped_jsonl(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl.gz"
    head = gzip.decompress(MOONCAKE.read_bytes())[:20_000]
    head = head[: head.rindex(b"\n") + 1]  # whole lines only
    path.write_bytes(gzip.compress(head))
    result = ingest_file(store, path, IngestOptions(start=START))
    assert result.rows == head.count(b"\n")


def test_out_of_order_rows_are_accepted_and_read_back_sorted(
    store: Store, write: WriteFile
) -> None:
    path = write(
        "shuffled.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-06-01 00:00:03,3,3\n2024-06-01 00:00:01,1,1\n2024-06-01 00:00:02,2,2\n",
    )
    result = ingest_file(store, path)
    assert result.out_of_order_rows == 1
    assert frame_of(store, "shuffled")["input_tokens"].tolist() == [1, 2, 3]
    assert result.start_at == START.replace(second=1)


def test_default_model_option(store: Store) -> None:
    ingest_file(store, AZURE_CODE, IngestOptions(model="gpt-4"))
    assert set(frame_of(store, "AzureLLMInferenceTrace_code_2023")["model"]) == {"gpt-4"}


# --- idempotence and replacement ------------------------------------------------------------


def test_reingesting_the_same_file_is_idempotent(store: Store) -> None:
    ingest_file(store, AZURE_CODE)
    again = ingest_file(store, AZURE_CODE, IngestOptions(name="other-name"))
    assert (again.status, again.dataset, again.rows) == (
        "already-present",
        "AzureLLMInferenceTrace_code_2023",
        8819,
    )
    assert request_count(store) == 8819
    assert dataset_names(store) == ["AzureLLMInferenceTrace_code_2023"]


def test_replace(store: Store) -> None:
    ingest_file(store, AZURE_CODE, IngestOptions(name="trace"))
    result = ingest_file(store, AZURE_CONV, IngestOptions(name="trace", replace=True))
    assert result.status == "replaced"
    assert request_count(store) == 19366
    assert dataset_names(store) == ["trace"]


def test_a_name_taken_by_another_file_is_an_error(store: Store) -> None:
    ingest_file(store, AZURE_CODE, IngestOptions(name="trace"))
    with pytest.raises(UsageError, match="a dataset named 'trace' already exists.*--replace"):
        ingest_file(store, AZURE_CONV, IngestOptions(name="trace"))
    assert request_count(store) == 8819


# --- bad input: clear messages, and nothing half-written -------------------------------------

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
GOOD = "2024-06-01 00:00:00,10,5\n"


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        (
            "missing_col.csv",
            "TIMESTAMP,ContextTokens\n2024-06-01,1\n",
            "missing_col.csv: cannot tell the log format from its columns ('TIMESTAMP', 'ContextTokens')",
        ),
        (
            "bad_time.csv",
            HEADER + GOOD * 3 + "16/11/2023 noon,10,5\n",
            "bad_time.csv: row 4, line 5, column 'TIMESTAMP': expected a date-time (ISO 8601",
        ),
        (
            "negative.csv",
            HEADER + GOOD + "2024-06-01 00:00:01,-7,5\n",
            "negative.csv: row 2, line 3, column 'ContextTokens': expected a non-negative integer, got '-7'",
        ),
        (
            "fraction.csv",
            HEADER + GOOD + "2024-06-01 00:00:01,7,2.5\n",
            "fraction.csv: row 2, line 3, column 'GeneratedTokens': expected a non-negative integer, got a fraction '2.5'",
        ),
        (
            "nan.csv",
            HEADER + "2024-06-01 00:00:01,NaN,2\n",
            "nan.csv: row 1, line 2, column 'ContextTokens': expected a non-negative integer, got 'NaN'",
        ),
        (
            "blank.csv",
            HEADER + "2024-06-01 00:00:01,,2\n",
            "blank.csv: row 1, line 2, column 'ContextTokens': missing value, expected a non-negative integer",
        ),
        (
            "ragged.csv",
            HEADER + GOOD + "2024-06-01 00:00:01,7\n",
            "ragged.csv: row 2, line 3: expected 3 fields, got 2",
        ),
        ("header_only.csv", HEADER, "header_only.csv: the file has a header but no data rows"),
        ("empty.csv", "", "empty.csv: the file is empty (0 bytes)"),
        ("binary.csv", "\x00\x01\x02garbage", "binary.csv: binary data (a NUL byte at offset 0)"),
    ],
)
def test_bad_input_is_reported_precisely_and_nothing_is_stored(
    store: Store, write: WriteFile, name: str, content: str, expected: str
) -> None:
    path = write(name, content)
    with pytest.raises(InputFileError) as err:
        ingest_file(store, path)
    assert expected in str(err.value)
    assert str(path) in str(err.value)
    assert dataset_names(store) == [] and request_count(store) == 0


def test_missing_required_column_of_a_forced_format(store: Store, write: WriteFile) -> None:
    path = write("short.csv", "TIMESTAMP,ContextTokens\n2024-06-01,1\n")
    with pytest.raises(
        InputFileError, match="missing required column 'GeneratedTokens' for format azure-llm"
    ):
        ingest_file(store, path, IngestOptions(format="azure-llm"))


def test_missing_json_field(store: Store, write: WriteFile) -> None:
    path = write(
        "m.jsonl",
        '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 9, "input_length": 5}\n',
    )
    with pytest.raises(
        InputFileError, match=r"row 2, line 2, column 'output_length': missing value"
    ):
        ingest_file(store, path, IngestOptions(start=START))


def test_file_not_found(store: Store, tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="gone.csv: file not found"):
        ingest_file(store, tmp_path / "gone.csv")


def test_unknown_format(store: Store) -> None:
    with pytest.raises(UsageError, match="unknown format 'azure'; known formats: azure-llm"):
        ingest_file(store, AZURE_CODE, IngestOptions(format="azure"))


def test_relative_formats_need_a_start(store: Store) -> None:
    with pytest.raises(
        UsageError, match="format mooncake gives times relative to the start.*--start"
    ):
        ingest_file(store, MOONCAKE)


def test_skip_mode_reports_count_and_first_examples(store: Store, write: WriteFile) -> None:
    bad = ["2024-06-01 00:00:01,x,1\n", "2024-06-01 00:00:02,1\n", "nope,1,1\n"] * 3
    path = write("mixed.csv", HEADER + GOOD + "".join(bad) + GOOD.replace("00:00:00", "00:00:09"))
    result = ingest_file(store, path, IngestOptions(on_error="skip"))
    assert (result.rows, result.skipped_rows) == (2, 9)
    assert len(result.skipped_examples) == 5
    assert result.skipped_examples[0].startswith("row 2, line 3, column 'ContextTokens'")
    assert result.skipped_examples[1].startswith("row 3, line 4: expected 3 fields, got 2")
    assert result.skipped_examples[2].startswith("row 4, line 5, column 'TIMESTAMP'")
    with store.session() as session:
        assert get_dataset(session, "mixed").skipped_rows == 9


def test_all_rows_bad_in_skip_mode_stores_nothing(store: Store, write: WriteFile) -> None:
    path = write("allbad.csv", HEADER + "x,1,1\ny,2,2\n")
    with pytest.raises(InputFileError, match=r"every row was bad \(2 skipped\)"):
        ingest_file(store, path, IngestOptions(on_error="skip"))
    assert dataset_names(store) == []


def test_a_failure_late_in_a_large_file_leaves_no_partial_dataset(
    store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "late.csv"
    rows = [
        f"2024-06-01 00:{i // 60 % 60:02d}:{i % 60:02d},{i % 900 + 1},7\n" for i in range(600_000)
    ]
    rows[-10] = "2024-06-01 00:00:00,1,oops\n"
    path.write_text(HEADER + "".join(rows))
    with pytest.raises(InputFileError, match="row 599991, line 599992, column 'GeneratedTokens'"):
        ingest_file(store, path)
    assert dataset_names(store) == [] and request_count(store) == 0


def test_an_interrupted_ingest_leaves_nothing(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_text(
        HEADER + "".join(f"2024-06-01 00:00:{i % 60:02d},{i + 1},7\n" for i in range(600_000))
    )
    calls = []

    def interrupt(done: int, total: int | None) -> None:
        calls.append(done)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ingest_file(store, path, progress=interrupt)
    assert calls and calls[0] < 600_000  # it stopped part-way, after rows were written
    assert dataset_names(store) == [] and request_count(store) == 0
    assert ingest_file(store, path).rows == 600_000  # and the store is usable afterwards
