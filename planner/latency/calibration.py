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
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from planner.errors import InputFileError, PlannerError, RowProblem, UsageError
from planner.latency.catalog import Catalog, UnsupportedError, load_catalog
from planner.latency.model import Deployment, LatencyModel
from planner.latency.profile import DEFAULT_ENGINE, FIT_BOUNDS, Profile
from planner.latency.serving import LoadKind, SaturatedError, steady_state

METRICS = {"ttft": "ttft", "itl": "tpot", "tpot": "tpot", "e2e": "e2e"}
UNITS = {"ms": 1.0, "s": 1000.0}
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
    load_kind: LoadKind
    load: float
    metric: str  # ttft, tpot or e2e
    value_ms: float
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


def _parse_load(text: str) -> tuple[LoadKind, float] | None:
    """``1`` -> batch 1; ``QPS=2``; ``concurrency=50``; ``QPS=INF`` -> None (a burst)."""
    name, sep, value = text.strip().lower().partition("=")
    kind: LoadKind
    if not sep:
        kind, value = "batch", name
    elif value in ("inf", "infinity"):
        return None
    else:
        kinds: dict[str, LoadKind] = {
            "qps": "qps",
            "rps": "qps",
            "concurrency": "concurrency",
            "batch": "batch",
        }
        if name not in kinds:
            raise ValueError(f"expected 1, QPS=N, concurrency=N or batch=N, got {text!r}")
        kind = kinds[name]
    try:
        load = float(value)
    except ValueError:
        raise ValueError(f"expected a positive number of {kind}, got {text!r}") from None
    if not (math.isfinite(load) and load > 0):
        raise ValueError(f"expected a positive number of {kind}, got {text!r}")
    return kind, load


BURST_REASON = "a burst at infinite rate: queueing, not iteration speed (the simulator's job)"


class _BadValueError(Exception):
    def __init__(self, column: str, message: str) -> None:
        super().__init__(message)
        self.column = column


def read_measurements(
    path: Path, catalog: Catalog | None = None
) -> tuple[list[Measurement], list[Excluded]]:
    """Measurements of a CSV file, with catalog names resolved; rows that cannot be modelled
    (a burst of infinite rate) are returned as excluded with the reason."""
    catalog = catalog or load_catalog()
    if not path.exists():
        raise InputFileError(path, "file not found")
    points: list[Measurement] = []
    excluded: list[Excluded] = []
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            needs = ", ".join(REQUIRED_COLUMNS)
            raise InputFileError(path, f"missing required column {missing[0]!r} (needs {needs})")
        for row_number, row in enumerate(reader, start=1):
            try:
                point = _measurement(row, catalog)
            except _BadValueError as bad:
                problem = RowProblem(row_number, bad.column, str(bad), row_number + 1)
                raise InputFileError(path, problem) from None
            if point is None:
                excluded.append(Excluded(row_number, BURST_REASON))
            else:
                points.append(replace(point, row=row_number))
    return points, excluded


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


def _number(row: dict[str, str], column: str, kind: type[int] | type[float]) -> Any:
    try:
        return kind(row[column])
    except (TypeError, ValueError):
        raise _BadValueError(column, f"expected a number, got {row[column]!r}") from None


def _measurement(row: dict[str, str], catalog: Catalog) -> Measurement | None:
    gpu = _catalog_name(catalog.gpus, "gpu", row["gpu"])
    model = _catalog_name(catalog.models, "model", row["model"])
    precision = _catalog_name(catalog.precisions, "precision", row["precision"])
    try:
        load = _parse_load(row["batch_or_concurrency"])
    except ValueError as exc:
        raise _BadValueError("batch_or_concurrency", str(exc)) from None
    if load is None:
        return None
    metric = row["metric"].strip().lower().removeprefix("mean_")
    if metric not in METRICS:
        raise _BadValueError(
            "metric", f"expected TTFT, ITL, TPOT or E2E (optionally mean_), got {row['metric']!r}"
        )
    unit = row["unit"].strip().lower()
    if unit not in UNITS:
        raise _BadValueError("unit", f"expected ms or s, got {row['unit']!r}")
    value = _number(row, "value", float) * UNITS[unit]
    if not math.isfinite(value) or value <= 0:
        raise _BadValueError("value", f"expected a positive latency, got {row['value']!r}")
    return Measurement(
        gpu=gpu,
        model=model,
        precision=precision,
        tp=_number(row, "num_gpus", int),
        engine=(row.get("engine") or DEFAULT_ENGINE).strip(),
        kv_cache=(row.get("kv_cache") or "fp16").strip().lower(),
        input_tokens=_number(row, "input_len", int),
        output_tokens=_number(row, "output_len", int),
        load_kind=load[0],
        load=load[1],
        metric=METRICS[metric],
        value_ms=value,
        source=(row.get("source") or row.get("url_or_path") or "").strip(),
    )


