"""Streaming readers for request logs: CSV (plain or gzip), JSON Lines and Parquet.

Each reader yields :class:`RawChunk` tables of the columns asked for, a few hundred thousand rows
at a time, so memory stays flat however long the log is. Values come back as the file spells
them (CSV: strings); :mod:`planner.ingest.normalize` turns them into typed request columns and
locates bad values by row and line.
"""

from __future__ import annotations

import bisect
import csv
import gzip
import io
import json
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO, Any, Literal

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from planner.errors import InputFileError, RowProblem

CHUNK_ROWS = 250_000
CSV_BLOCK_BYTES = 8 << 20
SNIFF_BYTES = 64 << 10
GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"


class FileKind(StrEnum):
    CSV = "csv"
    JSONL = "jsonl"
    PARQUET = "parquet"


@dataclass
class RawChunk:
    """Raw columns of consecutive rows. ``lines`` holds each row's physical line, where known."""

    table: pa.Table
    first_row: int  # 1-based data-row number of the chunk's first row
    lines: Sequence[int] | None = None
    problems: list[RowProblem] = field(default_factory=list)  # rows the reader itself rejected
    # CSV numbers data rows by physical line (row = line - header lines, rejected rows count);
    # JSON Lines counts objects, skipping blank lines.
    header_lines: int | None = None

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows)

    def row_of(self, index: int) -> tuple[int, int | None]:
        """(data row, physical line) of the chunk's ``index``-th row."""
        if self.lines is None:
            return self.first_row + index, None
        line = self.lines[index]
        if self.header_lines is None:
            return self.first_row + index, line
        return line - self.header_lines, line


@dataclass(frozen=True)
class SourceFile:
    """What kind of file a path is, learned from its name and its first bytes."""

    path: Path
    kind: FileKind
    gzipped: bool
    size_bytes: int

    def open_binary(self) -> IO[bytes]:
        raw: IO[bytes] = self.path.open("rb")
        if self.gzipped:
            return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]  # a binary IO in practice
        return raw


def inspect_file(path: Path) -> SourceFile:
    """Check that ``path`` is a readable, non-empty log file and learn its kind."""
    if not path.exists():
        raise InputFileError(path, "file not found")
    if path.is_dir():
        raise InputFileError(path, "is a directory, expected a log file")
    size = path.stat().st_size
    if size == 0:
        raise InputFileError(path, "the file is empty (0 bytes), expected a request log")
    with path.open("rb") as fh:
        magic = fh.read(4)
    if magic == PARQUET_MAGIC:
        return SourceFile(path, FileKind.PARQUET, False, size)
    gzipped = magic[:2] == GZIP_MAGIC
    head = _read_head(path, gzipped)
    if not head.strip():
        raise InputFileError(
            path, "the file has no content (only whitespace), expected a request log"
        )
    _check_text(path, head)
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    if ext in (".jsonl", ".ndjson", ".json"):
        kind = FileKind.JSONL
    elif ext in (".csv", ".tsv", ".txt"):
        kind = FileKind.CSV
    else:
        kind = FileKind.JSONL if head.lstrip().startswith(b"{") else FileKind.CSV
    return SourceFile(path, kind, gzipped, size)


def _read_head(path: Path, gzipped: bool) -> bytes:
    try:
        with path.open("rb") as raw:
            if gzipped:
                with gzip.GzipFile(fileobj=raw) as gz:
                    return gz.read(SNIFF_BYTES)
            return raw.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputFileError(path, f"not a readable gzip file ({exc})") from exc


def _check_text(path: Path, head: bytes) -> None:
    """Refuse binary files early, with the byte offset of the first sign of binary data."""
    nul = head.find(b"\x00")
    if nul >= 0:
        raise InputFileError(
            path,
            f"binary data (a NUL byte at offset {nul}): expected CSV, JSON Lines or Parquet",
        )
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the sample
            raise InputFileError(
                path,
                f"not UTF-8 text (byte 0x{head[exc.start]:02x} at offset {exc.start}): "
                "expected CSV, JSON Lines or Parquet",
            ) from exc


def read_columns(source: SourceFile) -> list[str]:
    """The column names of the file: CSV header, first JSON object's keys, Parquet schema."""
    if source.kind is FileKind.PARQUET:
        try:
            return list(pq.ParquetFile(source.path).schema_arrow.names)
        except (pa.ArrowException, OSError) as exc:
            raise InputFileError(source.path, f"not a readable Parquet file ({exc})") from exc
    with source.open_binary() as fh:
        text = io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline="")
        if source.kind is FileKind.CSV:
            header = next(csv.reader(text), [])
            names = [h.strip() for h in header]
            if not any(names):
                raise InputFileError(source.path, RowProblem(1, None, "empty header line", 1))
            return names
        for number, line in enumerate(text, start=1):
            if line.strip():
                obj = _parse_json_line(source.path, line, number)
                return list(obj)
    raise InputFileError(source.path, "no JSON objects in the file")


