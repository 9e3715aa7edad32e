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
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from planner.common.text import shown
from planner.errors import InputFileError, RowProblem

CHUNK_ROWS = 250_000
CSV_BLOCK_BYTES = 8 << 20
MAX_LINE_BYTES = 64 << 20  # a longer JSON line is a bad row, not a reason to exhaust memory
SNIFF_BYTES = 64 << 10
# A request log has a few dozen columns; a header beyond these is not a log's (and would cost
# memory for every row read).
MAX_COLUMNS = 10_000
MAX_HEADER_BYTES = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
OTHER_DELIMITERS = ("\t", ";", "|")


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
    # JSON Lines counts objects, skipping blank lines, and gives each row's number in ``rows``.
    header_lines: int | None = None
    rows: Sequence[int] | None = None

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows)

    def row_of(self, index: int) -> tuple[int, int | None]:
        """(data row, physical line) of the chunk's ``index``-th row."""
        if self.rows is not None:
            return self.rows[index], None if self.lines is None else self.lines[index]
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
    delimiter: str = ","  # CSV only

    def open_binary(self) -> IO[bytes]:
        raw: IO[bytes] = self.path.open("rb")
        if self.gzipped:
            return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]  # a binary IO in practice
        return raw


def inspect_file(path: Path) -> SourceFile:
    """Check that ``path`` is a readable, non-empty log file and learn its kind."""
    try:
        if not path.exists():
            raise InputFileError(path, "file not found")
        if path.is_dir():
            raise InputFileError(path, "is a directory, expected a log file")
        if not path.is_file():
            raise InputFileError(
                path, "is not a regular file (a device, pipe or socket), expected a log file"
            )
        size = path.stat().st_size
        if size == 0:
            raise InputFileError(path, "the file is empty (0 bytes), expected a request log")
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise InputFileError(path, f"cannot read the file ({exc.strerror or exc})") from exc
    if magic == PARQUET_MAGIC:
        return SourceFile(path, FileKind.PARQUET, False, size)
    gzipped = magic[:2] == GZIP_MAGIC
    head = _read_head(path, gzipped)
    if not head.strip():
        raise InputFileError(
            path, "the file has no content (only whitespace), expected a request log"
        )
    _check_text(path, head)
    head = head.removeprefix(UTF8_BOM)
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
    delimiter = _delimiter(head, ext) if kind is FileKind.CSV else ","
    return SourceFile(path, kind, gzipped, size, delimiter)


