"""One benchmark run's result, whichever tool measured it, and its rows for calibration.

A :class:`BenchRun` is what planner keeps of a run: the summary ``vllm bench serve`` writes (its
key names: ``mean_ttft_ms``, ``p99_tpot_ms``, ``request_throughput``, ...) and a ``planner``
block with what the numbers were measured on (hardware, engine, model, precision, tensor
parallelism), which tool measured them, under which load, and from which file.

:func:`measurement_rows` turns runs into rows of the measurement CSV layout that ``planner
calibrate`` reads (:data:`planner.latency.calibration.REQUIRED_COLUMNS`, the layout of
``data/reference/published_latency.csv``): one row per mean metric per run, named with the
catalog's names, so the rows read back without a change.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal, NamedTuple

from planner.common.csvsafe import safe_cell
from planner.common.files import atomic_output
from planner.common.text import printable, shown
from planner.errors import UsageError
from planner.latency.calibration import MEASUREMENT_COLUMNS, MIN_LATENCY_MS
from planner.latency.catalog import Catalog, load_catalog
from planner.latency.engines import deploy, get_engine

LATENCIES = ("ttft", "tpot", "itl", "e2el")  # vLLM's names; e2el is end-to-end latency
STATISTICS = ("mean", "median", "std", "p50", "p90", "p99")
LoadKind = Literal["concurrency", "qps", "max"]
# Mean latencies calibration fits, as (summary attribute, metric name in the CSV).
_LATENCY_ROWS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2el", "E2E"))
_THROUGHPUT_ROWS = (
    ("output_throughput", "output_throughput", "tok/s"),
    ("request_throughput", "request_throughput", "req/s"),
)


@dataclass(frozen=True)
class Stats:
    """A latency's distribution over the completed requests, in milliseconds; ``None`` where the
    tool did not record that statistic."""

    mean: float | None = None
    median: float | None = None
    std: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


@dataclass(frozen=True)
class Load:
    """The load a run offered, in calibration's terms.

    ``concurrency``: ``value`` clients, each sending its next request when the last one ends
    (synchronous is concurrency 1); ``qps``: requests arriving at ``value`` per second
    (``arrival`` says how: poisson, constant or gamma), at most ``max_concurrency`` in flight
    when the tool capped them; ``max``: every request at once, the engine's maximum throughput
    (latencies under such a burst measure queueing, so calibration takes only throughputs).
    """

    kind: LoadKind
    value: float | None = None
    arrival: str | None = None
    max_concurrency: int | None = None

    def label(self) -> str:
        """The load as calibration's ``batch_or_concurrency`` column writes it."""
        if self.kind == "max" or self.value is None:
            return "max"
        if self.kind == "qps":
            return f"QPS={self.value:g}"
        return f"concurrency={self.value:g}"


