"""Hostile logs against a real store (SQLite, and PostgreSQL when configured): the same rows are
refused on every backend, before anything is written, and a dataset lands whole or not at all."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import create_engine, event, func, select, text

from planner.errors import InputFileError, PlannerError, UsageError
from planner.ingest import IngestOptions, TimeKind, TimeSpec, ingest_file
from planner.store import Dataset, Request, Store
from planner.store.queries import get_dataset
from planner.store.requests import request_frame
from tests.conftest import WriteFile

START = datetime(2024, 6, 1, tzinfo=UTC)
GENERIC = {"arrival": "t", "input_tokens": "i", "output_tokens": "o", "model": "m"}


def counts(store: Store) -> tuple[int, int]:
    with store.session() as session:
        datasets = session.scalar(select(func.count()).select_from(Dataset)) or 0
        requests = session.scalar(select(func.count()).select_from(Request)) or 0
    return int(datasets), int(requests)


@pytest.mark.parametrize(
    ("model", "fragment"),
    [("a\x00b", "NUL character"), ("m" * 201, "longer than the 200 planner keeps")],
    ids=["nul", "long"],
)
def test_text_postgres_refuses_is_refused_on_every_backend(
    store: Store, write: WriteFile, model: str, fragment: str
) -> None:
    rows = [
        {"t": "2024-06-01T00:00:00Z", "i": 1, "o": 1, "m": "ok"},
        {"t": "2024-06-01T00:00:01Z", "i": 1, "o": 1, "m": model},
    ]

    path = write("log.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    options = IngestOptions(format="generic", mapping=GENERIC)
    with pytest.raises(InputFileError, match=fragment) as err:
        ingest_file(store, path, options)
    assert err.value.problem.row == 2 and err.value.problem.column == "m"
    assert counts(store) == (0, 0)

    result = ingest_file(
        store, path, IngestOptions(format="generic", mapping=GENERIC, on_error="skip")
    )
    assert (result.rows, result.skipped_rows) == (1, 1)
    assert fragment in result.skipped_examples[0]


def test_long_dataset_name_is_refused_on_every_backend(store: Store, write: WriteFile) -> None:
    path = write("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-06-01,1,1\n")
    with pytest.raises(UsageError, match="at most 200 characters"):
        ingest_file(store, path, IngestOptions(name="n" * 201))
    with pytest.raises(UsageError, match="control characters"):
        ingest_file(store, path, IngestOptions(name="a\x00b"))
    assert counts(store) == (0, 0)
    assert ingest_file(store, path, IngestOptions(name="n" * 200)).rows == 1


def test_bad_row_at_the_end_leaves_nothing_behind(store: Store, write: WriteFile) -> None:
    good = "".join(f"2024-06-01T00:00:{s:02d}Z,1,1\n" for s in range(50))
    path = write(
        "late.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n" + good + "9999-12-31,1,1\n"
    )
    with pytest.raises(InputFileError, match=r"row 51, line 52, column 'TIMESTAMP'.*out of range"):
        ingest_file(store, path)
    assert counts(store) == (0, 0)
    result = ingest_file(store, path, IngestOptions(on_error="skip"))
    assert (result.rows, result.skipped_rows) == (50, 1)


def test_parquet_booleans_and_uint64_token_counts(store: Store, write: WriteFile) -> None:
    path = write("x.parquet", b"")
    table = pa.table(
        {
            "TIMESTAMP": pa.array(["2024-06-01T00:00:00Z"] * 3),
            "ContextTokens": pa.array([True, False, True]),
            "GeneratedTokens": pa.array([2**64 - 1, 3, 4], pa.uint64()),
        }
    )
    pq.write_table(table, path)
    with pytest.raises(InputFileError, match="column 'ContextTokens': expected a non-negative"):
        ingest_file(store, path)
    assert counts(store) == (0, 0)


def test_semicolon_csv_from_excel_with_bom(store: Store, write: WriteFile) -> None:
    path = write(
        "excel.csv",
        b"\xef\xbb\xbfTIMESTAMP;ContextTokens;GeneratedTokens\r\n2024-06-01 00:00:00;12;34\r\n",
    )
    result = ingest_file(store, path)
    assert (result.format, result.rows) == ("azure-llm", 1)
    with store.session() as session:
        frame = request_frame(session, get_dataset(session, "excel").id)
    assert frame["input_tokens"].tolist() == [12] and frame["output_tokens"].tolist() == [34]


def test_relative_times_never_wrap(store: Store, write: WriteFile) -> None:
    path = write(
        "m.jsonl",
        '{"timestamp": 18446744073709552, "input_length": 1, "output_length": 1}\n'
        '{"timestamp": 1000, "input_length": 1, "output_length": 1}\n',
    )
    with pytest.raises(InputFileError, match="out of range"):
        ingest_file(store, path, IngestOptions(start=START))
    result = ingest_file(store, path, IngestOptions(start=START, on_error="skip"))
    assert result.start_at == result.end_at == datetime(2024, 6, 1, 0, 0, 1, tzinfo=UTC)


def test_epoch_unit_mistake_is_explained(store: Store, write: WriteFile) -> None:
    path = write("e.csv", "t,i,o,m\n1700000000000000000,1,1,x\n")
    options = IngestOptions(format="generic", mapping=GENERIC, time=TimeSpec(TimeKind.EPOCH))
    with pytest.raises(InputFileError, match="pass --time-unit ns"):
        ingest_file(store, path, options)


def test_a_name_taken_by_a_concurrent_ingest_is_explained(
    store: Store, store_url: str, write: WriteFile
) -> None:
    """Another process creates the dataset between this ingest's name check and its insert."""
    path = write("race.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-06-01,1,1\n")
    other = create_engine(store_url)
    fired: list[bool] = []

    def rival(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO DATASETS") and not fired:
            fired.append(True)
            with other.begin() as rival_conn:
                rival_conn.execute(
                    text(
                        "INSERT INTO datasets (name, source_path, format, sha256, size_bytes, "
                        "row_count, skipped_rows, options, created_at) VALUES ('race', 'x', "
                        "'azure-llm', 'other', 1, 0, 0, '{}', CURRENT_TIMESTAMP)"
                    )
                )

    event.listen(store.engine, "before_cursor_execute", rival)
    try:
        with pytest.raises(PlannerError) as err:
            ingest_file(store, path)
    finally:
        event.remove(store.engine, "before_cursor_execute", rival)
        other.dispose()
    assert err.value.exit_code == 1
    assert str(err.value).startswith(
        "dataset 'race' was created by another process while this ingest ran; "
        "nothing of this ingest was stored; rerun with --replace"
    )
    assert counts(store) == (1, 0)
