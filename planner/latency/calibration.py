"""Fitting calibration profiles to measured latencies, and measuring how wrong the model is.

Measurements come in the layout of ``data/reference/published_latency.csv`` (also what the
benchmark harness writes). The fit is robust nonlinear least squares on log errors
(``scipy.optimize.least_squares`` with a soft-L1 loss), so one odd point cannot drag the
profile, and relative errors count the same for 7 ms and 7 s.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from planner.common.text import shown
from planner.errors import InputFileError, PlannerError, RowProblem, UsageError
from planner.latency.catalog import Catalog, UnsupportedError, load_catalog
from planner.latency.engines import KV_CACHE_BYTES, deploy, get_engine
from planner.latency.model import Deployment, LatencyModel
from planner.latency.operators import ErrorRow, OperatorPoint, operator_errors
from planner.latency.operators import predict_ms as operator_ms
from planner.latency.profile import DEFAULT_ENGINE, FIT_BOUNDS, Profile
from planner.latency.serving import (
    LoadKind,
    SaturatedError,
    max_throughput,
    saturation_qps,
    static_batch,
    steady_state,
)

PointLoad = LoadKind | Literal["max", "static"]

METRICS = {
    "ttft": "ttft",
    "itl": "tpot",
    "tpot": "tpot",
    "e2e": "e2e",
    "output_throughput": "output_throughput",
    "throughput": "output_throughput",
    "request_throughput": "request_throughput",
}
THROUGHPUTS = ("output_throughput", "request_throughput")
# units each metric may be given in, with the factor to planner's unit (ms, tokens/s, req/s)
UNITS: dict[str, dict[str, float]] = {
    "latency": {"ms": 1.0, "s": 1000.0},
    "output_throughput": {"tok/s": 1.0, "tokens/s": 1.0, "token/s": 1.0},
    "request_throughput": {"req/s": 1.0, "requests/s": 1.0},
}
UNIT_OF = {"latency": "ms", "output_throughput": "tok/s", "request_throughput": "req/s"}
MAX_LOAD = 1_000_000  # sequences in a batch or clients of a load test: no benchmark runs more
# The measurement layout of data/reference/published_latency.csv, column for column (what
# `planner bench import --out-csv` writes; REQUIRED_COLUMNS are the ones a file must have).
MEASUREMENT_COLUMNS = (
    "source",
    "url_or_path",
    "model",
    "gpu",
    "num_gpus",
    "precision",
    "framework",
    "input_len",
    "output_len",
    "batch_or_concurrency",
    "metric",
    "value",
    "unit",
    "notes",
    "engine",
    "kv_cache",
)
REQUIRED_COLUMNS = (
    "model",
    "gpu",
    "num_gpus",
    "precision",
    "input_len",
    "output_len",
    "batch_or_concurrency",
    "metric",
    "value",
    "unit",
)


@dataclass(frozen=True)
class Measurement:
    gpu: str
    model: str
    precision: str
    tp: int
    engine: str
    kv_cache: str
    input_tokens: int
    output_tokens: int
    # max: offline, as fast as the engine goes; static: a static batch (all prompts prefilled
    # together, then decoded together), as planner's in-process engine times it
    load_kind: PointLoad
    load: float
    metric: str  # ttft, tpot, e2e (ms), output_throughput (tokens/s), request_throughput (req/s)
    value: float  # in the metric's unit (see unit_of)
    source: str = ""
    row: int = 0  # data row in its file, for messages

    @property
    def key(self) -> str:
        load = f"{self.load_kind}={self.load:g}"
        shape = f"{self.input_tokens}:{self.output_tokens}"
        where = f"{self.model}/{self.gpu}x{self.tp}/{self.precision}"
        return f"{where}/{shape}/{load}/{self.metric}"


@dataclass(frozen=True)
class Excluded:
    row: int
    reason: str


def unit_of(metric: str) -> str:
    return UNIT_OF[metric if metric in THROUGHPUTS else "latency"]


def _parse_load(text: str) -> tuple[PointLoad, float] | None:
    """``1`` -> batch 1; ``QPS=2``; ``concurrency=50``; ``static=8`` (a static batch); ``max``
    (offline maximum throughput); ``QPS=INF`` -> None (a burst)."""
    name, sep, value = (part.strip() for part in text.strip().lower().partition("="))
    kind: LoadKind | Literal["static"]
    if not sep and name in ("max", "offline"):
        return "max", 0.0
    if not sep:
        kind, value = "batch", name
    else:
        kinds: dict[str, LoadKind | Literal["static"]] = {
            "qps": "qps",
            "rps": "qps",
            "concurrency": "concurrency",
            "batch": "batch",
            "static": "static",
        }
        if name not in kinds:
            raise ValueError(
                f"expected 1, QPS=N, concurrency=N, batch=N, static=N or max, got {shown(text)}"
            )
        kind = kinds[name]
        if kind == "qps" and value in ("inf", "infinity"):
            return None
    try:
        load = float(value)
    except ValueError:
        load = math.nan
    if kind == "qps":
        if not (math.isfinite(load) and load > 0):
            raise ValueError(f"expected a positive number of qps, got {shown(text)}")
    elif not (math.isfinite(load) and load.is_integer() and 1 <= load <= MAX_LOAD):
        what = "clients" if kind == "concurrency" else "sequences"
        raise ValueError(
            f"expected a whole number of {what} ({kind}) from 1 to {MAX_LOAD:,}, got {shown(text)}"
        )
    return kind, load


BURST_REASON = "a burst at infinite rate: queueing, not iteration speed (the simulator's job)"
MAX_LATENCY_MS = 86_400_000.0  # a day: no measured latency of one request is longer
MIN_LATENCY_MS = 0.01  # 10 us: shorter than any GPU kernel launch, let alone a token
MAX_FILE_BYTES = 100 * 1024**2  # measurement files are small; this is not one
MAX_THROUGHPUT = 10_000_000.0  # tokens/s of one model instance: far beyond any GPU node


class _BadValueError(Exception):
    def __init__(self, column: str, message: str) -> None:
        super().__init__(message)
        self.column = column


def _text(path: Path) -> str:
    """The file's text (UTF-8, a byte-order mark dropped); bad bytes name their line."""
    if path.is_dir():
        raise InputFileError(path, "is a folder; expected a measurement CSV file")
    if not path.exists():
        raise InputFileError(path, "file not found")
    if not path.is_file():
        raise InputFileError(path, "not a regular file; expected a measurement CSV file")
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InputFileError(
                path, f"larger than {MAX_FILE_BYTES // 1024**2} MB; not a measurement file"
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFileError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        problem = RowProblem(None, None, "not UTF-8 text; save the file as UTF-8", line)
        raise InputFileError(path, problem) from None


def read_measurements(
    path: Path, catalog: Catalog | None = None
) -> tuple[list[Measurement], list[Excluded]]:
    """Measurements of a CSV file, with catalog names resolved; rows that cannot be modelled
    (a burst of infinite rate) are returned as excluded with the reason. Anything else that is
    not a measurement is an :class:`InputFileError` with its row, line and column."""
    catalog = catalog or load_catalog()
    text = _text(path)
    if not text.strip():
        needs = ", ".join(REQUIRED_COLUMNS)
        raise InputFileError(path, f"empty file; expected a header row with {needs}")
    points: list[Measurement] = []
    excluded: list[Excluded] = []
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames or []
        twice = sorted({c for c in header if header.count(c) > 1})
        if twice:
            raise InputFileError(
                path, f"column {shown(twice[0])} appears more than once in the header"
            )
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            needs = ", ".join(REQUIRED_COLUMNS)
            found = ", ".join(shown(c, 40) for c in header[:12])
            raise InputFileError(
                path,
                f"missing required column {missing[0]!r} (needs {needs}; found {found})",
            )
        row_number = 0
        line = reader.line_num + 1
        for row in reader:
            row_number += 1
            line = reader.line_num - _lines_in(row) + 1
            try:
                point = _measurement(row, catalog)
            except _BadValueError as bad:
                problem = RowProblem(row_number, bad.column, str(bad), line)
                raise InputFileError(path, problem) from None
            if point is None:
                excluded.append(Excluded(row_number, BURST_REASON))
            else:
                points.append(replace(point, row=row_number))
            line = reader.line_num + 1
    except csv.Error as exc:
        problem = RowProblem(None, None, f"not a readable CSV file ({exc})", reader.line_num + 1)
        raise InputFileError(path, problem) from None
    if row_number == 0:
        raise InputFileError(path, "no measurement rows after the header")
    return points, excluded


def _lines_in(row: dict[str | None, Any]) -> int:
    """Physical lines one record spans (quoted cells may hold newlines)."""
    cells = [v for v in row.values() if isinstance(v, str)]
    rest = row.get(None)
    if isinstance(rest, list):
        cells += [v for v in rest if isinstance(v, str)]
    return 1 + sum(v.count("\n") for v in cells)


def _cell(row: dict[str, str], column: str) -> str:
    value = row.get(column)
    if value is None or not value.strip():
        short = " (the row has fewer cells than the header)" if value is None else ""
        raise _BadValueError(column, f"missing value{short}")
    return value


def _catalog_name(table: Any, column: str, text: str) -> str:
    """A catalog entry's name, also trying the text without a parenthesised remark."""
    try:
        return str(table.get(text).name)
    except UsageError as exc:
        bare = re.sub(r"\s*\(.*\)", "", text).strip()
        if bare and bare != text:
            with contextlib.suppress(UsageError):
                return str(table.get(bare).name)
        raise _BadValueError(column, str(exc)) from None


def _number(row: dict[str, str], column: str) -> float:
    text = _cell(row, column)
    try:
        return float(text)
    except ValueError:
        raise _BadValueError(column, f"expected a number, got {shown(text)}") from None


def _whole(row: dict[str, str], column: str, what: str) -> int:
    """A whole number of ``what``, at least 1 (``1024`` or ``1024.0``)."""
    text = _cell(row, column)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value.is_integer() and value >= 1):
        raise _BadValueError(
            column, f"expected a whole number of {what}, at least 1, got {shown(text)}"
        )
    return int(value)