@dataclass(frozen=True)
class RunInfo:
    """The ``planner`` block of a result: what was measured, with what, under which load."""

    tool: str  # guidellm, vllm bench serve, planner
    tool_version: str | None
    source_file: str
    source_format: str  # e.g. "guidellm benchmarks.json, schema 2"
    benchmark: int  # index of the run within its file (guidellm files hold several)
    load: Load
    gpu: str | None
    gpu_count: int | None
    engine: str | None
    model: str | None
    precision: str | None
    tp: int
    label: str | None = None
    date: str | None = None
    # share of prompt tokens the engine's prefix cache served, where the workload says (an
    # inference-perf shared-prefix data set); None: not known (calibration assumes none)
    prefix_hit_rate: float | None = None

    def to_dict(self) -> dict[str, Any]:
        extra = {} if self.prefix_hit_rate is None else {"prefix_hit_rate": self.prefix_hit_rate}
        return {
            "hardware": {"gpu": self.gpu, "count": self.gpu_count},
            "engine": self.engine,
            "model": self.model,
            "precision": self.precision,
            "tp": self.tp,
            "tool": {"name": self.tool, "version": self.tool_version},
            "load": asdict(self.load),
            "source": {
                "file": self.source_file,
                "format": self.source_format,
                "benchmark": self.benchmark,
            },
            "label": self.label,
            "date": self.date,
            **extra,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunInfo:
        hardware, tool, source = data["hardware"], data["tool"], data["source"]
        return cls(
            tool=tool["name"],
            tool_version=tool["version"],
            source_file=source["file"],
            source_format=source["format"],
            benchmark=source["benchmark"],
            load=Load(**data["load"]),
            gpu=hardware["gpu"],
            gpu_count=hardware["count"],
            engine=data["engine"],
            model=data["model"],
            precision=data["precision"],
            tp=data["tp"],
            label=data.get("label"),
            date=data.get("date"),
            prefix_hit_rate=data.get("prefix_hit_rate"),
        )


@dataclass(frozen=True)
class BenchRun:
    """One run's result. Throughputs are over the run's measured duration, as vLLM computes
    them (completed requests, output tokens, input plus output tokens, per second); lengths are
    means over the completed requests."""

    ttft: Stats
    tpot: Stats  # per request (last token - first token) / (output tokens - 1)
    itl: Stats  # between consecutive tokens
    e2el: Stats
    completed: int
    failed: int
    duration: float  # seconds, under vLLM's key name
    request_throughput: float | None
    output_throughput: float | None
    total_token_throughput: float | None
    total_input_tokens: int | None
    total_output_tokens: int | None
    input_len: float | None
    output_len: float | None
    info: RunInfo

    def summary(self) -> dict[str, float | int | None]:
        """The summary under ``vllm bench serve``'s key names (``mean_ttft_ms``, ...)."""
        out: dict[str, float | int | None] = {}
        for latency in LATENCIES:
            stats: Stats = getattr(self, latency)
            for statistic in STATISTICS:
                out[f"{statistic}_{latency}_ms"] = getattr(stats, statistic)
        for f in fields(self):
            if f.name not in (*LATENCIES, "info"):
                out[f.name] = getattr(self, f.name)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON: the summary keys, then the ``planner`` block."""
        return {**self.summary(), "planner": self.info.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchRun:
        """A run from :meth:`to_dict`'s output (a result planner wrote)."""

        def stats(latency: str) -> Stats:
            return Stats(**{s: data[f"{s}_{latency}_ms"] for s in STATISTICS})

        return cls(
            ttft=stats("ttft"),
            tpot=stats("tpot"),
            itl=stats("itl"),
            e2el=stats("e2el"),
            completed=data["completed"],
            failed=data["failed"],
            duration=data["duration"],
            request_throughput=data["request_throughput"],
            output_throughput=data["output_throughput"],
            total_token_throughput=data["total_token_throughput"],
            total_input_tokens=data["total_input_tokens"],
            total_output_tokens=data["total_output_tokens"],
            input_len=data["input_len"],
            output_len=data["output_len"],
            info=RunInfo.from_dict(data["planner"]),
        )


class _Deployment(NamedTuple):
    gpu: str
    model: str
    precision: str
    engine: str
    max_context: int


def _catalog_entry(table: Any, option: str, value: str, run: BenchRun) -> str:
    """The catalog name of ``value``, also tried without an organisation or vendor prefix
    (``meta-llama/Llama-3.1-8B`` -> ``Llama-3.1-8B``, ``NVIDIA H100 80GB HBM3`` -> ``H100 80GB
    HBM3``); a name the catalog lacks says which option names a catalog entry instead."""
    tries = [value, value.rsplit("/", 1)[-1]]
    tries += [value[len(v) :] for v in ("NVIDIA ", "AMD ") if value.upper().startswith(v)]
    problem = ""
    for candidate in tries:
        try:
            return str(table.get(candidate).name)
        except UsageError as exc:
            problem = problem or str(exc)
    command = "gpus" if table.kind == "GPU" else f"{table.kind}s"
    raise UsageError(
        f"{_where(run)}: calibration needs catalog names, and the {table.kind} {shown(value)} "
        f"is not in the catalog ({problem}); pass {option} naming the catalog entry that "
        f"matches what was measured (see `planner catalog {command}`), or import without "
        "--out-csv to keep the results only"
    )


def _where(run: BenchRun) -> str:
    info = run.info
    return f"{printable(info.source_file)} (run {info.benchmark + 1}, {info.load.label()})"


def _required(run: BenchRun, value: str | None, option: str, what: str) -> str:
    if value is None or not value.strip():
        raise UsageError(
            f"{_where(run)}: calibration needs the {what}, and neither the file nor the "
            f"options give it; pass {option}"
        )
    return value


def _deployment(run: BenchRun, catalog: Catalog) -> _Deployment:
    """Catalog names of the run's deployment, checked as ``planner calibrate`` checks them."""
    info = run.info
    gpu_text = _required(run, info.gpu, "--gpu", "GPU")
    gpu = catalog.gpus.get(_catalog_entry(catalog.gpus, "--gpu", gpu_text, run))
    model_text = _required(run, info.model, "--model", "model")
    model = catalog.models.get(_catalog_entry(catalog.models, "--model", model_text, run))
    precision_text = _required(run, info.precision, "--precision", "precision")
    precision = catalog.precisions.get(
        _catalog_entry(catalog.precisions, "--precision", precision_text, run)
    )
    try:
        engine = get_engine(_required(run, info.engine, "--engine", "engine"))
    except UsageError as exc:
        raise UsageError(
            f"{_where(run)}: calibration needs an engine planner models ({exc}); pass --engine"
        ) from None
    tp = info.tp
    if tp < 1 or tp & (tp - 1) or tp > gpu.max_gpus_per_node:
        raise UsageError(
            f"{_where(run)}: --tp {tp}: calibration needs a power of two from 1 to "
            f"{gpu.max_gpus_per_node} (tensor-parallel GPUs in one {gpu.name} node)"
        )
    try:  # what the hardware and model cannot run at all
        deploy(engine, gpu, model, precision, tp)
    except UsageError as exc:
        raise UsageError(f"{_where(run)}: {exc}") from None
    return _Deployment(gpu.name, model.name, precision.name, engine.name, model.max_context)


def catalog_deployment(run: BenchRun, catalog: Catalog | None = None) -> tuple[str, str, str, str]:
    """The catalog names of a run's GPU, model, precision and engine, checked as calibration
    checks them (a :class:`UsageError` names the option that fixes a name the catalog lacks)."""
    names = _deployment(run, catalog or load_catalog())
    return names.gpu, names.model, names.precision, names.engine


def _provenance(info: RunInfo) -> str:
    """How a run reached planner: measured by its own harness, or imported from a tool's file."""
    if info.source_format == "planner bench run":
        return "measured by planner bench run"
    return f"imported by planner from {info.source_format}"


def measurement_rows(
    runs: Iterable[BenchRun], catalog: Catalog | None = None
) -> list[dict[str, str]]:
    """Rows of the measurement CSV layout (:data:`MEASUREMENT_COLUMNS`) for ``runs``: each
    run's mean TTFT, TPOT and end-to-end latency (not under a ``max`` load: those measure
    queueing) and its output and request throughputs. A run that completed no request gives no
    row. Names not in the catalog, or a deployment the catalog cannot run, raise a
    :class:`UsageError` naming the option (``--gpu``, ``--model``, ...) that fixes it."""
    catalog = catalog or load_catalog()
    rows: list[dict[str, str]] = []
    for run in runs:
        if run.completed < 1 or not run.input_len or not run.output_len:
            continue
        names = _deployment(run, catalog)
        info = run.info
        input_len = max(1, round(run.input_len))
        output_len = max(1, round(run.output_len))
        if input_len + output_len > names.max_context:
            raise UsageError(
                f"{_where(run)}: {input_len:,} input + {output_len:,} output tokens exceed the "
                f"{names.max_context:,}-token context of {names.model}; pass --model "
                "naming the model that was measured"
            )
        tool = f"{info.tool} {info.tool_version}" if info.tool_version else info.tool
        base = {
            "source": f"{tool}: {info.source_file}, run {info.benchmark + 1}",
            "url_or_path": info.source_file,
            "model": names.model,
            "gpu": names.gpu,
            "num_gpus": str(info.tp),
            "precision": names.precision,
            "framework": f"{names.engine}, measured with {tool}",
            "input_len": str(input_len),
            "output_len": str(output_len),
            "batch_or_concurrency": info.load.label(),
            "notes": (
                f"{_provenance(info)}; mean over "
                f"{run.completed} completed requests"
                + (f", {run.failed} failed" if run.failed else "")
            ),
            "engine": names.engine,
            "kv_cache": "",
        }
        if info.load.kind != "max":
            for attribute, metric in _LATENCY_ROWS:
                if attribute == "tpot" and output_len < 2:
                    continue  # one output token has no time per output token
                value = getattr(run, attribute).mean
                if value is not None and math.isfinite(value) and value >= MIN_LATENCY_MS:
                    rows.append({**base, "metric": metric, "value": repr(value), "unit": "ms"})
        for attribute, metric, unit in _THROUGHPUT_ROWS:
            value = getattr(run, attribute)
            if value is not None and math.isfinite(value) and value > 0:
                rows.append({**base, "metric": metric, "value": repr(value), "unit": unit})
    return rows


def write_measurements(rows: list[dict[str, str]], path: Path, option: str = "--out-csv") -> None:
    """Write measurement rows as CSV, whole or not at all (see :mod:`planner.common.files`)."""
    if not rows:
        raise UsageError(f"{option} {path}: no measurements to write (no run completed a request)")
    with atomic_output(path, option) as temp, temp.open("w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=MEASUREMENT_COLUMNS)
        writer.writeheader()
        writer.writerows({name: safe_cell(value) for name, value in row.items()} for row in rows)