def _delimiter(head: bytes, ext: str) -> str:
    """The CSV delimiter: a comma, unless the header line has none and a tab, semicolon or bar
    instead (Excel writes ';' in many locales)."""
    header = head.split(b"\n", 1)[0].decode("utf-8", errors="replace")
    if ext == ".tsv" and "\t" in header:
        return "\t"
    if "," in header:
        return ","
    counts = {d: header.count(d) for d in OTHER_DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def _read_head(path: Path, gzipped: bool) -> bytes:
    try:
        with path.open("rb") as raw:
            if gzipped:
                with gzip.GzipFile(fileobj=raw) as gz:
                    return gz.read(SNIFF_BYTES)
            return raw.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        if not gzipped:
            raise InputFileError(path, f"cannot read the file ({exc})") from exc
        raise InputFileError(path, f"not a readable gzip file ({exc})") from exc


def _check_text(path: Path, head: bytes) -> None:
    """Refuse binary files early, with the byte offset of the first sign of binary data.

    A few bytes that are not UTF-8 (a Latin-1 name in one row) are the rows' problem, found
    and located later; text that is mostly not UTF-8 is refused here.
    """
    if head.startswith(UTF16_BOMS):
        raise InputFileError(
            path,
            "the file is UTF-16 text; planner reads UTF-8: save it as UTF-8 "
            "(Excel: 'CSV UTF-8'; or iconv -f UTF-16 -t UTF-8)",
        )
    nul = head.find(b"\x00")
    if nul >= 0:
        raise InputFileError(
            path,
            f"binary data (a NUL byte at offset {nul}): expected CSV, JSON Lines or Parquet",
        )
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = head.decode("utf-8", errors="replace").count("\ufffd")
        if exc.start < len(head) - 4 and bad > max(8, len(head) // 50):
            raise InputFileError(
                path,
                f"not UTF-8 text (byte 0x{head[exc.start]:02x} at offset {exc.start}; "
                f"{bad} such bytes at the start): expected CSV, JSON Lines or Parquet in UTF-8",
            ) from exc


def read_columns(source: SourceFile) -> list[str]:
    """The column names of the file: CSV header, first JSON object's keys, Parquet schema; at
    most MAX_COLUMNS of them, a CSV header at most MAX_HEADER_BYTES long."""
    if source.kind is FileKind.PARQUET:
        try:
            names = list(pq.ParquetFile(source.path).schema_arrow.names)
        except (pa.ArrowException, OSError) as exc:
            raise InputFileError(source.path, f"not a readable Parquet file ({exc})") from exc
        _check_column_count(source, len(names), None, None)
        return names
    try:
        with source.open_binary() as fh:
            if source.kind is FileKind.CSV:
                return _csv_header(source, fh.read(MAX_HEADER_BYTES + 1))
            first: RowProblem | None = None
            for number, row, line in _json_lines(fh):
                obj = _parse_json_line(line, number, row)
                if isinstance(obj, dict):
                    _check_column_count(source, len(obj), row, number)
                    return list(obj)
                first = first or obj
                if row >= 1000:
                    break
    except (OSError, EOFError, zlib.error) as exc:
        raise InputFileError(source.path, f"read failed: {exc}") from exc
    if first is not None:
        raise InputFileError(source.path, first)
    raise InputFileError(source.path, "no JSON objects in the file")


def _check_column_count(
    source: SourceFile, count: int, row: int | None, line: int | None, detail: str = ""
) -> None:
    if count > MAX_COLUMNS:
        what = "the first JSON object has" if source.kind is FileKind.JSONL else "the header has"
        raise InputFileError(
            source.path,
            RowProblem(
                row,
                None,
                f"{what} {count:,} columns; a request log has at most {MAX_COLUMNS:,}{detail}",
                line,
            ),
        )


def _csv_header(source: SourceFile, head: bytes) -> list[str]:
    """The column names of a CSV header in ``head``, the file's first MAX_HEADER_BYTES + 1
    bytes: refused when longer than that or wider than MAX_COLUMNS columns."""
    text = head.removeprefix(UTF8_BOM).decode("utf-8", errors="replace")
    buffer = io.StringIO(text, newline="")
    reader = csv.reader(buffer, delimiter=source.delimiter)
    try:
        header = next(reader, [])
    except csv.Error as exc:  # e.g. a header line beyond csv's field size limit
        raise InputFileError(
            source.path, RowProblem(None, None, f"unreadable header ({exc})", 1)
        ) from exc
    if len(head) > MAX_HEADER_BYTES and buffer.tell() >= len(text):  # cut short
        raise InputFileError(
            source.path,
            RowProblem(
                None,
                None,
                f"the header is longer than {MAX_HEADER_BYTES >> 20} MiB ({len(header):,} "
                f"columns in its first MiB); a request log's header has at most "
                f"{MAX_COLUMNS:,} columns and {MAX_HEADER_BYTES >> 20} MiB",
                1,
            ),
        )
    detail = ""
    if len(header) > MAX_COLUMNS:
        try:
            first = next(reader, None)
        except csv.Error:
            first = None
        if first is not None and (buffer.tell() < len(text) or len(head) <= MAX_HEADER_BYTES):
            detail = f" (the first data row, line {reader.line_num}, has {len(first):,} fields)"
    _check_column_count(source, len(header), None, 1, detail)
    names = [h.strip() for h in header]
    if not any(names):
        raise InputFileError(source.path, RowProblem(1, None, "empty header line", 1))
    return names


def _json_lines(fh: IO[bytes]) -> Iterator[tuple[int, int, bytes | None]]:
    """(physical line, data row, bytes) of each non-blank line; bytes is None for a line longer
    than MAX_LINE_BYTES, which is read past without keeping it."""
    number = row = 0
    while True:
        line = fh.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if number == 1:
            line = line.removeprefix(UTF8_BOM)
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := fh.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            row += 1
            yield number, row, None
            continue
        if not line.strip():
            continue
        row += 1
        yield number, row, line


def _parse_json_line(line: bytes | None, number: int, row: int) -> dict[str, Any] | RowProblem:
    """The JSON object on a line, or the problem with it."""
    if line is None:
        return RowProblem(row, None, f"line longer than {MAX_LINE_BYTES >> 20} MiB", number)
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return RowProblem(
            row,
            None,
            f"not UTF-8 text (byte 0x{line[exc.start]:02x} at position {exc.start + 1})",
            number,
        )
    try:
        obj = json.loads(text)
    except RecursionError:
        return RowProblem(row, None, "not valid JSON (nested too deeply)", number)
    except ValueError as exc:
        return RowProblem(row, None, f"not valid JSON ({exc})", number)
    if not isinstance(obj, dict):
        return RowProblem(row, None, f"expected a JSON object, got {type(obj).__name__}", number)
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
            parse_options=pacsv.ParseOptions(
                delimiter=source.delimiter, invalid_row_handler=on_invalid_row
            ),
            convert_options=pacsv.ConvertOptions(
                include_columns=list(columns),
                # Bytes first, so a value that is not UTF-8 is one bad row, not a failed file.
                column_types={c: pa.binary() for c in columns},
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
            binary = pa.Table.from_batches([batch])
            table, lines, not_utf8 = _decode_utf8(
                binary, _csv_lines(rows_done, binary.num_rows, bad_lines)
            )
            chunk = RawChunk(table, rows_done + 1, lines, pending + not_utf8, header_lines=1)
            rows_done += binary.num_rows
            pending.clear()
            yield chunk
        if pending:  # invalid rows after the last good batch
            empty = pa.table({c: pa.array([], pa.string()) for c in columns})
            yield RawChunk(empty, rows_done + 1, [], pending.copy(), header_lines=1)
    except pa.ArrowInvalid as exc:
        message = _arrow_message(exc)
        if "Empty CSV file" in message:
            raise InputFileError(source.path, "the file has a header but no data rows") from exc
        if "straddling" in message or "straddles" in message:
            message = (
                f"a row is longer than {CSV_BLOCK_BYTES >> 20} MiB (or a quote is never "
                "closed, making the rest of the file one value)"
            )
        raise InputFileError(source.path, f"cannot parse as CSV: {message}") from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise InputFileError(source.path, f"read failed: {exc}") from exc
    finally:
        stream.close()


def _as_text(table: pa.Table) -> pa.Table:
    """Binary columns cast to text; raises ArrowInvalid where a value is not UTF-8."""
    columns: dict[str, Any] = {n: pc.cast(table.column(n), pa.string()) for n in table.column_names}
    return pa.table(columns)


def _decode_utf8(
    table: pa.Table, lines: Sequence[int]
) -> tuple[pa.Table, Sequence[int], list[RowProblem]]:
    """Binary CSV columns as text; rows with bytes that are not UTF-8 are dropped and named."""
    try:
        return _as_text(table), lines, []
    except pa.ArrowInvalid:
        pass
    keep = [True] * table.num_rows
    problems: list[RowProblem] = []
    for name in table.column_names:
        for index, value in enumerate(table.column(name).to_pylist()):
            if value is None or not keep[index]:
                continue
            try:
                value.decode("utf-8")
            except UnicodeDecodeError as exc:
                keep[index] = False
                line = lines[index]
                problems.append(
                    RowProblem(
                        line - 1,
                        name,
                        f"not UTF-8 text (byte 0x{value[exc.start]:02x} in "
                        f"{shown(value.decode('utf-8', errors='replace'), 60)}); "
                        "planner reads UTF-8 files",
                        line,
                    )
                )
    mask = pa.array(keep)
    kept = table.filter(mask)
    return _as_text(kept), [line for line, k in zip(lines, keep, strict=True) if k], problems


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
    rows: list[int] = []
    problems: list[RowProblem] = []

    def flush() -> RawChunk:
        table = pa.table({c: _to_arrow(v) for c, v in values.items()})
        first = rows[0] if rows else (problems[0].row or 1)
        chunk = RawChunk(table, first, lines.copy(), problems.copy(), rows=rows.copy())
        for v in values.values():
            v.clear()
        lines.clear()
        rows.clear()
        problems.clear()
        return chunk

    try:
        with source.open_binary() as fh:
            for number, row, raw in _json_lines(fh):
                obj = _parse_json_line(raw, number, row)
                if isinstance(obj, RowProblem):
                    problems.append(obj)
                    continue
                picked = [obj.get(c) for c in columns]
                bad = next(
                    (c for c, v in zip(columns, picked, strict=True) if _unencodable(v)), None
                )
                if bad is not None:
                    problems.append(
                        RowProblem(
                            row, bad, "text that is not valid Unicode (a lone surrogate)", number
                        )
                    )
                    continue
                for c, v in zip(columns, picked, strict=True):
                    values[c].append(v)
                lines.append(number)
                rows.append(row)
                if len(lines) >= chunk_rows:
                    yield flush()
    except (OSError, EOFError, zlib.error) as exc:
        raise InputFileError(source.path, f"read failed: {exc}") from exc
    if lines or problems:
        yield flush()


def _unencodable(value: Any) -> bool:
    """Whether a JSON value holds text UTF-8 cannot encode (lone surrogates like \\ud800)."""
    if isinstance(value, str):
        if value.isascii():
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, list):
        return any(_unencodable(v) for v in value)
    if isinstance(value, dict):
        return any(_unencodable(k) or _unencodable(v) for k, v in value.items())
    return False


def _to_arrow(values: list[Any]) -> pa.Array[Any]:
    """Arrow array of JSON values; mixed types are kept as text for the normalizer to judge."""
    try:
        array: pa.Array[Any] = pa.array(values)
        return array
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        pass
    try:  # text stays as it is; numbers, lists and objects as their JSON
        return pa.array(
            [None if v is None else v if isinstance(v, str) else json.dumps(v) for v in values],
            pa.string(),
        )
    except RecursionError:  # nested deeper than json.dumps goes: never a valid value
        return pa.array(
            [None if v is None else v if isinstance(v, str) else "[...]" for v in values],
            pa.string(),
        )


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
