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

Options given to :func:`import_result` override what a file records (a file may name a machine
as ``CPU-2core`` where the catalog says ``H100-SXM``). Calibration needs the GPU, engine, model
and precision: where neither the file nor the options give one, the :class:`UsageError` names
the option to pass. A file that is not what it claims raises an :class:`InputFileError` naming
the file and the JSON key path that was wrong or missing, and what was expected there.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from planner.bench.results import BenchRun, Load, RunInfo, Stats
from planner.common.text import MAX_SHOWN_CHARS, printable, shown
from planner.errors import InputFileError, RowProblem, UsageError

MAX_FILE_BYTES = 512 * 1024**2  # guidellm keeps every request: large, but not this large
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
_EXPECTED_FILE = "a guidellm benchmarks.json or a `vllm bench serve --save-result` JSON file"


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

    def _child(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.where}[{key}]"
        return f"{self.where}.{key}" if self.where else key

    def _at(self, value: Any, key: str | int) -> _At:
        return _At(self.file, value, self._child(key), self.line)

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
        if not math.isfinite(value):
            raise self.error(expected)
        return float(value)

    def at_least(self, least: float, expected: str, *, from_text: bool = False) -> float:
        value = self.number(expected, from_text=from_text)
        if value < least:
            raise self.error(expected)
        return value

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