def _measurement(row: dict[str, str], catalog: Catalog) -> Measurement | None:
    gpu = catalog.gpus.get(_catalog_name(catalog.gpus, "gpu", _cell(row, "gpu")))
    model = catalog.models.get(_catalog_name(catalog.models, "model", _cell(row, "model")))
    precision = _catalog_name(catalog.precisions, "precision", _cell(row, "precision"))
    tp_text = _cell(row, "num_gpus")
    try:
        tp = int(float(tp_text)) if float(tp_text).is_integer() else 0
    except (ValueError, OverflowError):
        tp = 0
    if tp < 1 or tp & (tp - 1) or tp > gpu.max_gpus_per_node:
        raise _BadValueError(
            "num_gpus",
            f"expected a power of two from 1 to {gpu.max_gpus_per_node}, got {shown(tp_text)} "
            f"(tensor-parallel GPUs in one {gpu.name} node)",
        )
    input_tokens = _whole(row, "input_len", "tokens")
    output_tokens = _whole(row, "output_len", "tokens")
    if input_tokens + output_tokens > model.max_context:
        raise _BadValueError(
            "input_len",
            f"{input_tokens:,} input + {output_tokens:,} output = "
            f"{input_tokens + output_tokens:,} tokens exceed the {model.max_context:,}-token "
            f"context of {model.name}",
        )
    try:
        load = _parse_load(_cell(row, "batch_or_concurrency"))
    except ValueError as exc:
        raise _BadValueError("batch_or_concurrency", str(exc)) from None
    metric_text = _cell(row, "metric")
    metric = METRICS.get(metric_text.strip().lower().removeprefix("mean_"), "")
    if not metric:
        raise _BadValueError(
            "metric",
            "expected TTFT, ITL, TPOT or E2E (optionally mean_), output_throughput or "
            f"request_throughput, got {shown(metric_text)}",
        )
    if load is not None and load[0] == "max" and metric not in THROUGHPUTS:
        raise _BadValueError(
            "batch_or_concurrency",
            "load 'max' (offline maximum throughput) goes with output_throughput or "
            f"request_throughput, not {shown(metric_text)}",
        )
    units = UNITS[metric if metric in THROUGHPUTS else "latency"]
    unit_text = _cell(row, "unit")
    unit = unit_text.strip().lower()
    if unit not in units:
        raise _BadValueError(
            "unit", f"expected {' or '.join(units)} for {metric}, got {shown(unit_text)}"
        )
    value = _number(row, "value") * units[unit]
    if metric in THROUGHPUTS:
        if not (math.isfinite(value) and 0 < value <= MAX_THROUGHPUT):
            raise _BadValueError(
                "value",
                f"expected a positive throughput up to {MAX_THROUGHPUT:,.0f} {unit}, "
                f"got {shown(row['value'])}",
            )
    elif not math.isfinite(value) or value < MIN_LATENCY_MS:
        raise _BadValueError(
            "value",
            f"expected a positive latency of at least {MIN_LATENCY_MS:g} ms, "
            f"got {shown(row['value'])} {unit}",
        )
    elif value > MAX_LATENCY_MS:
        raise _BadValueError(
            "value", f"expected a latency under a day, got {shown(row['value'])} {unit}"
        )
    try:
        engine = get_engine((row.get("engine") or DEFAULT_ENGINE).strip()).name
    except UsageError as exc:
        raise _BadValueError("engine", str(exc)) from None
    kv_text = (row.get("kv_cache") or "").strip()
    kv_cache = kv_text.lower()
    if kv_cache and kv_cache not in KV_CACHE_BYTES:
        raise _BadValueError("kv_cache", f"expected fp32, fp16, bf16 or fp8, got {shown(kv_text)}")
    try:  # what the hardware and model cannot run at all
        deployment = deploy(
            engine, gpu, model, catalog.precisions.get(precision), tp, kv_cache=kv_cache or None
        )
    except UnsupportedError as exc:
        column = "kv_cache" if "KV cache" in str(exc) else "num_gpus"
        if "tensor-core peak" in str(exc):
            column = "precision"
        raise _BadValueError(column, str(exc)) from None
    if load is None:
        return None
    return Measurement(
        gpu=gpu.name,
        model=model.name,
        precision=precision,
        tp=tp,
        engine=engine,
        kv_cache=deployment.kv_cache,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        load_kind=load[0],
        load=load[1],
        metric=metric,
        value=value,
        source=(row.get("source") or row.get("url_or_path") or "").strip(),
    )


