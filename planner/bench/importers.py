"""Importing the benchmark results users already have into planner's :class:`BenchRun`.

Two tools' files, told apart by their content (never by their name):

- guidellm's ``benchmarks.json``, one run per entry of ``benchmarks``. Its top level says which
  report schema wrote it: ``metadata`` (``version`` 2), ``config``, ``benchmarks``,
  ``conclusions`` (guidellm 0.8); ``metadata`` (``version`` 1), ``args``, ``benchmarks``;
  ``args``, ``benchmarks``; or ``benchmarks`` alone (guidellm 0.2, whose runs keep their
  strategy under ``args`` and their model under ``worker``). guidellm's
  ``time_per_output_token_ms`` divides the time from request start to last token by all output
  tokens, so it *includes* TTFT; what vLLM and planner call TPOT is guidellm's
  ``inter_token_latency_ms``, used here for TPOT and ITL alike. Lengths are the means of the
  successful requests' token counts; throughputs are over the run's measured duration.
- ``vllm bench serve --save-result`` JSON: a flat object (several, one a line, under
  ``--append-result``). It records no lengths as such (they are totals / completed) and no
  hardware unless ``--metadata gpu=... num_gpus=... precision=...`` put those keys at its top
  level.

- GenAI-Perf's ``profile_export_genai_perf.json`` and AIPerf's ``profile_export_aiperf.json``
  (statistics under ``time_to_first_token``, ``inter_token_latency``, ``request_latency``, ...,
  and the load in ``input_config``) and inference-perf's ``stage_N_lifecycle_metrics.json``
  (with the ``config.yaml`` beside it, where there is one): read by
  :mod:`planner.bench.serving_exports`.

Options given to :func:`import_result` override what a file records (a file may name a machine
as ``CPU-2core`` where the catalog says ``H100-SXM``). Storing runs and calibration need the
GPU, engine, model and precision: where neither the file nor the options give one, the
:class:`UsageError` names the option to pass; only viewing the runs needs none of them. A file
that is not what it claims raises an :class:`InputFileError` naming the file and the JSON key
path that was wrong or missing, and what was expected there.

Limits: a file (unpacked, if gzipped) of at most :data:`MAX_FILE_BYTES` unless the caller
allows more; one JSON document a line is read a line at a time. Every number read has a
plausible range (a :class:`Bound`: latencies up to an hour, durations up to 30 days, ...):
NaN, infinities and negative values are always refused, and values above a range's top only
with ``allow_extreme`` (``--allow-extreme``), for a real run that exceeds it.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from functools import cached_property
from io import BufferedReader
from pathlib import Path
from typing import Any

from planner.bench.results import BenchRun, Load, RunInfo, Stats
from planner.common.text import MAX_SHOWN_CHARS, printable, shown
from planner.errors import InputFileError, RowProblem, UsageError

MAX_FILE_BYTES = 200 * 1024**2  # guidellm keeps every request: large, but not this large
GUIDELLM = "guidellm"
VLLM = "vllm bench serve"
GUIDELLM_SCHEMAS = (1, 2)  # metadata.version values this importer reads
# Keys a run's own metadata may carry (vLLM --metadata, guidellm labels or extras), per field.
METADATA_KEYS = {
    "gpu": ("gpu", "gpu_name", "hardware", "accelerator"),
    "gpu_count": ("num_gpus", "gpu_count", "gpus"),
    "engine": ("engine",),
    "precision": ("precision", "dtype", "quantization"),
    "tp": ("tp", "tensor_parallel_size", "tensor_parallel"),
}
_EXPECTED_FILE = (
    "a guidellm benchmarks.json, a `vllm bench serve --save-result` JSON file, a GenAI-Perf or "
    "AIPerf profile export (profile_export_genai_perf.json, profile_export_aiperf.json) or an "
    "inference-perf stage_N_lifecycle_metrics.json"
)
EXTREME_OPTION = "--allow-extreme"


@dataclass(frozen=True)
class Bound:
    """The plausible range of one kind of number in a result file (in the file's units)."""

    what: str  # with its unit: "a latency in ms"
    high: float
    low: float = 0.0
    above_low: bool = False  # the low end itself is refused
    whole: bool = False
    note: str = ""  # the top in words: "1 hour"

    @cached_property
    def expected(self) -> str:
        low = f"above {self.low:g}" if self.above_low else f"at least {self.low:g}"
        note = f" ({self.note})" if self.note else ""
        return f"{self.what}, {low} and at most {self.high:,.0f}{note}"

    def below(self, value: float) -> bool:
        return value < self.low or (self.above_low and value == self.low)


LATENCY_MS = Bound("a latency in ms", 3_600_000.0, note="1 hour")
LATENCY_S = Bound("a latency in s", 3_600.0, note="1 hour")
DURATION_S = Bound("the run's duration in seconds", 30 * 86_400.0, above_low=True, note="30 days")
THROUGHPUT = Bound("a throughput per second", 1e8)  # tokens or requests
REQUEST_RATE = Bound("a request rate per second", 1e7, above_low=True)
VLLM_RATE = Bound("a request rate per second (or 'inf')", REQUEST_RATE.high, above_low=True)
REQUESTS = Bound("a whole number of requests", 1e9, whole=True)
TOKENS = Bound("a whole number of tokens", 1e13, whole=True)
TOKENS_PER_REQUEST = Bound("a number of tokens, a request", 1e7)
CONCURRENCY = Bound("a whole number of requests in flight", 1e7, low=1, whole=True)
STREAMS = Bound("a whole number of streams", 1e7, low=1, whole=True)
CLIENTS = Bound("a number of clients", 1e7, above_low=True)
UNIX_TIME = Bound("a time in seconds since 1970", 4_102_444_800, note="the year 2100")
GPUS = Bound("a whole number of GPUs", 100_000, low=1, whole=True)


def _described(value: Any) -> str:
    """A JSON value as a message shows it: its kind, and short values themselves."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the text {shown(value)}"
    text = repr(value)  # a number
    return text if len(text) <= MAX_SHOWN_CHARS else f"{text[:MAX_SHOWN_CHARS]}..."


@dataclass(frozen=True)
class _At:
    """A value inside a JSON file, with the key path that reached it, for located errors."""

    file: Path
    value: Any
    where: str = ""
    line: int | None = None  # of a file that holds one document a line
    extreme: bool = False  # values above a Bound's top are accepted (--allow-extreme)

    def _child(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.where}[{key}]"
        return f"{self.where}.{key}" if self.where else key

    def _at(self, value: Any, key: str | int) -> _At:
        return _At(self.file, value, self._child(key), self.line, self.extreme)

    def fail(self, where: str, message: str) -> InputFileError:
        return InputFileError(self.file, RowProblem(None, None, f"{where}: {message}", self.line))

    def error(self, expected: str) -> InputFileError:
        got = _described(self.value)
        return self.fail(self.where or "top level", f"expected {expected}, got {got}")

    def get(self, key: str) -> _At | None:
        """The value under ``key`` of this object; ``None`` when it is missing or null."""
        if not isinstance(self.value, dict):
            raise self.error("an object")
        found = self.value.get(key)
        return None if found is None else self._at(found, key)

    def need(self, key: str, expected: str) -> _At:
        found = self.get(key)
        if found is None:
            raise self.fail(self._child(key), f"missing; expected {expected}")
        return found

    def items(self, expected: str) -> list[_At]:
        if not isinstance(self.value, list):
            raise self.error(expected)
        return [self._at(v, i) for i, v in enumerate(self.value)]

    def text(self, expected: str = "text") -> str:
        if not isinstance(self.value, str):
            raise self.error(expected)
        return self.value

    def number(self, expected: str, *, from_text: bool = False) -> float:
        """A finite number (``from_text``: also one written as text, as ``--metadata`` does)."""
        value = self.value
        if from_text and isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise self.error(expected) from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(expected)
        try:
            number = float(value)  # an integer of hundreds of digits is no float
        except OverflowError:
            raise self.error(expected) from None
        if not math.isfinite(number):
            raise self.error(expected)
        return number

    def within(self, bound: Bound, *, from_text: bool = False) -> float:
        """A number in ``bound``'s range; above it only where the caller allowed extremes."""
        expected = bound.expected
        value = self.number(expected, from_text=from_text)
        if bound.below(value) or (bound.whole and not value.is_integer()):
            raise self.error(expected)
        return self.checked(value, bound)

    def checked(self, value: float, bound: Bound, how: str = "") -> float:
        """``value`` (read here, or computed from here as ``how`` says) within ``bound``."""
        if not bound.below(value) and (value <= bound.high or self.extreme):
            return value
        where = self.where or "top level"
        got = f"{how} = {value:g}" if how else _described(self.value)
        hint = (
            f"; if the value is real, pass {EXTREME_OPTION}"
            if value > bound.high and math.isfinite(value)
            else ""
        )
        raise self.fail(where, f"expected {bound.expected}, got {got}{hint}")

    def count(self, bound: Bound, *, from_text: bool = False) -> int:
        return int(self.within(bound, from_text=from_text))

    def whole(self, expected: str, *, least: int = 0, from_text: bool = False) -> int:
        value = self.number(expected, from_text=from_text)
        if not value.is_integer() or value < least:
            raise self.error(expected)
        return int(value)


@dataclass(frozen=True)
class _Found:
    """What a file says about one run, before options fill the gaps."""

    run: dict[str, Any]  # BenchRun's measured fields
    tool: str
    tool_version: str | None
    source_format: str
    benchmark: int
    load: Load
    gpu: str | None = None
    gpu_count: int | None = None
    engine: str | None = None
    model: str | None = None
    precision: str | None = None
    tp: int | None = None
    label: str | None = None
    date: str | None = None
    prefix_hit_rate: float | None = None


def _size(count: int) -> str:
    if count % 1024**2 == 0:
        return f"{count // 1024**2:,} MiB"
    return f"{count:,} bytes"


def _too_big(path: Path, max_bytes: int, what: str, size: int | None = None) -> InputFileError:
    """The refusal of a file over the limit, with the option that raises it."""
    enough = -(-(size or 2 * max_bytes) // 1024**2)  # MiB, rounded up
    return InputFileError(
        path,
        f"{what} larger than {_size(max_bytes)}, the limit for a benchmark result file; "
        f"if it is one, pass --max-bytes with a larger size (such as --max-bytes {enough}M)",
    )


def check_result_file(path: Path, max_bytes: int = MAX_FILE_BYTES) -> None:
    """What can be told of a result file before reading it: that it is a regular file of at
    most ``max_bytes``."""
    if max_bytes < 1:
        raise UsageError(f"--max-bytes {max_bytes}: expected a size of at least 1 byte")
    if path.is_dir():
        raise InputFileError(path, f"is a folder; expected {_EXPECTED_FILE}")
    if not path.exists():
        raise InputFileError(path, "file not found")
    if not path.is_file():
        raise InputFileError(path, f"not a regular file; expected {_EXPECTED_FILE}")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputFileError(path, f"cannot be read ({exc.strerror or exc})") from None
    if size > max_bytes:
        raise _too_big(path, max_bytes, f"is {size:,} bytes,", size)


@contextmanager
def _read_errors(path: Path) -> Iterator[None]:
    try:
        yield
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputFileError(path, f"not a readable gzip file ({exc or 'cut short'})") from None
    except OSError as exc:
        raise InputFileError(path, f"cannot be read ({exc.strerror or exc})") from None


class _Reader:
    """A result file's bytes (unpacked when gzipped), never more than ``max_bytes`` of them."""

    def __init__(
        self, path: Path, max_bytes: int, stream: gzip.GzipFile | BufferedReader, gzipped: bool
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.stream = stream
        self.gzipped = gzipped
        self.taken = 0

    @classmethod
    @contextmanager
    def opened(cls, path: Path, max_bytes: int) -> Iterator[_Reader]:
        with _read_errors(path):
            with path.open("rb") as probe:
                gzipped = probe.read(2) == b"\x1f\x8b"
            with gzip.open(path, "rb") if gzipped else path.open("rb") as stream:
                yield cls(path, max_bytes, stream, gzipped)

    def errors(self) -> AbstractContextManager[None]:
        return _read_errors(self.path)

    def _counted(self, data: bytes) -> bytes:
        self.taken += len(data)
        if self.taken > self.max_bytes:
            raise _too_big(self.path, self.max_bytes, "unpacked, it is")
        return data

    def line(self) -> bytes:
        with self.errors():
            return self._counted(self.stream.readline(self.max_bytes - self.taken + 1))

    def whole(self) -> bytes:
        """All of the file, from its start."""
        with self.errors():
            self.stream.seek(0)
            self.taken = 0
            return self._counted(self.stream.read(self.max_bytes + 1))


def _line_document(reader: _Reader) -> Any:
    """The JSON document the next line holds; ``_NOT_ONE`` when it holds none (it is blank, or
    the start of a document written over several lines). Its bytes go before it is parsed."""
    try:
        text = reader.line().decode("utf-8-sig")
        return json.loads(text) if text.strip() else _NOT_ONE
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError included
        return _NOT_ONE


_NOT_ONE = object()


def _documents(path: Path, max_bytes: int) -> Iterator[tuple[Any, int | None]]:
    """The file's JSON documents, as they are read: one (with no line number), or one a line
    (``--append-result``), each parsed as its line is read; gzip is read too."""
    check_result_file(path, max_bytes)
    with _Reader.opened(path, max_bytes) as reader:
        first = _line_document(reader)
        if first is _NOT_ONE:  # a document over several lines, or no document at all
            yield from _parsed(path, reader)
            return
        number, line = 2, reader.line()
        while line and not line.strip():
            number, line = number + 1, reader.line()
        if not line:  # the whole file was one line
            yield first, None
            return
        yield first, 1
        while line:
            if line.strip():
                yield _parsed_line(path, line, number), number
            number, line = number + 1, reader.line()


def _parsed_line(path: Path, raw: bytes, number: int) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        problem = RowProblem(None, None, "not UTF-8 text; expected JSON", number)
    except json.JSONDecodeError as exc:
        problem = RowProblem(
            None, None, f"not valid JSON ({exc.msg} at column {exc.colno})", number
        )
    except RecursionError:
        problem = RowProblem(None, None, "JSON nested too deeply", number)
    except ValueError as exc:  # a number with more digits than Python converts
        problem = RowProblem(None, None, f"not a benchmark result ({exc})", number)
    raise InputFileError(path, problem)


def _parsed(path: Path, reader: _Reader) -> list[tuple[Any, int | None]]:
    """The documents of a whole file read at once: one, or one a line. The bytes go once they
    are text, before the text is parsed."""
    raw = reader.whole()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line_number = raw[: exc.start].count(b"\n") + 1
        problem = RowProblem(None, None, "not UTF-8 text; expected JSON", line_number)
        raise InputFileError(path, problem) from None
    del raw
    if not text.strip():
        raise InputFileError(path, f"empty file; expected {_EXPECTED_FILE}")
    try:
        return [(json.loads(text), None)]
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            problem = RowProblem(
                None,
                None,
                f"not valid JSON ({exc.msg} at column {exc.colno}); expected {_EXPECTED_FILE}",
                exc.lineno,
            )
            raise InputFileError(path, problem) from None
    except RecursionError:
        raise InputFileError(path, "JSON nested too deeply to be a benchmark result") from None
    except ValueError as exc:  # a number with more digits than Python converts
        raise InputFileError(path, f"not a benchmark result ({exc})") from None
    # several documents (after a first line that held none): one a line
    return [
        (_parsed_line(path, line.encode(), number), number)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]


def import_result(
    path: Path,
    *,
    gpu: str | None = None,
    engine: str | None = None,
    model: str | None = None,
    precision: str | None = None,
    tp: int | None = None,
    needed_for: Sequence[str] = ("calibration",),
    max_bytes: int = MAX_FILE_BYTES,
    allow_extreme: bool = False,
) -> list[BenchRun]:
    """The runs a guidellm ``benchmarks.json`` or ``vllm bench serve`` result file holds, with
    the options filling in (and overriding) what the file records about the deployment.

    ``needed_for`` names what the deployment (GPU, engine, model, precision) is needed for
    (``the store``, ``--out-csv``, ``calibration``); a run that lacks one is refused as soon as
    it is read, naming it and the option that gives it. Empty: the runs are only viewed, and
    may lack them. ``max_bytes`` bounds the file (unpacked); ``allow_extreme`` accepts values
    above their plausible range (see :class:`Bound`)."""
    if tp is not None and not GPUS.low <= tp <= GPUS.high:
        raise UsageError(f"--tp {tp}: expected {GPUS.expected}")
    options = {"gpu": gpu, "engine": engine, "model": model, "precision": precision}
    runs: list[BenchRun] = []
    for index, (document, line) in enumerate(_documents(path, max_bytes)):
        root = _At(path, document, line=line, extreme=allow_extreme)
        found: list[_Found]
        if isinstance(document, dict) and "benchmarks" in document and line is None:
            found = _guidellm(root)
        elif isinstance(document, dict) and "runs" in document and "planner" in document:
            found = _planner_sweep(root)
        elif isinstance(document, dict) and "completed" in document and "duration" in document:
            found = [_vllm(root, index)]
        elif (kind := _serving_export_kind(document)) is not None:
            found = [_read_export_document(root, kind, max_bytes)]
        else:
            problem = (
                f"not a result file planner reads: expected {_EXPECTED_FILE} (a top-level "
                "'benchmarks' list; 'completed', 'duration' and 'mean_ttft_ms'; "
                "'time_to_first_token' or 'request_latency' statistics; or 'load_summary' and "
                "'successes')"
            )
            raise InputFileError(path, RowProblem(None, None, problem, line))
        del document, root  # a large report goes once its runs are read
        runs += [_finish(path, f, options, tp, needed_for) for f in found]
    return runs


def _serving_export_kind(document: Any) -> str | None:
    """Which serving tool's export a JSON document is, by its keys: ``genai-perf`` (GenAI-Perf
    and AIPerf: per-metric statistics objects at the top level), ``inference-perf`` (a stage's
    lifecycle metrics), or None."""
    if not isinstance(document, dict):
        return None
    if "load_summary" in document and "successes" in document:
        return "inference-perf"
    if any(
        isinstance(document.get(key), dict)
        for key in ("time_to_first_token", "request_latency", "inter_token_latency")
    ):
        return "genai-perf"
    return None


def _finish(
    path: Path,
    found: _Found,
    options: dict[str, str | None],
    tp: int | None,
    needed_for: Sequence[str],
) -> BenchRun:
    """The run, with options overriding the file; what ``needed_for`` needs and neither gives
    is a :class:`UsageError` naming the options to pass."""
    chosen = {
        key: (value.strip() if value and value.strip() else None) or getattr(found, key)
        for key, value in options.items()
    }
    missing = [key for key, value in chosen.items() if not value]
    if missing and needed_for:
        what = {"gpu": "GPU", "engine": "engine", "model": "model", "precision": "precision"}
        lacking = _listed([what[k] for k in missing])
        verb = "need" if len(needed_for) > 1 else "needs"
        view = ", or --no-store to only view them" if list(needed_for) == ["the store"] else ""
        raise UsageError(
            f"{printable(str(path))}: the file does not record the {lacking} of "
            f"its runs ({found.source_format}), and {_listed(list(needed_for))} {verb} them; "
            f"pass {_listed([f'--{k}' for k in missing])}{view} (catalog names: `planner "
            "catalog gpus`, `planner catalog engines`, `planner catalog models`, `planner "
            "catalog precisions`)"
        )
    tp_chosen = tp or found.tp or found.gpu_count or 1
    info = RunInfo(
        tool=found.tool,
        tool_version=found.tool_version,
        source_file=str(path),
        source_format=found.source_format,
        benchmark=found.benchmark,
        load=found.load,
        gpu=chosen["gpu"],
        gpu_count=found.gpu_count or tp_chosen,
        engine=chosen["engine"],
        model=chosen["model"],
        precision=chosen["precision"],
        tp=tp_chosen,
        label=found.label,
        date=found.date,
        prefix_hit_rate=found.prefix_hit_rate,
    )
    return BenchRun(**found.run, info=info)


def _planner_sweep(root: _At) -> list[_Found]:
    """A ``planner bench run --pattern sweep --out`` file: one run per stage, each already in
    :class:`BenchRun`'s own form."""
    found = []
    for index, stage in enumerate(root.need("runs", "a list of runs").items("a list of runs")):
        _check_summary(stage)
        try:
            run = BenchRun.from_dict(stage.value)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise stage.fail(stage.where, f"not a planner bench run result ({exc!r})") from None
        info = run.info
        found.append(
            _Found(
                run={f.name: getattr(run, f.name) for f in fields(run) if f.name != "info"},
                tool=info.tool,
                tool_version=info.tool_version,
                source_format=f"{info.tool} sweep JSON",
                benchmark=index,
                load=info.load,
                gpu=info.gpu,
                gpu_count=info.gpu_count,
                engine=info.engine,
                model=info.model,
                precision=info.precision,
                tp=info.tp,
                label=info.label,
                date=info.date,
            )
        )
    return found


def _summary_bound(key: str) -> Bound | None:
    """The range of one of a planner result's summary numbers, by its key."""
    if key.endswith("_ms"):
        return LATENCY_MS
    if key in ("completed", "failed"):
        return REQUESTS
    if key == "duration":
        return DURATION_S
    if key.endswith("_throughput"):
        return THROUGHPUT
    if key in ("total_input_tokens", "total_output_tokens"):
        return TOKENS
    if key in ("input_len", "output_len"):
        return TOKENS_PER_REQUEST
    return None


def _check_summary(stage: _At) -> None:
    """Every summary number of a planner result within its range, and the GPUs and load of
    its ``planner`` block."""
    if not isinstance(stage.value, dict):
        raise stage.error("a planner bench run result (an object)")
    for key in stage.value:
        bound = _summary_bound(str(key))
        node = stage.get(str(key)) if bound is not None else None
        if bound is not None and node is not None:
            node.within(bound)
    info = stage.get("planner")
    if info is None or not isinstance(info.value, dict):
        return  # BenchRun.from_dict says what is wrong
    hardware = info.get("hardware")
    load = info.get("load")
    kind = load.get("kind") if load is not None else None
    for node, bound in (
        (info.get("tp"), GPUS),
        (hardware.get("count") if hardware is not None else None, GPUS),
        (
            load.get("value") if load is not None else None,
            REQUEST_RATE if kind is not None and kind.value == "qps" else CLIENTS,
        ),
        (load.get("max_concurrency") if load is not None else None, CONCURRENCY),
    ):
        if node is not None:
            node.within(bound)


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _metadata(*sources: _At | None) -> dict[str, Any]:
    """Hardware and deployment keys a run's own metadata gives (first source wins)."""
    out: dict[str, Any] = {}
    for source in sources:
        if source is None or not isinstance(source.value, dict):
            continue
        for field, keys in METADATA_KEYS.items():
            if field in out:
                continue
            for key in keys:
                node = source.get(key)
                if node is None:
                    continue
                if field in ("gpu_count", "tp"):
                    out[field] = node.count(GPUS, from_text=True)
                elif isinstance(node.value, str) and node.value.strip():
                    out[field] = node.value.strip()
                elif not isinstance(node.value, str):
                    raise node.error(f"the {field.replace('_', ' ')} as text")
                if field in out:
                    break
    return out


# --- guidellm ------------------------------------------------------------------------------


def _guidellm(root: _At) -> list[_Found]:
    metadata = root.get("metadata")
    version: str | None = None
    if metadata is not None:
        expected = "guidellm report schema version 1 or 2 (the versions planner reads)"
        version_node = metadata.need("version", expected)
        schema = version_node.whole(expected)
        if schema not in GUIDELLM_SCHEMAS:
            raise version_node.error(expected)
        shape = "metadata, config, benchmarks" if schema == 2 else "metadata, args, benchmarks"
        source_format = f"guidellm benchmarks.json (schema {schema}: {shape})"
        found_version = metadata.get("guidellm_version")
        version = found_version.text("the guidellm version as text") if found_version else None
    elif root.get("args") is not None:
        source_format = "guidellm benchmarks.json (args, benchmarks; before schema versions)"
    else:
        source_format = "guidellm benchmarks.json (benchmarks only; guidellm 0.2)"
    benchmarks = root.need("benchmarks", "a list of benchmarks").items("a list of benchmarks")
    if not benchmarks:
        raise root.fail("benchmarks", "empty; the file holds no benchmark run")
    # the model and labels the whole report was run with, where its schema records them
    config = root.get("config")
    spec = config.get("spec") if config else None
    spec_backend = spec.get("backend") if spec else None
    args = root.get("args")
    report_model = _text_or_none(spec_backend, "model") or _text_or_none(args, "model")
    labels = config.get("metadata") if config else None
    labels = labels.get("labels") if labels else None
    return [
        _guidellm_run(bench, index, source_format, version, report_model, labels)
        for index, bench in enumerate(benchmarks)
    ]


def _text_or_none(node: _At | None, key: str) -> str | None:
    found = node.get(key) if node is not None else None
    if found is None:
        return None
    return found.text(f"{key} as text") or None


def _guidellm_run(
    bench: _At,
    index: int,
    source_format: str,
    version: str | None,
    report_model: str | None,
    labels: _At | None,
) -> _Found:
    kind = bench.get("type_")
    if kind is not None and kind.value != "generative_benchmark":
        raise kind.error("'generative_benchmark' (a text-generation run)")
    metrics = bench.need("metrics", "the run's metrics")
    completed, failed = _guidellm_totals(bench, metrics)
    duration = _guidellm_duration(bench)
    has_requests = completed > 0

    def stats(name: str, unit: str = "ms") -> Stats:
        return _guidellm_stats(metrics, name, unit) if has_requests else Stats()

    prompt = metrics.need("prompt_token_count", "the prompt token counts")
    output = metrics.need("output_token_count", "the output token counts")
    input_len, total_input = _guidellm_tokens(prompt, completed)
    output_len, total_output = _guidellm_tokens(output, completed)
    tpot = stats("inter_token_latency_ms")  # time_per_output_token_ms includes TTFT
    where = bench.get("duration") or bench.need("end_time", "the run's end time")
    for count, of in (
        (completed, "requests"),
        (total_output, "output tokens"),
        ((total_input or 0) + (total_output or 0), "input and output tokens"),
    ):
        if count is not None:
            where.checked(count / duration, THROUGHPUT, f"{of} / duration")
    run = {
        "ttft": stats("time_to_first_token_ms"),
        "tpot": tpot,
        "itl": tpot,
        "e2el": stats("request_latency", "s"),  # seconds in guidellm
        "completed": completed,
        "failed": failed,
        "duration": duration,
        "request_throughput": completed / duration,
        "output_throughput": total_output / duration if total_output is not None else None,
        "total_token_throughput": (
            (total_input + total_output) / duration
            if total_input is not None and total_output is not None
            else None
        ),
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "input_len": input_len,
        "output_len": output_len,
    }
    config = bench.get("config")  # guidellm >= 0.4; 0.2 keeps the strategy under args
    strategy_parent = config or bench.need("args", "the run's config or args (its strategy)")
    load = _guidellm_load(strategy_parent.need("strategy", "the run's scheduling strategy"))
    backend = config.get("backend") if config else None
    worker = bench.get("worker")
    model = (
        _text_or_none(backend, "model") or _text_or_none(worker, "backend_model") or report_model
    )
    found = _metadata(labels, bench.get("extras"))
    start = bench.get("start_time")
    started = start.within(UNIX_TIME) if start is not None else None
    return _Found(
        run=run,
        tool=GUIDELLM,
        tool_version=version,
        source_format=source_format,
        benchmark=index,
        load=load,
        model=model,
        date=_iso_time(started),
        **found,
    )


def _iso_time(seconds: float | None) -> str | None:
    """A Unix time as ISO 8601 (UTC); None for none, or one no calendar holds."""
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat() if seconds else None
    except (OverflowError, OSError, ValueError):
        return None


def _guidellm_totals(bench: _At, metrics: _At) -> tuple[int, int]:
    """Successful and errored requests: under metrics (>= 0.4), the run (0.2) or the
    scheduler's counts."""
    scheduler = bench.get("scheduler_metrics")
    for node in (
        metrics.get("request_totals"),
        bench.get("request_totals"),
        bench.get("total_count"),
        scheduler.get("requests_made") if scheduler else None,
    ):
        if node is not None:
            expected = REQUESTS.expected
            successful = node.need("successful", expected).count(REQUESTS)
            errored = node.need("errored", expected).count(REQUESTS)
            return successful, errored
    raise bench.fail(
        bench.where,
        "missing request counts; expected metrics.request_totals (guidellm 0.4 and later), "
        "request_totals or total_count (guidellm 0.2)",
    )


def _guidellm_duration(bench: _At) -> float:
    duration = bench.get("duration")
    if duration is not None:
        return duration.within(DURATION_S)
    start = bench.need("start_time", "the run's start time (or its duration)")
    end = bench.need("end_time", "the run's end time (or its duration)")
    value = end.number("a time in seconds") - start.number("a time in seconds")
    if value <= 0:
        raise end.error("an end time after start_time")
    return end.checked(value, DURATION_S, "end_time - start_time")


def _guidellm_stats(metrics: _At, name: str, unit: str) -> Stats:
    """A distribution over the successful requests (``metrics.<name>.successful``), recorded in
    ``unit`` (ms or s), in ms."""
    scale = 1000.0 if unit == "s" else 1.0
    node = metrics.need(name, f"the {name} distribution").need(
        "successful", "the distribution over successful requests"
    )
    bound = LATENCY_S if unit == "s" else LATENCY_MS

    def value(parent: _At | None, key: str) -> float | None:
        found = parent.get(key) if parent is not None else None
        return None if found is None else found.within(bound) * scale

    mean = node.need("mean", bound.expected).within(bound) * scale
    percentiles = node.get("percentiles")
    median = value(node, "median")
    p50 = value(percentiles, "p50")  # guidellm 0.2 has no p50: its median is the same
    return Stats(
        mean=mean,
        median=median if median is not None else p50,
        std=value(node, "std_dev"),
        p50=p50 if p50 is not None else median,
        p90=value(percentiles, "p90"),
        p99=value(percentiles, "p99"),
    )


def _guidellm_tokens(counts: _At, completed: int) -> tuple[float | None, int | None]:
    """Mean and total tokens of the successful requests."""
    if completed == 0:
        return None, 0
    node = counts.need("successful", "the token counts of successful requests")
    mean = node.need("mean", TOKENS_PER_REQUEST.expected).within(TOKENS_PER_REQUEST)
    total = node.get("total_sum")
    bound = Bound("a number of tokens", TOKENS.high)  # a sum of means need not be whole
    total_tokens = total.within(bound) if total is not None else mean * completed
    return mean, round(total_tokens)


def _guidellm_load(strategy: _At) -> Load:
    kind_node = strategy.need("type_", "the strategy's type")
    kind = kind_node.text("the strategy's type as text")
    if kind == "synchronous":
        return Load("concurrency", 1.0)
    if kind == "concurrent":
        streams = strategy.get("streams") or strategy.need("max_concurrency", "the streams")
        return Load("concurrency", float(streams.count(STREAMS)))
    if kind == "throughput":
        cap = strategy.get("max_concurrency")
        most = cap.count(CONCURRENCY) if cap else None
        return Load("max", None, max_concurrency=most)
    if kind in ("constant", "poisson"):
        rate = strategy.need("rate", "the request rate per second").within(REQUEST_RATE)
        cap = strategy.get("max_concurrency")
        most = cap.count(CONCURRENCY) if cap else None
        return Load("qps", rate, arrival=kind, max_concurrency=most)
    raise kind_node.error(
        "synchronous, concurrent, throughput, constant or poisson (the loads calibration knows)"
    )


# --- vllm bench serve ----------------------------------------------------------------------


def _vllm(root: _At, index: int) -> _Found:
    completed = root.need("completed", REQUESTS.expected).count(REQUESTS)
    failed_node = root.get("failed")
    prompts = root.get("num_prompts")
    if failed_node is not None:
        failed = failed_node.count(REQUESTS)
    elif prompts is not None:
        failed = max(0, prompts.count(REQUESTS) - completed)
    else:
        failed = 0
    duration_node = root.need("duration", DURATION_S.expected)
    duration = duration_node.within(DURATION_S)
    total_input = root.need("total_input_tokens", TOKENS.expected).count(TOKENS)
    total_output = root.need("total_output_tokens", TOKENS.expected).count(TOKENS)
    if completed:
        for key, total in (
            ("total_input_tokens", total_input),
            ("total_output_tokens", total_output),
        ):
            node = root.need(key, TOKENS.expected)
            node.checked(total / completed, TOKENS_PER_REQUEST, f"{key} / completed")

    def throughput(key: str, computed: float) -> float:
        node = root.get(key)
        if node is not None:
            return node.within(THROUGHPUT)
        return duration_node.checked(computed, THROUGHPUT, f"{key} computed over the duration")

    run = {
        "ttft": _vllm_stats(root, "ttft"),
        "tpot": _vllm_stats(root, "tpot"),
        "itl": _vllm_stats(root, "itl"),
        "e2el": _vllm_stats(root, "e2el"),
        "completed": completed,
        "failed": failed,
        "duration": duration,
        "request_throughput": throughput("request_throughput", completed / duration),
        "output_throughput": throughput("output_throughput", total_output / duration),
        "total_token_throughput": throughput(
            "total_token_throughput", (total_input + total_output) / duration
        ),
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "input_len": total_input / completed if completed else None,
        "output_len": total_output / completed if completed else None,
    }
    label = root.get("label")
    date = root.get("date")
    return _Found(
        run=run,
        tool=VLLM,
        tool_version=_text_or_none(root, "vllm_version"),
        source_format="vllm bench serve --save-result JSON",
        benchmark=index,
        load=_vllm_load(root),
        model=_text_or_none(root, "model_id"),
        label=label.text("the label as text") if label else None,
        date=str(date.value) if date else None,
        **_metadata(root),
    )


def _vllm_stats(root: _At, latency: str) -> Stats:
    """``{mean,median,std,p50,p90,p99}_<latency>_ms``; vLLM writes the percentiles asked for
    (``--metric-percentiles``, default 99) of the metrics asked for (``--percentile-metrics``)."""
    values: dict[str, float | None] = {}
    for statistic in ("mean", "median", "std", "p50", "p90", "p99"):
        node = root.get(f"{statistic}_{latency}_ms")
        values[statistic] = node.within(LATENCY_MS) if node is not None else None
    values["median"] = values["median"] if values["median"] is not None else values["p50"]
    values["p50"] = values["p50"] if values["p50"] is not None else values["median"]
    return Stats(**values)


def _vllm_load(root: _At) -> Load:
    """``--request-rate`` (``inf``: all at once) with ``--max-concurrency`` (a client cap)."""
    rate_node = root.need("request_rate", "the request rate (a number, or 'inf')")
    cap_node = root.get("max_concurrency")
    cap = cap_node.count(CONCURRENCY) if cap_node else None
    text = str(rate_node.value).strip().lower()
    if text in ("inf", "infinity"):
        return Load("concurrency", float(cap)) if cap else Load("max")
    rate = rate_node.within(VLLM_RATE, from_text=True)
    burstiness = root.get("burstiness")
    gamma = burstiness is not None and burstiness.number("a number") != 1.0
    return Load("qps", rate, arrival="gamma" if gamma else "poisson", max_concurrency=cap)


# --- GenAI-Perf, AIPerf and inference-perf exports ---------------------------------------

GENAI_PERF = "genai-perf"
AIPERF = "aiperf"
INFERENCE_PERF = "inference-perf"
MAX_CONFIG_BYTES = 1024 * 1024  # inference-perf's config.yaml: a page of settings
# milliseconds per unit of a statistic's "unit" (GenAI-Perf once wrote nanoseconds)
TIME_UNITS = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3, "sec": 1e3}
STATISTICS = {
    "mean": "avg",
    "median": "p50",
    "std": "std",
    "p50": "p50",
    "p90": "p90",
    "p99": "p99",
}
LIFECYCLE_STATISTICS = {
    "mean": "mean",
    "median": "median",
    "p50": "median",
    "p90": "p90",
    "p99": "p99",
}
PREFIX_BLOCK_TOKENS = 16  # vLLM's KV block: a repeated prompt hits all of it but its last block
ENGINES = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm", "tensorrt-llm": "trtllm"}
_STAGE = re.compile(r"stage_(\d+)_lifecycle_metrics")


def _read_export_document(root: _At, kind: str, max_bytes: int) -> _Found:
    """The run one export document holds (``kind`` as ``importers._serving_export_kind`` told
    it); ``max_bytes`` also bounds a ``config.yaml`` read beside it."""
    if kind == INFERENCE_PERF:
        return _inference_perf(root, min(max_bytes, MAX_CONFIG_BYTES))
    return _genai_perf(root)


# --- GenAI-Perf and AIPerf -----------------------------------------------------------------


def _unit_scale(node: _At, default: str = "ms") -> float:
    unit = node.get("unit")
    text = unit.text("a time unit (ms, us, ns or s)").strip().lower() if unit else default
    if text not in TIME_UNITS:
        raise unit.error("a time unit (ms, us, ns or s)") if unit else node.error("a unit")
    return TIME_UNITS[text]


def _stats(
    root: _At, key: str, names: dict[str, str], scale: float | None = None, need: bool = False
) -> Stats:
    """A latency's statistics (``names``: Stats field -> the file's key), in ms."""
    node = root.get(key) if not need else root.need(key, f"the {key} statistics")
    if node is None:
        return Stats()
    if not isinstance(node.value, dict):
        raise node.error(f"an object of statistics ({', '.join(sorted(set(names.values())))})")
    factor = scale if scale is not None else _unit_scale(node)
    mean_key = names["mean"]
    node.need(mean_key, f"the mean of {key}")
    values: dict[str, float | None] = {}
    for field, name in names.items():
        found = node.get(name)
        if found is None:
            values[field] = None
            continue
        raw = found.number(LATENCY_MS.expected, from_text=True)
        values[field] = found.checked(raw * factor, LATENCY_MS, f"{name} in ms")
    return Stats(**values)


def _avg(root: _At, key: str, bound: Bound) -> float | None:
    """A single statistic: ``{"avg": x, ...}`` (or a bare number, as AIPerf writes a few)."""
    node = root.get(key)
    if node is None:
        return None
    if isinstance(node.value, dict):
        found = node.get("avg")
        return None if found is None else found.within(bound, from_text=True)
    return node.within(bound, from_text=True)


def _genai_perf(root: _At) -> _Found:
    config = root.get("input_config")
    if config is not None and not isinstance(config.value, dict):
        raise config.error("an object of the run's settings (its concurrency or request rate)")
    if config is None:
        raise root.fail(
            "input_config",
            "missing; expected the run's settings (its concurrency or request rate) as "
            "GenAI-Perf and AIPerf write them beside the statistics",
        )
    aiperf = config.get("loadgen") is not None  # GenAI-Perf has no loadgen, flat or nested
    tool = AIPERF if aiperf else GENAI_PERF
    load = _aiperf_load(config) if aiperf else _genai_perf_load(config)
    ttft = _stats(root, "time_to_first_token", STATISTICS, need=True)
    tpot = _stats(root, "inter_token_latency", STATISTICS)
    e2el = _stats(root, "request_latency", STATISTICS)
    input_len = _avg(root, "input_sequence_length", TOKENS_PER_REQUEST)
    output_len = _avg(root, "output_sequence_length", TOKENS_PER_REQUEST)
    if input_len is None or output_len is None:
        configured_in, configured_out = _configured_lengths(config, aiperf)
        input_len = input_len if input_len is not None else configured_in
        output_len = output_len if output_len is not None else configured_out
    duration = _avg(root, "benchmark_duration", DURATION_S)
    request_rate = _avg(root, "request_throughput", THROUGHPUT)
    completed = _completed(root, request_rate, duration)
    if duration is None and completed and request_rate:
        duration = completed / request_rate
    failed = _avg(root, "error_request_count", REQUESTS)
    total_input = _total(root, "total_isl")
    total_output = _total(root, "total_osl") or _total(root, "total_output_tokens")
    if completed:  # AIPerf's totals, where no per-request mean was written
        input_len = (
            input_len if input_len is not None else _per_request(root, total_input, completed)
        )
        output_len = (
            output_len if output_len is not None else _per_request(root, total_output, completed)
        )
    output_rate = _avg(root, "output_token_throughput", THROUGHPUT)
    if output_rate is None and total_output and duration:
        output_rate = total_output / duration
    run = {
        "ttft": ttft,
        "tpot": tpot,
        "itl": tpot,
        "e2el": e2el,
        "completed": completed,
        "failed": int(failed or 0),
        "duration": duration or 0.0,
        "request_throughput": request_rate,
        "output_throughput": output_rate,
        "total_token_throughput": _avg(root, "total_token_throughput", THROUGHPUT),
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "input_len": input_len,
        "output_len": output_len,
    }
    gpu, gpus = _telemetry_gpu(root.get("telemetry_data"))
    start = root.get("start_time")
    return _Found(
        run=run,
        tool=tool,
        tool_version=None,
        source_format=(
            "AIPerf profile_export_aiperf.json"
            if aiperf
            else "GenAI-Perf profile_export_genai_perf.json"
        ),
        benchmark=0,
        load=load,
        gpu=gpu,
        gpu_count=gpus,
        model=_model(config, aiperf),
        date=start.value if start is not None and isinstance(start.value, str) else None,
    )


def _completed(root: _At, request_rate: float | None, duration: float | None) -> int:
    """Requests that completed: AIPerf's ``request_count``, else a statistic's ``count``, else
    throughput x duration; 0 where the file does not say (GenAI-Perf's older exports)."""
    count = _avg(root, "request_count", REQUESTS)
    if count is not None:
        return int(count)
    for key in ("request_latency", "time_to_first_token"):
        node = root.get(key)
        found = node.get("count") if node is not None and isinstance(node.value, dict) else None
        if found is not None:
            return found.count(REQUESTS, from_text=True)
    if request_rate and duration:
        return round(request_rate * duration)
    return 0


def _total(root: _At, key: str) -> int | None:
    value = _avg(root, key, Bound("a number of tokens", TOKENS.high))
    return None if value is None else round(value)


def _per_request(root: _At, total: int | None, completed: int) -> float | None:
    if total is None:
        return None
    return root.checked(total / completed, TOKENS_PER_REQUEST, "total tokens / request_count")


def _number_or_none(node: _At | None, key: str, bound: Bound) -> float | None:
    found = node.get(key) if node is not None else None
    return None if found is None else found.within(bound, from_text=True)


def _genai_perf_load(config: _At) -> Load:
    """GenAI-Perf's ``--concurrency`` (closed loop) or ``--request-rate`` (perf_analyzer sends
    at constant intervals unless told otherwise), from its flat arguments or its nested
    configuration (``perf_analyzer.stimulus``)."""
    analyzer = config.get("perf_analyzer")
    stimulus = analyzer.get("stimulus") if analyzer is not None else None
    source = stimulus if stimulus is not None else config
    rate = _number_or_none(source, "request_rate", REQUEST_RATE)
    if rate is not None:
        return Load("qps", rate, arrival="constant")
    clients = _number_or_none(source, "concurrency", CONCURRENCY)
    if clients is not None:
        return Load("concurrency", clients)
    raise source.fail(
        source.where or "input_config",
        "records neither a concurrency nor a request rate; expected 'concurrency' or "
        "'request_rate' (the load the run offered)",
    )


def _aiperf_load(config: _At) -> Load:
    """AIPerf's ``loadgen``: a request rate (Poisson unless its mode says constant) with an
    optional client cap, or a concurrency alone (a closed loop)."""
    loadgen = config.need("loadgen", "the run's load generator settings")
    rate = _number_or_none(loadgen, "request_rate", REQUEST_RATE)
    clients = _number_or_none(loadgen, "concurrency", CONCURRENCY)
    if rate is not None:
        mode_node = loadgen.get("request_rate_mode") or loadgen.get("arrival_pattern")
        mode = mode_node.text("the arrival pattern as text").lower() if mode_node else "poisson"
        arrival = "constant" if "constant" in mode else "gamma" if "gamma" in mode else "poisson"
        cap = int(clients) if clients is not None else None
        return Load("qps", rate, arrival=arrival, max_concurrency=cap)
    if clients is not None:
        return Load("concurrency", clients)
    raise loadgen.fail(
        loadgen.where,
        "records neither a concurrency nor a request rate; expected 'concurrency' or "
        "'request_rate' (the load the run offered)",
    )


def _configured_lengths(config: _At, aiperf: bool) -> tuple[float | None, float | None]:
    """The mean lengths a run asked for, where it did not record what it sent."""
    if aiperf:
        inputs = config.get("input")
        prompt = inputs.get("prompt") if inputs is not None else None
        in_node = prompt.get("input_tokens") if prompt is not None else None
        out_node = prompt.get("output_tokens") if prompt is not None else None
        return (
            _number_or_none(in_node, "mean", TOKENS_PER_REQUEST),
            _number_or_none(out_node, "mean", TOKENS_PER_REQUEST),
        )
    inputs = config.get("input")
    synthetic = inputs.get("synthetic_tokens") if inputs is not None else None
    outputs = inputs.get("output_tokens") if inputs is not None else None
    input_len = _number_or_none(synthetic, "mean", TOKENS_PER_REQUEST)
    output_len = _number_or_none(outputs, "mean", TOKENS_PER_REQUEST)
    if input_len is None:
        input_len = _number_or_none(config, "synthetic_input_tokens_mean", TOKENS_PER_REQUEST)
    if output_len is None:
        node = config.get("output_tokens_mean")  # -1: the server's own length
        value = node.number("a number of tokens", from_text=True) if node is not None else -1.0
        output_len = value if value > 0 else None
    return input_len, output_len


def _model(config: _At, aiperf: bool) -> str | None:
    """The served model's name as the run recorded it (the first, if several)."""
    endpoint = config.get("endpoint")
    holders = [endpoint, config] if aiperf else [config, endpoint]
    for holder in holders:
        if holder is None or not isinstance(holder.value, dict):
            continue
        for key in ("model_names", "model"):
            found = holder.get(key)
            if found is None:
                continue
            value = found.value[0] if isinstance(found.value, list) and found.value else found.value
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def _telemetry_gpu(telemetry: _At | None) -> tuple[str | None, int | None]:
    """The GPU AIPerf's telemetry names (``gpu_name``) and how many it saw, where it ran."""
    endpoints = telemetry.get("endpoints") if telemetry is not None else None
    if endpoints is None or not isinstance(endpoints.value, dict):
        return None, None
    names = [
        gpu.get("gpu_name")
        for host in endpoints.value.values()
        if isinstance(host, dict) and isinstance(host.get("gpus"), dict)
        for gpu in host["gpus"].values()
        if isinstance(gpu, dict)
    ]
    texts = [n.strip() for n in names if isinstance(n, str) and n.strip()]
    return (texts[0], len(texts)) if texts else (None, None)


# --- inference-perf ------------------------------------------------------------------------


def _read_config(path: Path, max_bytes: int) -> dict[str, Any] | None:
    """inference-perf's ``config.yaml`` beside a stage's metrics, or None where there is none."""
    if not path.is_file():
        return None
    import yaml  # type: ignore[import-untyped]  # PyYAML: with distributed, a dependency

    try:
        with path.open("rb") as handle:
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        raise InputFileError(path, f"cannot be read ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:
        raise InputFileError(
            path, f"larger than {max_bytes:,} bytes; expected inference-perf's config.yaml"
        )
    try:
        loaded = yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputFileError(
            path, f"not readable YAML ({exc}); expected inference-perf's config.yaml"
        ) from None
    if not isinstance(loaded, dict):
        raise InputFileError(path, "not inference-perf's config.yaml (expected a mapping)")
    return loaded


def _inference_perf(root: _At, max_bytes: int) -> _Found:
    path = root.file
    config_path = path.parent / "config.yaml"
    config = _read_config(config_path, max_bytes)
    settings = _At(config_path, config) if config is not None else None
    summary = root.need("load_summary", "the stage's load summary")
    rate = summary.need("requested_rate", REQUEST_RATE.expected).within(REQUEST_RATE)
    duration = summary.need("send_duration", DURATION_S.expected).within(DURATION_S)
    successes = root.need("successes", "the successful requests' metrics")
    completed = successes.need("count", REQUESTS.expected).count(REQUESTS)
    failures = root.get("failures")
    failed_node = failures.get("count") if failures is not None else None
    failed = failed_node.count(REQUESTS) if failed_node is not None else 0
    latency = successes.need("latency", "the latency distributions (seconds)")
    ttft = _stats(latency, "time_to_first_token", LIFECYCLE_STATISTICS, 1e3, need=True)
    e2el = _stats(latency, "request_latency", LIFECYCLE_STATISTICS, 1e3, need=True)
    prompt = successes.need("prompt_len", "the prompt lengths")
    input_len = prompt.need("mean", TOKENS_PER_REQUEST.expected).within(TOKENS_PER_REQUEST)
    measured_out = successes.need("output_len", "the output lengths")
    output_len = measured_out.need("mean", TOKENS_PER_REQUEST.expected).within(TOKENS_PER_REQUEST)
    configured = _configured_output(settings)
    if configured is not None:
        output_len = configured
    throughput = successes.get("throughput")
    requests_per_s = _number_or_none(throughput, "requests_per_sec", THROUGHPUT)
    tokens_per_s = _number_or_none(throughput, "output_tokens_per_sec", THROUGHPUT)
    if configured is not None and requests_per_s is not None:
        tokens_per_s = requests_per_s * configured  # the server's tokens, not re-tokenized ones
    tpot = Stats()
    if output_len > 1 and ttft.mean is not None and e2el.mean is not None:
        per_token = max(0.0, e2el.mean - ttft.mean) / (output_len - 1)
        tpot = Stats(mean=per_token)
    run = {
        "ttft": ttft,
        "tpot": tpot,
        "itl": tpot,
        "e2el": e2el,
        "completed": completed,
        "failed": failed,
        "duration": duration,
        "request_throughput": requests_per_s,
        "output_throughput": tokens_per_s,
        "total_token_throughput": _number_or_none(throughput, "total_tokens_per_sec", THROUGHPUT),
        "total_input_tokens": round(input_len * completed),
        "total_output_tokens": round(output_len * completed),
        "input_len": input_len,
        "output_len": output_len,
    }
    stage = _STAGE.search(path.name)
    server = settings.get("server") if settings is not None else None
    engine_name = _text(server, "type")
    return _Found(
        run=run,
        tool=INFERENCE_PERF,
        tool_version=None,
        source_format="inference-perf stage lifecycle metrics"
        + (" with config.yaml" if settings is not None else ""),
        benchmark=int(stage.group(1)) if stage else 0,
        load=Load("qps", rate, arrival=_arrival(settings)),
        engine=ENGINES.get(engine_name.lower()) if engine_name else None,
        model=_text(server, "model_name"),
        prefix_hit_rate=_prefix_hit_rate(settings, input_len, completed),
    )


def _text(node: _At | None, key: str) -> str | None:
    found = node.get(key) if node is not None and isinstance(node.value, dict) else None
    if found is None:
        return None
    return found.text(f"{key} as text").strip() or None


def _arrival(settings: _At | None) -> str | None:
    """How the stage's requests arrived: ``load.type`` (constant or poisson), where known."""
    load = settings.get("load") if settings is not None else None
    kind = _text(load, "type")
    return kind.lower() if kind and kind.lower() in ("constant", "poisson") else None


def _configured_output(settings: _At | None) -> float | None:
    """The output length every request was held to: the data set's configured length, where
    the server was told to ignore end-of-sequence tokens."""
    if settings is None:
        return None
    server = settings.get("server")
    ignore = server.get("ignore_eos") if server is not None else None
    if ignore is None or ignore.value is not True:
        return None
    data = settings.get("data")
    kind = _text(data, "type")
    block = data.get(kind) if data is not None and kind else None
    if block is None or not isinstance(block.value, dict):
        return None
    return _number_or_none(block, "output_len", TOKENS_PER_REQUEST)


def _prefix_hit_rate(settings: _At | None, prompt: float, requests: int) -> float | None:
    """Prompt tokens the prefix cache serves under a ``shared_prefix`` data set: whole prompts
    (but their last block) once each distinct prompt repeats, else the shared system prompt."""
    data = settings.get("data") if settings is not None else None
    if _text(data, "type") != "shared_prefix" or data is None or prompt <= 0:
        return None
    shared = data.get("shared_prefix")
    if shared is None or not isinstance(shared.value, dict):
        return None
    groups = _number_or_none(shared, "num_groups", REQUESTS) or 1.0
    per_group = _number_or_none(shared, "num_prompts_per_group", REQUESTS) or 1.0
    system = _number_or_none(shared, "system_prompt_len", TOKENS_PER_REQUEST) or 0.0
    if requests >= 2 * groups * per_group:
        return max(0.0, 1.0 - PREFIX_BLOCK_TOKENS / prompt)
    return min(1.0, system * (per_group - 1) / per_group / prompt)