def predict(point: Measurement, profile: Profile, catalog: Catalog | None = None) -> float:
    """The model's value (ms) for a measurement's metric, under ``profile``."""
    catalog = catalog or load_catalog()
    deployment = Deployment(
        gpu=catalog.gpus.get(point.gpu),
        model=catalog.models.get(point.model),
        precision=catalog.precisions.get(point.precision),
        tp=point.tp,
        kv_bytes=1.0 if point.kv_cache == "fp8" else 2.0,
    )
    latency = steady_state(
        LatencyModel(deployment, profile),
        point.input_tokens,
        point.output_tokens,
        point.load_kind,
        point.load,
    )
    return {"ttft": latency.ttft_ms, "tpot": latency.tpot_ms, "e2e": latency.e2e_ms}[point.metric]


@dataclass
class PointError:
    key: str
    metric: str
    measured_ms: float
    predicted_ms: float
    split: str  # train or test

    @property
    def error(self) -> float:
        """Signed relative error of the prediction."""
        return self.predicted_ms / self.measured_ms - 1


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

    def summary(self) -> dict[str, Any]:
        def split(errors: list[PointError], which: str) -> ErrorSummary:
            return ErrorSummary.of([e for e in errors if e.split == which])

        return {
            "profile": self.profile.to_dict(),
            "points": len(self.points),
            "excluded": [asdict(e) for e in self.excluded],
            "before_all": asdict(ErrorSummary.of(self.before)),
            "before_test": asdict(split(self.before, "test")),
            "heldout_train": asdict(split(self.heldout, "train")),
            "heldout_test": asdict(split(self.heldout, "test")),
            "after_all": asdict(ErrorSummary.of(self.after)),
            "per_point": [
                {
                    "key": b.key,
                    "split": b.split,
                    "measured_ms": b.measured_ms,
                    "before_ms": b.predicted_ms,
                    "heldout_ms": h.predicted_ms,
                    "after_ms": a.predicted_ms,
                }
                for b, h, a in zip(self.before, self.heldout, self.after, strict=True)
            ],
        }


def split_points(points: Sequence[Measurement], holdout: float) -> set[str]:
    """A stable held-out set: the points whose key hashes lowest, about ``holdout`` of them."""
    if not 0 <= holdout < 1:
        raise UsageError(f"--holdout {holdout}: expected a fraction in [0, 1)")
    ranked = sorted(points, key=lambda p: hashlib.sha256(p.key.encode()).hexdigest())
    return {p.key for p in ranked[: round(len(ranked) * holdout)]}


def _errors(
    points: Sequence[Measurement], profile: Profile, test_keys: set[str], catalog: Catalog
) -> list[PointError]:
    return [
        PointError(
            p.key,
            p.metric,
            p.value_ms,
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


def fit(
    points: Sequence[Measurement],
    start: Profile,
    params: Sequence[str] = tuple(FIT_BOUNDS),
    catalog: Catalog | None = None,
) -> Profile:
    """The profile whose parameters ``params`` minimise robust log errors over ``points``."""
    catalog = catalog or load_catalog()
    if len(points) < len(params):
        raise PlannerError(
            f"{len(points)} measurements cannot fit {len(params)} parameters; add measurements"
        )
    low = np.array([FIT_BOUNDS[p][0] for p in params])
    high = np.array([FIT_BOUNDS[p][1] for p in params])
    x0 = np.clip([getattr(start, p) for p in params], low, high)
    measured = np.log([p.value_ms for p in points])

    def residuals(x: np.ndarray) -> np.ndarray:
        profile = start.with_params(**dict(zip(params, map(float, x), strict=True)))
        predicted = [_safe_predict(p, profile, catalog) for p in points]
        return np.log(np.minimum(predicted, 1e12)) - measured

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
    heldout_fit = fit(train, start, catalog=catalog)
    final = fit(usable, heldout_fit, catalog=catalog)
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
    )


def _unusable_reason(point: Measurement, start: Profile, catalog: Catalog) -> str | None:
    """Why the model cannot predict a point (under the starting profile), or None."""
    try:
        predict(point, start, catalog)
    except SaturatedError as exc:
        return f"{point.key}: the load model finds this load saturated ({exc})"
    except UnsupportedError as exc:
        return f"{point.key}: {exc}"
    return None


def select(points: Iterable[Measurement], *, engine: str, gpu: str | None) -> list[Measurement]:
    return [p for p in points if p.engine == engine and (gpu is None or p.gpu == gpu)]
