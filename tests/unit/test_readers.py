from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from planner.errors import InputFileError
from planner.ingest.readers import FileKind, estimate_rows, inspect_file, iter_chunks, read_columns
from tests.conftest import WriteFile


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match=r"nope\.csv: file not found"):
        inspect_file(tmp_path / "nope.csv")


def test_empty_file(write: WriteFile) -> None:
    path = write("empty.csv", "")
    with pytest.raises(InputFileError, match=r"empty\.csv: the file is empty \(0 bytes\)"):
        inspect_file(path)


def test_binary_garbage_names_the_offset(write: WriteFile) -> None:
    path = write("garbage.csv", b"TIMESTAMP,ContextTokens\n\x89PNG\x00\x01\x02")
    with pytest.raises(InputFileError) as err:
        inspect_file(path)
    assert "garbage.csv: binary data (a NUL byte at offset 28)" in str(err.value)
    assert "expected CSV, JSON Lines or Parquet" in str(err.value)


def test_mostly_non_utf8_text_is_refused(write: WriteFile) -> None:
    path = write("latin1.csv", b"a,b\n" + "café,1\n".encode("latin-1") * 30 + b"x" * 20)
    with pytest.raises(
        InputFileError, match=r"not UTF-8 text \(byte 0xe9 at offset 7; 30 such bytes"
    ):
        inspect_file(path)


def test_one_non_utf8_value_is_left_to_its_row(write: WriteFile) -> None:
    # One Latin-1 name among UTF-8 rows is that row's problem (located, skippable), found when
    # the rows are read; the file as a whole is text.
    path = write("latin1.csv", b"a,b\n" + "café,1\n".encode("latin-1") + b"x,2\n" * 20)
    assert inspect_file(path).kind is FileKind.CSV


def test_broken_gzip(write: WriteFile) -> None:
    path = write("broken.csv.gz", b"\x1f\x8b\x08\x00garbage-not-deflate")
    with pytest.raises(InputFileError, match=r"broken\.csv\.gz: not a readable gzip file"):
        inspect_file(path)


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="is a directory"):
        inspect_file(tmp_path)


def test_kinds_from_name_and_content(write: WriteFile, tmp_path: Path) -> None:
    assert inspect_file(write("a.csv", "x,y\n1,2\n")).kind is FileKind.CSV
    assert inspect_file(write("a.log", '{"x": 1}\n')).kind is FileKind.JSONL
    gz = tmp_path / "a.jsonl.gz"
    gz.write_bytes(gzip.compress(b'{"x": 1}\n'))
    source = inspect_file(gz)
    assert (source.kind, source.gzipped) == (FileKind.JSONL, True)
    pq.write_table(pa.table({"x": [1]}), tmp_path / "a.bin")
    assert inspect_file(tmp_path / "a.bin").kind is FileKind.PARQUET


def test_csv_rows_with_wrong_field_counts_keep_true_line_numbers(write: WriteFile) -> None:
    path = write("ragged.csv", "a,b\n1,2\n3\n4,5\n6,7,8\n9,10\n")
    chunks = list(iter_chunks(inspect_file(path), ["a", "b"]))
    problems = [p for c in chunks for p in c.problems]
    assert [(p.line, p.row) for p in problems] == [(3, 2), (5, 4)]
    assert "expected 2 fields, got 1" in problems[0].message
    good = chunks[0]
    assert good.table.column("a").to_pylist() == ["1", "4", "9"]
    assert [good.row_of(i) for i in range(3)] == [(1, 2), (3, 4), (5, 6)]


def test_jsonl_line_numbers_skip_blank_lines(write: WriteFile) -> None:
    path = write("a.jsonl", '{"a": 1}\n\n{"a": 2}\n')
    (chunk,) = iter_chunks(inspect_file(path), ["a"])
    assert [chunk.row_of(i) for i in range(2)] == [(1, 1), (2, 3)]


def test_invalid_json_line_is_located(write: WriteFile) -> None:
    # A bad line is that row's problem, so --on-error skip can leave it out.
    path = write("bad.jsonl", '{"a": 1}\n{"a": 2,,}\n{"a": 3}\n')
    (chunk,) = iter_chunks(inspect_file(path), ["a"])
    assert chunk.table.column("a").to_pylist() == [1, 3]
    assert [chunk.row_of(i) for i in range(2)] == [(1, 1), (3, 3)]
    (problem,) = chunk.problems
    assert problem.describe().startswith("row 2, line 2: not valid JSON")


def test_json_line_that_is_not_an_object(write: WriteFile) -> None:
    path = write("list.jsonl", "[1, 2]\n")
    with pytest.raises(InputFileError, match="line 1: expected a JSON object, got list"):
        read_columns(inspect_file(path))


def test_chunks_stream_in_bounded_sizes(write: WriteFile) -> None:
    path = write("many.jsonl", "".join(f'{{"a": {i}}}\n' for i in range(25)))
    chunks = list(iter_chunks(inspect_file(path), ["a"], chunk_rows=10))
    assert [c.num_rows for c in chunks] == [10, 10, 5]
    assert [c.first_row for c in chunks] == [1, 11, 21]


def test_row_estimate_is_close(write: WriteFile) -> None:
    path = write("est.csv", "a,b\n" + "".join(f"{i},{i * 7}\n" for i in range(5000)))
    estimate = estimate_rows(inspect_file(path))
    assert estimate is not None and abs(estimate - 5000) / 5000 < 0.1