def deployment_of(point: Measurement, catalog: Catalog) -> Deployment:
    """The deployment a measurement was taken on, sized as its engine sizes it."""
    return deploy(
        point.engine,
        catalog.gpus.get(point.gpu),
        catalog.models.get(point.model),
        catalog.precisions.get(point.precision),
        point.tp,
        kv_cache=point.kv_cache,
    )


def predict(point: Measurement, profile: Profile, catalog: Catalog | None = None) -> float:
    """The model's value for a measurement's metric, in its unit, under ``profile``."""
    catalog = catalog or load_catalog()
    model = LatencyModel(deployment_of(point, catalog), profile)
    if point.load_kind == "max":
        most = max_throughput(model, point.input_tokens, point.output_tokens)
        if point.metric == "output_throughput":
            return most["output_tokens_per_s"]
        return most["requests_per_s"]
    if point.load_kind == "static":
        latency = static_batch(model, point.input_tokens, point.output_tokens, int(point.load))
    else:
        latency = steady_state(
            model, point.input_tokens, point.output_tokens, point.load_kind, point.load
        )
    if point.metric in THROUGHPUTS:
        if point.load_kind == "qps":
            rate = point.load
        else:  # a batch or closed loop: its clients cycle once per end-to-end latency
            rate = (
                latency.batch / (latency.e2e_ms / 1e3)
                if point.load_kind in ("batch", "static")
                else (point.load / (latency.e2e_ms / 1e3))
            )
        return rate * point.output_tokens if point.metric == "output_throughput" else rate
    return {"ttft": latency.ttft_ms, "tpot": latency.tpot_ms, "e2e": latency.e2e_ms}[point.metric]