def _read_json(path: Path) -> list[tuple[Any, int | None]]:
    """The file's JSON documents: one, or one a line (``--append-result``); gzip is read too."""
    if path.is_dir():
        raise InputFileError(path, f"is a folder; expected {_EXPECTED_FILE}")
    if not path.exists():
        raise InputFileError(path, "file not found")
    if not path.is_file():
        raise InputFileError(path, f"not a regular file; expected {_EXPECTED_FILE}")
    limit = f"larger than {MAX_FILE_BYTES // 1024**2} MB; not a benchmark result file"
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InputFileError(path, limit)
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as unzipped:
                raw = unzipped.read(MAX_FILE_BYTES + 1)
            if len(raw) > MAX_FILE_BYTES:
                raise InputFileError(path, f"{limit} (uncompressed)")
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputFileError(path, f"not a readable gzip file ({exc or 'cut short'})") from None
    except OSError as exc:
        raise InputFileError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line_number = raw[: exc.start].count(b"\n") + 1
        problem = RowProblem(None, None, "not UTF-8 text; expected JSON", line_number)
        raise InputFileError(path, problem) from None
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
    # several documents: `vllm bench serve --append-result` writes one a line
    documents: list[tuple[Any, int | None]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            documents.append((json.loads(line), number))
        except json.JSONDecodeError as exc:
            problem = RowProblem(
                None, None, f"not valid JSON ({exc.msg} at column {exc.colno})", number
            )
            raise InputFileError(path, problem) from None
        except RecursionError:
            problem = RowProblem(None, None, "JSON nested too deeply", number)
            raise InputFileError(path, problem) from None
        except ValueError as exc:
            problem = RowProblem(None, None, f"not a benchmark result ({exc})", number)
            raise InputFileError(path, problem) from None
    return documents


def import_result(
    path: Path,
    *,
    gpu: str | None = None,
    engine: str | None = None,
    model: str | None = None,
    precision: str | None = None,
    tp: int | None = None,
) -> list[BenchRun]:
    """The runs a guidellm ``benchmarks.json`` or ``vllm bench serve`` result file holds, with
    the options filling in (and overriding) what the file records about the deployment."""
    if tp is not None and tp < 1:
        raise UsageError(f"--tp {tp}: expected a whole number of GPUs, at least 1")
    documents = _read_json(path)
    found: list[_Found] = []
    for index, (document, line) in enumerate(documents):
        root = _At(path, document, line=line)
        if isinstance(document, dict) and "benchmarks" in document and line is None:
            found += _guidellm(root)
        elif isinstance(document, dict) and "runs" in document and "planner" in document:
            found += _planner_sweep(root)
        elif isinstance(document, dict) and "completed" in document and "duration" in document:
            found.append(_vllm(root, index))
        else:
            problem = (
                f"not a result file planner reads: expected {_EXPECTED_FILE} (a top-level "
                "'benchmarks' list, or 'completed', 'duration' and 'mean_ttft_ms')"
            )
            raise InputFileError(path, RowProblem(None, None, problem, line))
    options = {"gpu": gpu, "engine": engine, "model": model, "precision": precision}
    return [_finish(path, f, options, tp) for f in found]


def _finish(path: Path, found: _Found, options: dict[str, str | None], tp: int | None) -> BenchRun:
    """The run, with options overriding the file; what calibration needs and neither gives is a
    :class:`UsageError` naming the options to pass."""
    chosen = {
        key: (value.strip() if value and value.strip() else None) or getattr(found, key)
        for key, value in options.items()
    }
    missing = [key for key, value in chosen.items() if not value]
    if missing:
        what = {"gpu": "GPU", "engine": "engine", "model": "model", "precision": "precision"}
        lacking = _listed([what[k] for k in missing])
        raise UsageError(
            f"{printable(str(path))}: the file does not record the {lacking} of "
            f"its runs ({found.source_format}), and calibration needs them; pass "
            f"{_listed([f'--{k}' for k in missing])} (catalog names: `planner catalog gpus`, "
            "`planner catalog engines`, `planner catalog models`, `planner catalog precisions`)"
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
    )
    return BenchRun(**found.run, info=info)


def _planner_sweep(root: _At) -> list[_Found]:
    """A ``planner bench run --pattern sweep --out`` file: one run per stage, each already in
    :class:`BenchRun`'s own form."""
    found = []
    for index, stage in enumerate(root.need("runs", "a list of runs").items("a list of runs")):
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
                    gpus = "a whole number of GPUs, at least 1"
                    out[field] = node.whole(gpus, least=1, from_text=True)
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
    started = start.number("a time in seconds since 1970") if start is not None else None
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
            expected = "a whole number of requests"
            successful = node.need("successful", expected).whole(expected)
            errored = node.need("errored", expected).whole(expected)
            return successful, errored
    raise bench.fail(
        bench.where,
        "missing request counts; expected metrics.request_totals (guidellm 0.4 and later), "
        "request_totals or total_count (guidellm 0.2)",
    )


def _guidellm_duration(bench: _At) -> float:
    expected = "the run's duration in seconds, above 0"
    duration = bench.get("duration")
    if duration is not None:
        value = duration.number(expected)
        if value <= 0:
            raise duration.error(expected)
        return value
    start = bench.need("start_time", "the run's start time (or its duration)")
    end = bench.need("end_time", "the run's end time (or its duration)")
    value = end.number("a time in seconds") - start.number("a time in seconds")
    if value <= 0:
        raise end.error("an end time after start_time")
    return value


def _guidellm_stats(metrics: _At, name: str, unit: str) -> Stats:
    """A distribution over the successful requests (``metrics.<name>.successful``), recorded in
    ``unit`` (ms or s), in ms."""
    scale = 1000.0 if unit == "s" else 1.0
    node = metrics.need(name, f"the {name} distribution").need(
        "successful", "the distribution over successful requests"
    )
    expected = f"a latency in {unit}, at least 0"

    def value(parent: _At | None, key: str) -> float | None:
        found = parent.get(key) if parent is not None else None
        return None if found is None else found.at_least(0.0, expected) * scale

    mean = node.need("mean", expected).at_least(0.0, expected) * scale
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
    expected = "a number of tokens, at least 0"
    mean = node.need("mean", expected).at_least(0.0, expected)
    total = node.get("total_sum")
    total_tokens = total.at_least(0.0, expected) if total is not None else mean * completed
    return mean, round(total_tokens)


def _guidellm_load(strategy: _At) -> Load:
    kind_node = strategy.need("type_", "the strategy's type")
    kind = kind_node.text("the strategy's type as text")
    if kind == "synchronous":
        return Load("concurrency", 1.0)
    if kind == "concurrent":
        streams = strategy.get("streams") or strategy.need("max_concurrency", "the streams")
        return Load("concurrency", float(streams.whole("a whole number of streams", least=1)))
    if kind == "throughput":
        cap = strategy.get("max_concurrency")
        most = cap.whole("a whole number of requests", least=1) if cap else None
        return Load("max", None, max_concurrency=most)
    if kind in ("constant", "poisson"):
        rate_node = strategy.need("rate", "the request rate per second")
        rate = rate_node.number("a request rate per second, above 0")
        if rate <= 0:
            raise rate_node.error("a request rate per second, above 0")
        cap = strategy.get("max_concurrency")
        most = cap.whole("a whole number of requests", least=1) if cap else None
        return Load("qps", rate, arrival=kind, max_concurrency=most)
    raise kind_node.error(
        "synchronous, concurrent, throughput, constant or poisson (the loads calibration knows)"
    )


# --- vllm bench serve ----------------------------------------------------------------------


def _vllm(root: _At, index: int) -> _Found:
    requests = "a whole number of requests"
    completed = root.need("completed", requests).whole(requests)
    failed_node = root.get("failed")
    prompts = root.get("num_prompts")
    if failed_node is not None:
        failed = failed_node.whole(requests)
    elif prompts is not None:
        failed = max(0, prompts.whole(requests) - completed)
    else:
        failed = 0
    expected_duration = "the run's duration in seconds, above 0"
    duration_node = root.need("duration", expected_duration)
    duration = duration_node.number(expected_duration)
    if duration <= 0:
        raise duration_node.error(expected_duration)
    tokens = "a whole number of tokens"
    total_input = root.need("total_input_tokens", tokens).whole(tokens)
    total_output = root.need("total_output_tokens", tokens).whole(tokens)

    def throughput(key: str, computed: float) -> float:
        node = root.get(key)
        return node.at_least(0.0, "a throughput per second, at least 0") if node else computed

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
    expected = "a latency in ms, at least 0"
    values: dict[str, float | None] = {}
    for statistic in ("mean", "median", "std", "p50", "p90", "p99"):
        node = root.get(f"{statistic}_{latency}_ms")
        values[statistic] = node.at_least(0.0, expected) if node is not None else None
    values["median"] = values["median"] if values["median"] is not None else values["p50"]
    values["p50"] = values["p50"] if values["p50"] is not None else values["median"]
    return Stats(**values)


def _vllm_load(root: _At) -> Load:
    """``--request-rate`` (``inf``: all at once) with ``--max-concurrency`` (a client cap)."""
    rate_node = root.need("request_rate", "the request rate (a number, or 'inf')")
    cap_node = root.get("max_concurrency")
    cap = cap_node.whole("a whole number of requests", least=1) if cap_node else None
    text = str(rate_node.value).strip().lower()
    if text in ("inf", "infinity"):
        return Load("concurrency", float(cap)) if cap else Load("max")
    expected = "a request rate per second above 0, or 'inf'"
    rate = rate_node.number(expected, from_text=True)
    if rate <= 0:
        raise rate_node.error(expected)
    burstiness = root.get("burstiness")
    gamma = burstiness is not None and burstiness.number("a number") != 1.0
    return Load("qps", rate, arrival="gamma" if gamma else "poisson", max_concurrency=cap)