def _parse_json_line(path: Path, line: str | bytes, number: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise InputFileError(
            path, RowProblem(None, None, f"not valid JSON ({exc})", number)
        ) from exc
    if not isinstance(obj, dict):
        raise InputFileError(
            path,
            RowProblem(None, None, f"expected a JSON object, got {type(obj).__name__}", number),
        )
    return obj


RowHandler = Callable[[RowProblem], None]


def iter_chunks(
    source: SourceFile, columns: Sequence[str], chunk_rows: int = CHUNK_ROWS
) -> Iterator[RawChunk]:
    """Stream the named columns of ``source`` in chunks."""
    if source.kind is FileKind.CSV:
        yield from _iter_csv(source, columns)
    elif source.kind is FileKind.JSONL:
        yield from _iter_jsonl(source, columns, chunk_rows)
    else:
        yield from _iter_parquet(source, columns, chunk_rows)


def _iter_csv(source: SourceFile, columns: Sequence[str]) -> Iterator[RawChunk]:
    bad_lines: list[int] = []  # physical lines of rows with the wrong number of fields
    pending: list[RowProblem] = []

    def on_invalid_row(row: Any) -> Literal["skip"]:
        line = int(row.number) if row.number is not None else None
        if line is not None:
            bisect.insort(bad_lines, line)
        text = row.text if len(row.text) <= 80 else row.text[:77] + "..."
        pending.append(
            RowProblem(
                None if line is None else line - 1,
                None,
                f"expected {row.expected_columns} fields, got {row.actual_columns}: {text!r}",
                line,
            )
        )
        return "skip"

    stream: Any = pa.input_stream(
        str(source.path),
        compression="gzip" if source.gzipped else None,  # type: ignore[arg-type]  # None: plain
    )
    try:
        reader = pacsv.open_csv(
            stream,
            read_options=pacsv.ReadOptions(use_threads=False, block_size=CSV_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid_row),
            convert_options=pacsv.ConvertOptions(
                include_columns=list(columns),
                column_types={c: pa.string() for c in columns},
                strings_can_be_null=True,
                null_values=[""],  # "NaN", "null" stay text, so errors can quote them
                quoted_strings_can_be_null=False,
            ),
        )
        rows_done = 0
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            table = pa.Table.from_batches([batch])
            lines = _csv_lines(rows_done, table.num_rows, bad_lines)
            chunk = RawChunk(table, rows_done + 1, lines, pending.copy(), header_lines=1)
            pending.clear()
            rows_done += table.num_rows
            yield chunk
        if pending:  # invalid rows after the last good batch
            empty = pa.table({c: pa.array([], pa.string()) for c in columns})
            yield RawChunk(empty, rows_done + 1, [], pending.copy(), header_lines=1)
    except pa.ArrowInvalid as exc:
        raise InputFileError(source.path, f"cannot parse as CSV: {_arrow_message(exc)}") from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise InputFileError(source.path, f"read failed: {exc}") from exc
    finally:
        stream.close()


def _csv_lines(rows_before: int, count: int, bad_lines: Sequence[int]) -> list[int] | range:
    """Physical line of each good row: the header is line 1, rejected rows take lines too."""
    if not bad_lines:
        return range(rows_before + 2, rows_before + 2 + count)
    lines = []
    for k in range(rows_before, rows_before + count):
        line = k + 2
        while True:  # shift past every rejected line at or before this one
            shifted = k + 2 + bisect.bisect_right(bad_lines, line)
            if shifted == line:
                break
            line = shifted
        lines.append(line)
    return lines


def _arrow_message(exc: Exception) -> str:
    return str(exc).split("\n")[0]


def _iter_jsonl(source: SourceFile, columns: Sequence[str], chunk_rows: int) -> Iterator[RawChunk]:
    values: dict[str, list[Any]] = {c: [] for c in columns}
    lines: list[int] = []
    rows_done = 0

    def flush() -> RawChunk:
        nonlocal rows_done
        table = pa.table({c: _to_arrow(v) for c, v in values.items()})
        chunk = RawChunk(table, rows_done + 1, lines.copy())
        rows_done += len(lines)
        for v in values.values():
            v.clear()
        lines.clear()
        return chunk

    try:
        with source.open_binary() as fh:
            for number, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                obj = _parse_json_line(source.path, raw, number)
                for c in columns:
                    values[c].append(obj.get(c))
                lines.append(number)
                if len(lines) >= chunk_rows:
                    yield flush()
    except (OSError, EOFError, zlib.error) as exc:
        raise InputFileError(source.path, f"read failed: {exc}") from exc
    if lines:
        yield flush()


def _to_arrow(values: list[Any]) -> pa.Array[Any]:
    """Arrow array of JSON values; mixed types are kept as text for the normalizer to judge."""
    try:
        array: pa.Array[Any] = pa.array(values)
        return array
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else json.dumps(v) for v in values], pa.string())


def _iter_parquet(
    source: SourceFile, columns: Sequence[str], chunk_rows: int
) -> Iterator[RawChunk]:
    try:
        parquet = pq.ParquetFile(source.path)
        rows_done = 0
        for batch in parquet.iter_batches(batch_size=chunk_rows, columns=list(columns)):
            table = pa.Table.from_batches([batch])
            yield RawChunk(table, rows_done + 1, None)
            rows_done += table.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise InputFileError(source.path, f"not a readable Parquet file ({exc})") from exc


def estimate_rows(source: SourceFile) -> int | None:
    """Rows in the file (exact for Parquet; from the average line length otherwise)."""
    if source.kind is FileKind.PARQUET:
        try:
            return int(pq.ParquetFile(source.path).metadata.num_rows)
        except (pa.ArrowException, OSError):
            return None
    head = _read_head(source.path, source.gzipped)
    lines = head.count(b"\n")
    if lines == 0:
        return None
    size = source.size_bytes
    if source.gzipped:  # the gzip trailer holds the uncompressed size modulo 4 GiB
        with source.path.open("rb") as fh:
            fh.seek(-4, 2)
            size = int.from_bytes(fh.read(4), "little")
    return max(1, int(size / (len(head) / lines)) - (1 if source.kind is FileKind.CSV else 0))