@dataclass
class PointError:
    key: str
    metric: str
    measured: float  # in the metric's unit (ms, tokens/s or req/s)
    predicted: float
    split: str  # train or test

    @property
    def error(self) -> float:
        """Signed relative error of the prediction."""
        return self.predicted / self.measured - 1


@dataclass
class ErrorSummary:
    points: int
    mape: float
    median_ape: float
    worst_ape: float
    worst_point: str
    by_metric: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def of(cls, errors: Sequence[PointError]) -> ErrorSummary:
        if not errors:
            return cls(0, math.nan, math.nan, math.nan, "")
        ape = np.abs([e.error for e in errors])
        worst = int(np.argmax(ape))
        by_metric = {}
        for metric in sorted({e.metric for e in errors}):
            sub = np.abs([e.error for e in errors if e.metric == metric])
            by_metric[metric] = {
                "points": float(sub.size),
                "mape": float(sub.mean()),
                "median_ape": float(np.median(sub)),
            }
        return cls(
            len(errors),
            float(ape.mean()),
            float(np.median(ape)),
            float(ape[worst]),
            errors[worst].key,
            by_metric,
        )


@dataclass
class CalibrationReport:
    profile: Profile  # fitted on every usable point
    start: Profile
    points: list[Measurement]
    excluded: list[Excluded]
    test_keys: set[str]
    before: list[PointError]  # start profile, every point
    heldout_fit: Profile  # fitted on the training split only
    heldout: list[PointError]  # heldout_fit on every point (split says which were unseen)
    after: list[PointError]  # final profile, every point
    fitted: list[str] = field(default_factory=list)  # the parameters the fit moved
    operators_before: list[ErrorRow] = field(default_factory=list)  # per-operator errors
    operators_after: list[ErrorRow] = field(default_factory=list)

    def by_group(self) -> list[dict[str, Any]]:
        """Median absolute error per (engine, GPU, precision, metric): before fitting, on
        held-out points (fit without them) and after fitting on all points."""
        groups: dict[tuple[str, str, str, str], list[int]] = {}
        for index, point in enumerate(self.points):
            key = (point.engine, point.gpu, point.precision, point.metric)
            groups.setdefault(key, []).append(index)
        rows = []
        for (engine, gpu, precision, metric), indexes in sorted(groups.items()):

            def median(
                errors: list[PointError], which: str | None = None, at: list[int] = indexes
            ) -> float | None:
                chosen = [errors[i] for i in at if which is None or errors[i].split == which]
                return float(np.median([abs(e.error) for e in chosen])) if chosen else None

            rows.append(
                {
                    "engine": engine,
                    "gpu": gpu,
                    "precision": precision,
                    "metric": metric,
                    "points": len(indexes),
                    "test_points": sum(self.after[i].split == "test" for i in indexes),
                    "before": median(self.before),
                    "heldout_test": median(self.heldout, "test"),
                    "after": median(self.after),
                }
            )
        return rows

    def summary(self) -> dict[str, Any]:
        """Everything worth showing, JSON-ready: an empty error summary has null errors."""

        def split(errors: list[PointError], which: str) -> ErrorSummary:
            return ErrorSummary.of([e for e in errors if e.split == which])

        summary: dict[str, Any] = finite_or_none(
            {
                "profile": self.profile.to_dict(),
                "fitted": self.fitted,
                "bounds": {name: list(FIT_BOUNDS[name]) for name in self.fitted},
                "at_bound": [
                    name
                    for name in self.fitted
                    if any(
                        math.isclose(getattr(self.profile, name), edge, abs_tol=1e-6)
                        for edge in FIT_BOUNDS[name]
                    )
                ],
                "points": len(self.points),
                "excluded": [asdict(e) for e in self.excluded],
                "before_all": asdict(ErrorSummary.of(self.before)),
                "before_test": asdict(split(self.before, "test")),
                "heldout_train": asdict(split(self.heldout, "train")),
                "heldout_test": asdict(split(self.heldout, "test")),
                "after_all": asdict(ErrorSummary.of(self.after)),
                "by_group": self.by_group(),
                "operators_before": [asdict(r) for r in self.operators_before],
                "operators_after": [asdict(r) for r in self.operators_after],
                "per_point": [
                    {
                        "key": b.key,
                        "split": b.split,
                        "unit": unit_of(b.metric),
                        "measured": b.measured,
                        "before": b.predicted,
                        "heldout": h.predicted,
                        "after": a.predicted,
                    }
                    for b, h, a in zip(self.before, self.heldout, self.after, strict=True)
                ],
            }
        )
        return summary


def finite_or_none(value: Any) -> Any:
    """``value`` with NaN and infinities replaced by None, so it is valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_or_none(v) for v in value]
    return value


def errors_under(
    points: Sequence[Measurement], profile: Profile, catalog: Catalog | None = None
) -> ErrorSummary:
    """How wrong ``profile`` is on ``points`` (a saturated prediction is infinitely wrong)."""
    catalog = catalog or load_catalog()
    return ErrorSummary.of(_errors(points, profile, set(), catalog))


# A fit counts as worse than the profile it would replace only beyond this much MAPE (relative,
# absolute): the fit minimises robust log errors, not MAPE, so two good fits of the same points
# differ by a few tenths of a point.
FIT_RELATIVE_TOLERANCE = 0.05
FIT_ABSOLUTE_TOLERANCE = 0.002


def percent(share: float) -> str:
    """A relative error as a percentage; an absurd one in exponent form, not 200 digits."""
    return f"{share:.1%}" if abs(share) < 100 else f"{share * 100:.3g}%"


def compare_fit(
    fitted_mape: float, baseline_mape: float, baseline: str = "the default"
) -> str | None:
    """Why a fitted profile must not be stored: its error is not finite, or it is worse than
    the profile it would replace on the same points; None when it may be stored."""
    if not math.isfinite(fitted_mape):
        return (
            f"the fitted profile's error is not finite (MAPE {fitted_mape}): it finds some "
            "measured loads saturated; check the measurements"
        )
    if (
        math.isfinite(baseline_mape)
        and fitted_mape > baseline_mape * (1 + FIT_RELATIVE_TOLERANCE) + FIT_ABSOLUTE_TOLERANCE
    ):
        return (
            f"the fitted profile (MAPE {percent(fitted_mape)}) is worse than {baseline} "
            f"(MAPE {percent(baseline_mape)}) on the same points"
        )
    return None


def split_points(points: Sequence[Measurement], holdout: float) -> set[str]:
    """A stable held-out set: the points whose key hashes lowest, about ``holdout`` of them."""
    if not 0 <= holdout < 1:
        raise UsageError(f"--holdout {holdout:g}: expected a fraction in [0, 1)")
    # by key: two measurements of one configuration (two published versions) go together
    keys = sorted({p.key for p in points}, key=lambda k: hashlib.sha256(k.encode()).hexdigest())
    return set(keys[: round(len(keys) * holdout)])


def _errors(
    points: Sequence[Measurement], profile: Profile, test_keys: set[str], catalog: Catalog
) -> list[PointError]:
    return [
        PointError(
            p.key,
            p.metric,
            p.value,
            _safe_predict(p, profile, catalog),
            "test" if p.key in test_keys else "train",
        )
        for p in points
    ]


def _safe_predict(point: Measurement, profile: Profile, catalog: Catalog) -> float:
    try:
        return predict(point, profile, catalog)
    except SaturatedError:
        return math.inf


# Fitted from serving measurements alone.
SERVING_PARAMS = (
    "compute_eff",
    "memory_eff",
    "iteration_overhead_ms",
    "request_overhead_ms",
)
# Fitted only with operator timings: serving measurements cannot tell them from the others
# (a slower attention kernel and a longer iteration overhead look alike in a TPOT); without
# timings they keep the starting profile's values (the defaults come from the bundled fit).
KERNEL_PARAMS = ("gemm_half_tokens", "attn_prefill_eff", "attn_decode_eff", "attn_layer_us")


def serving_determined(params: Sequence[str], operators: bool) -> int:
    """How many of ``params`` the serving points alone must determine: with operator timings,
    the GEMM and attention efficiencies (and the weight-read bandwidth share) are pinned by
    the timings."""
    pinned = (*KERNEL_PARAMS, "compute_eff", "memory_eff") if operators else ()
    return len([p for p in params if p not in pinned])


STATIC_GEMM_SIZES = 3  # distinct static-batch prefill sizes that let a fit find gemm_half_tokens


def fitted_params(
    points: Sequence[Measurement], catalog: Catalog | None = None, *, operators: bool = False
) -> list[str]:
    """The parameters the points can inform: the kernel efficiencies only with operator
    timings (GEMM efficiency's growth also from static batches of several prefill sizes),
    all-reduce latency only with tensor parallelism, a quantized precision's GEMM
    scale only where one GPU was also measured in 16-bit (alone, it and ``compute_eff`` are
    one product, and across GPUs it would absorb their differences)."""
    catalog = catalog or load_catalog()
    params = list(SERVING_PARAMS) + (list(KERNEL_PARAMS) if operators else [])
    # static batches prefill batch x prompt tokens in one GEMM: three or more sizes trace how
    # GEMM efficiency grows with the rows (on a CPU it saturates within tens of tokens)
    static_rows = {p.input_tokens * p.load for p in points if p.load_kind == "static"}
    if not operators and len(static_rows) >= STATIC_GEMM_SIZES:
        params.append("gemm_half_tokens")
    if any(p.tp > 1 for p in points):
        params.append("allreduce_us")
    by_gpu: dict[str, set[Any]] = {}
    for point in points:
        by_gpu.setdefault(point.gpu, set()).add(catalog.precisions.get(point.precision))
    for precisions in by_gpu.values():
        if not any(p.weight_bits == 16 for p in precisions):
            continue
        for precision in sorted(precisions, key=lambda p: p.name):
            scale = _scale_param(precision)
            if scale and scale not in params:
                params.append(scale)
    return params


def _scale_param(precision: Any) -> str | None:
    if precision.weight_bits == 16:
        return None
    if precision.weight_bits == 4 and precision.compute_peak in ("fp16_tflops", "bf16_tflops"):
        return "int4_gemm_scale"
    return {
        "fp8_tflops": "fp8_gemm_scale",
        "int8_tops": "int8_gemm_scale",
        "fp4_tflops": "fp4_gemm_scale",
    }.get(precision.compute_peak)


# The operator timings together weigh this share of the serving measurements in a fit: enough
# to pin the per-operator efficiencies, not so much that kernels measured under one engine
# outvote the serving measurements of another.
OPERATOR_WEIGHT = 0.5


def _fit_predict(point: Measurement, profile: Profile, catalog: Catalog) -> float:
    """:func:`predict`, continued past saturation so a fit is pushed back from it: a Poisson
    load beyond the capacity is priced at 99% of the capacity, its latencies growing with the
    fourth power of the overload and its throughput held at the capacity."""
    try:
        return predict(point, profile, catalog)
    except SaturatedError:
        if point.load_kind != "qps":
            return math.inf
    model = LatencyModel(deployment_of(point, catalog), profile)
    capacity = saturation_qps(model, point.input_tokens, point.output_tokens)
    if capacity <= 0:
        return math.inf
    if point.metric in THROUGHPUTS:
        rate = min(point.load, capacity)
        return rate * point.output_tokens if point.metric == "output_throughput" else rate
    try:
        edge = predict(replace(point, load=0.99 * capacity), profile, catalog)
    except SaturatedError:
        return math.inf
    return edge * (point.load / (0.99 * capacity)) ** 4


def log_errors(
    points: Sequence[Measurement], profile: Profile, catalog: Catalog | None = None
) -> np.ndarray:
    """log(predicted / measured) of each point, as :func:`fit` weighs them (a prediction past
    saturation is continued, see ``_fit_predict``)."""
    catalog = catalog or load_catalog()
    predicted = [_fit_predict(p, profile, catalog) for p in points]
    return np.asarray(np.log(np.minimum(predicted, 1e12)) - np.log([p.value for p in points]))


def fit(
    points: Sequence[Measurement],
    start: Profile,
    params: Sequence[str] | None = None,
    catalog: Catalog | None = None,
    operators: Sequence[OperatorPoint] = (),
) -> Profile:
    """The profile whose parameters ``params`` (default: :func:`fitted_params`) minimise robust
    log errors over ``points`` and, weighted by :data:`OPERATOR_WEIGHT`, over ``operators``
    (per-operator timings, which pin the GEMM curve and attention efficiencies)."""
    catalog = catalog or load_catalog()
    if params is None:
        params = fitted_params(points, catalog, operators=bool(operators))
    op_measured = np.log([o.measured_ms for o in operators]) if operators else np.zeros(0)
    op_weight = math.sqrt(OPERATOR_WEIGHT * len(points) / len(operators)) if operators else 0.0
    needs = serving_determined(params, bool(operators))
    if len(points) < needs:
        raise PlannerError(
            f"{len(points)} measurements cannot fit {needs} parameters; add measurements"
        )
    low = np.array([FIT_BOUNDS[p][0] for p in params])
    high = np.array([FIT_BOUNDS[p][1] for p in params])
    x0 = np.clip([getattr(start, p) for p in params], low, high)
    measured = np.log([p.value for p in points])

    def residuals(x: np.ndarray) -> np.ndarray:
        profile = start.with_params(**dict(zip(params, map(float, x), strict=True)))
        predicted = [_fit_predict(p, profile, catalog) for p in points]
        serving = np.log(np.minimum(predicted, 1e12)) - measured
        if not operators:
            return serving
        kernels = np.log([operator_ms(o, profile, catalog) for o in operators]) - op_measured
        return np.concatenate([serving, op_weight * kernels])

    from scipy.optimize import least_squares  # SciPy only when fitting (0.3 s to import)

    result = least_squares(
        residuals, x0, bounds=(low, high), loss="soft_l1", f_scale=0.1, x_scale="jac"
    )
    return start.with_params(**dict(zip(params, map(float, result.x), strict=True)))


def calibrate(
    points: Sequence[Measurement],
    start: Profile,
    *,
    excluded: Sequence[Excluded] = (),
    holdout: float = 0.3,
    catalog: Catalog | None = None,
    operators: Sequence[OperatorPoint] = (),
) -> CalibrationReport:
    """Fit ``start`` to ``points``: once on a training split (to report held-out error), then on
    all points (the profile to use)."""
    catalog = catalog or load_catalog()
    usable = []
    excluded = list(excluded)
    for point in points:
        reason = _unusable_reason(point, start, catalog)
        if reason is None:
            usable.append(point)
        else:
            excluded.append(Excluded(point.row, reason))
    test_keys = split_points(usable, holdout)
    train = [p for p in usable if p.key not in test_keys]
    params = fitted_params(usable, catalog, operators=bool(operators))
    needs = serving_determined(params, bool(operators))
    if len(usable) < needs:
        raise PlannerError(
            f"{len(usable)} usable measurements ({len(excluded)} excluded) cannot fit "
            f"{needs} parameters; add measurements"
        )
    if len(train) < needs:
        raise UsageError(
            f"--holdout {holdout:g} leaves {len(train)} of the {len(usable)} measurements to "
            f"fit {needs} parameters; give a smaller --holdout"
        )
    heldout_fit = fit(train, start, params, catalog=catalog, operators=operators)
    final = fit(usable, heldout_fit, params, catalog=catalog, operators=operators)
    return CalibrationReport(
        profile=final,
        start=start,
        points=list(usable),
        excluded=excluded,
        test_keys=test_keys,
        before=_errors(usable, start, test_keys, catalog),
        heldout_fit=heldout_fit,
        heldout=_errors(usable, heldout_fit, test_keys, catalog),
        after=_errors(usable, final, test_keys, catalog),
        fitted=list(params),
        operators_before=operator_errors(operators, start, catalog) if operators else [],
        operators_after=operator_errors(operators, final, catalog) if operators else [],
    )


def _unusable_reason(point: Measurement, start: Profile, catalog: Catalog) -> str | None:
    """Why the model cannot predict a point (under the starting profile), or None."""
    try:
        predict(point, start, catalog)
        if point.load_kind in ("batch", "static"):
            _check_batch_fits(point, catalog)
    except SaturatedError as exc:
        return f"{point.key}: the load model finds this load saturated ({exc})"
    except UnsupportedError as exc:
        return f"{point.key}: {exc}"
    return None


def _check_batch_fits(point: Measurement, catalog: Catalog) -> None:
    """A static batch whose KV cache exceeds the deployment's cannot run as measured."""
    deployment = deployment_of(point, catalog)
    per_sequence = point.input_tokens + point.output_tokens
    need = int(point.load) * per_sequence
    capacity = deployment.kv_capacity_tokens
    if need > capacity:
        raise UnsupportedError(
            f"a batch of {int(point.load):,} sequences needs {need:,} tokens of KV cache; "
            f"the model finds room for {capacity:,} ({capacity // per_sequence:,} sequences)"
        )


def select(
    points: Iterable[Measurement],
    *,
    engine: str,
    gpu: str | None,
    vendor: str | None = None,
    catalog: Catalog | None = None,
) -> list[Measurement]:
    """The points of one engine, on one GPU (``gpu``) or one vendor's GPUs (``vendor``)."""
    catalog = catalog or load_catalog()

    def wanted(p: Measurement) -> bool:
        if vendor is not None and catalog.gpus.get(p.gpu).vendor.lower() != vendor.lower():
            return False
        return p.engine == engine and (gpu is None or p.gpu == gpu)

    return [p for p in points if wanted(p)]
