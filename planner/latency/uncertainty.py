"""Error bars: how far a predicted latency percentile may be from what a real fleet measures.

Two sources of error, combined:

* **the model's error**, measured held out (``data/calibration/accuracy.json``: per engine, GPU
  class, metric and statistic, the signed relative errors ``e = (predicted - measured) /
  measured`` of configurations left out of the fit). A prediction ``pred`` then stands for a
  measurement ``pred / (1 + e)``; over the empirical quantiles ``q`` of ``e`` a two-sided ``c``
  interval is ``[pred / (1 + q((1 + c) / 2)), pred / (1 + q((1 - c) / 2))]`` and the one-sided
  upper bound a fleet is sized against is ``pred / (1 + q(1 - c))``;
* **the simulator's sampling error**: a percentile read from ``n`` simulated requests is an
  order statistic. Distribution-free, the number of requests below the true ``p``-quantile is
  ``Binomial(n, p)``, so the ``k``-th smallest request is above it with probability
  ``P(Binomial(n, p) <= k - 1)``; the smallest such ``k`` with that at least ``c`` is the upper
  bound (a P99 from 300 requests: the slowest request; from 100,000: a few ranks above the P99).

Combined: ``upper = sampling_upper / (1 + q(1 - c))``. Pure: numbers in, numbers out (the one
read is :func:`load_accuracy`'s file). docs/simulator.md and docs/recommender.md, "Error bars".
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binom

from planner.errors import UsageError
from planner.paths import data_dir

ACCURACY_ENV = "PLANNER_ACCURACY"  # another accuracy file (tests, a team's own measurements)
MAX_ACCURACY_BYTES = 16 * 1024 * 1024
DEFAULT_CONFIDENCE = 0.9
ENGINES = ("trtllm", "vllm", "sglang", "*")
METRICS = ("ttft", "tpot", "e2e")
STATS = ("mean", "p50", "p90", "p95", "p99")
# a statistic with no measured group falls back to the next (a P99's error is at least a P95's)
STAT_FALLBACK = {
    "p99": ("p99", "p95", "mean"),
    "p95": ("p95", "mean"),
    "p90": ("p90", "p95", "p50", "mean"),
    "p50": ("p50", "mean"),
    "mean": ("mean",),
}
# No measured group at all: a conservative +-30% (issue 37 found the step time 15-30% off under
# load, in either direction by engine), stated in the result as the group used.
DEFAULT_ERROR = 0.30
GPU_FAMILIES = (
    "H100",
    "H200",
    "A100",
    "B200",
    "GH200",
    "L40S",
    "L4",
    "A10G",
    "A40",
    "T4",
    "MI300X",
)


def gpu_class(gpu_name: str) -> str:
    """The family a catalog GPU belongs to: "H100-SXM", "H100-PCIe", "H100-NVL" -> "H100";
    "A100-80GB" -> "A100"; "GH200-144GB" -> "GH200"; "L4" -> "L4"; else the name itself."""
    name = gpu_name.strip().upper()
    for family in GPU_FAMILIES:
        if name == family or name.startswith(family + "-") or name.startswith(family + " "):
            return family
    return gpu_name.strip()


def parse_confidence(value: str | float | None, option: str = "--confidence") -> float | None:
    """A confidence level: a share in (0, 1) (0.9) or a percentage ("90%"); 0, "0" or "none"
    turn the margin off (None)."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ("none", "off", "0", "0.0", "0%"):
        return None
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        number = math.nan
    if number == 0:
        return None
    if not 0 < number < 1:  # also NaN
        raise UsageError(
            f"{option} {value}: expected a confidence level above 0 and below 1 (0.9, or 90%), "
            "or 0/none for no margin"
        )
    return number


@dataclass(frozen=True)
class ErrorGroup:
    """The held-out errors of one engine, GPU class, metric and statistic ("*": any)."""

    engine: str
    gpu_class: str
    metric: str
    stat: str
    errors: tuple[float, ...]
    points: int = 0
    configurations: int = 0
    median_abs: float | None = None
    p90_abs: float | None = None

    @property
    def label(self) -> str:
        return f"{self.engine}/{self.gpu_class}/{self.metric}/{self.stat}"

    def quantile(self, q: float) -> float:
        """The ``q``-quantile of the signed errors (numpy's linear definition); the default
        group (no errors) is -DEFAULT_ERROR below the median and +DEFAULT_ERROR above."""
        if not self.errors:
            return 0.0 if q == 0.5 else (-DEFAULT_ERROR if q < 0.5 else DEFAULT_ERROR)
        return float(np.quantile(np.asarray(self.errors), min(max(q, 0.0), 1.0)))


DEFAULT_GROUP = ErrorGroup("*", "*", "*", "*", ())


@dataclass(frozen=True)
class ErrorChoice:
    """The group a prediction's error comes from, and how it was found."""

    group: ErrorGroup
    how: str  # "exact", "any GPU class", "any engine", "p95 for p99", "default", ...
    source: str  # the accuracy file, or "none"

    def to_dict(self) -> dict[str, Any]:
        g = self.group
        return {
            "group": g.label if g is not DEFAULT_GROUP else "default",
            "how": self.how,
            "points": g.points,
            "configurations": g.configurations,
            "median_abs": g.median_abs,
            "p90_abs": g.p90_abs,
            "source": self.source,
        }

    def describe(self) -> str:
        if self.group is DEFAULT_GROUP:
            return f"default +-{DEFAULT_ERROR:.0%} ({self.how})"
        return f"{self.group.label} ({self.group.points} points, {self.how})"


@dataclass(frozen=True)
class Accuracy:
    """The measured held-out errors (``source``: the file they came from, "none" without)."""

    source: str = "none"
    generated: str | None = None
    method: str | None = None
    groups: tuple[ErrorGroup, ...] = ()
    _index: dict[tuple[str, str, str, str], ErrorGroup] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for g in self.groups:
            self._index.setdefault((g.engine, g.gpu_class, g.metric, g.stat), g)

    def lookup(self, engine: str, gpu: str, metric: str, stat: str = "p99") -> ErrorChoice:
        """The group for ``engine`` on GPU class ``gpu`` (a catalog name is reduced to its
        class): engine and class, then any class, then any engine, each trying the statistics
        of ``STAT_FALLBACK[stat]`` in turn (the engine's own errors on a nearby statistic say
        more than another engine's on this one); else the conservative default."""
        family = gpu_class(gpu) if gpu != "*" else "*"
        for eng, cls, how in (
            (engine, family, "exact"),
            (engine, "*", "any GPU class"),
            ("*", family, "any engine"),
            ("*", "*", "any engine or GPU class"),
        ):
            for fallback in STAT_FALLBACK.get(stat, (stat,)):
                group = self._index.get((eng, cls, metric, fallback))
                if group is not None and group.errors:
                    if fallback != stat:
                        how = f"{how}, {fallback} for {stat}"
                    return ErrorChoice(group, how, self.source)
        why = "no accuracy file" if self.source == "none" else "no measured group matches"
        return ErrorChoice(DEFAULT_GROUP, why, self.source)


NO_ACCURACY = Accuracy()


def accuracy_path() -> Path:
    """``$PLANNER_ACCURACY``, else the bundled ``data/calibration/accuracy.json``."""
    override = os.environ.get(ACCURACY_ENV)
    return Path(override) if override else data_dir() / "calibration" / "accuracy.json"


def bundled_accuracy() -> Accuracy:
    """The accuracy file in force (:func:`accuracy_path`); :data:`NO_ACCURACY` (the default
    error everywhere) while the bundled file does not exist. A file named by the environment
    must exist."""
    path = accuracy_path()
    if not path.exists() and ACCURACY_ENV not in os.environ:
        return NO_ACCURACY
    return load_accuracy(path)


def accuracy_for(confidence: float | None, path: Path | None = None) -> Accuracy:
    """The held-out errors intervals at ``confidence`` are taken from: ``path``, else
    :func:`bundled_accuracy`; no file is read without a confidence."""
    if confidence is None:
        return NO_ACCURACY
    return load_accuracy(path) if path is not None else bundled_accuracy()


def load_accuracy(path: Path | str) -> Accuracy:
    """Read an accuracy file (see the module's docstring for the schema); a clear
    :class:`UsageError` naming the file and the field on anything malformed."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_ACCURACY_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"accuracy file {path}: cannot read it ({exc.strerror or exc})") from exc
    if len(raw) > MAX_ACCURACY_BYTES:
        raise UsageError(
            f"accuracy file {path}: larger than {MAX_ACCURACY_BYTES // 2**20} MiB; not read"
        )
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"accuracy file {path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("groups"), list):
        raise UsageError(f"accuracy file {path}: expected an object with a 'groups' list")
    groups = tuple(_group(path, i, g) for i, g in enumerate(data["groups"]))
    text = {
        k: data.get(k) if isinstance(data.get(k), str) else None for k in ("generated", "method")
    }
    return Accuracy(str(path), text["generated"], text["method"], groups)


def _group(path: Path, index: int, raw: Any) -> ErrorGroup:
    where = f"accuracy file {path}: groups[{index}]"
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: expected an object")
    choices = {"engine": ENGINES, "metric": METRICS, "stat": STATS}
    for key, allowed in choices.items():
        if raw.get(key) not in allowed:
            raise UsageError(
                f"{where}.{key} {raw.get(key)!r}: expected one of {', '.join(allowed)}"
            )
    if not isinstance(raw.get("gpu_class"), str) or not raw["gpu_class"].strip():
        raise UsageError(f"{where}.gpu_class: expected a GPU class such as H100, or *")
    errors = raw.get("errors")
    if not isinstance(errors, list) or not errors:
        raise UsageError(f"{where}.errors: expected a non-empty list of signed relative errors")
    values = []
    for j, e in enumerate(errors):
        if isinstance(e, bool) or not isinstance(e, int | float) or not math.isfinite(e) or e <= -1:
            raise UsageError(
                f"{where}.errors[{j}] {e!r}: expected a finite number above -1 "
                "((predicted - measured) / measured)"
            )
        values.append(float(e))
    counts = {}
    for key in ("points", "configurations"):
        value = raw.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UsageError(f"{where}.{key} {value!r}: expected a whole number >= 0")
        counts[key] = value
    shares: dict[str, float | None] = {}
    for key in ("median_abs", "p90_abs"):
        value = raw.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value < 0
        ):
            raise UsageError(f"{where}.{key} {value!r}: expected a share >= 0")
        shares[key] = None if value is None else float(value)
    return ErrorGroup(
        raw["engine"],
        gpu_class(raw["gpu_class"]) if raw["gpu_class"] != "*" else "*",
        raw["metric"],
        raw["stat"],
        tuple(values),
        counts["points"] or len(values),
        counts["configurations"],
        shares["median_abs"],
        shares["p90_abs"],
    )


# --- the model's error --------------------------------------------------------------------------


def model_interval(pred: float, group: ErrorGroup, confidence: float) -> tuple[float, float]:
    """The two-sided ``confidence`` interval of what is measured when ``pred`` is predicted."""
    high_q, low_q = group.quantile((1 + confidence) / 2), group.quantile((1 - confidence) / 2)
    return pred / (1 + high_q), pred / (1 + low_q)


def upper_factor(group: ErrorGroup, confidence: float) -> float:
    """``1 / (1 + q(1 - c))``: the one-sided upper bound of the measurement over the
    prediction (below 1 when the model over-predicts even at that quantile)."""
    return 1.0 / (1.0 + group.quantile(1 - confidence))


def sizing_factor(group: ErrorGroup, confidence: float | None) -> float:
    """The factor a fleet is sized against: :func:`upper_factor`, never below 1 (a model
    that over-predicts is not trusted to shrink the fleet); 1 without a confidence."""
    if confidence is None:
        return 1.0
    return max(1.0, upper_factor(group, confidence))


# --- the simulator's sampling error -------------------------------------------------------------


def upper_rank(n: int, p: float, confidence: float) -> int | None:
    """The 1-based order statistic ``X_(k)`` of ``n`` samples that is at or above the true
    ``p``-quantile with probability at least ``confidence``: the smallest ``k`` with
    ``P(Binomial(n, p) <= k - 1) >= confidence``; None when even the largest is not (too few)."""
    if n < 1:
        return None
    k = int(binom.ppf(confidence, n, p)) + 1
    return k if k <= n else None


def lower_rank(n: int, p: float, confidence: float) -> int | None:
    """The 1-based ``X_(j)`` at or below the true ``p``-quantile with probability at least
    ``confidence``: the largest ``j`` with ``P(Binomial(n, p) >= j) >= confidence``; None when
    even the smallest is not."""
    if n < 1:
        return None
    m = int(binom.ppf(1 - confidence, n, p))
    if binom.cdf(m, n, p) > 1 - confidence + 1e-12:
        m -= 1
    j = m + 1
    return j if j >= 1 else None


def rank_level(rank: int, n: int) -> float:
    """The quantile level whose numpy-linear value is the ``rank``-th smallest of ``n``."""
    return (rank - 1) / (n - 1) if n > 1 else 0.5


SUMMARY_LEVELS = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))


def summary_quantile(stats: Mapping[str, float | None], q: float) -> float | None:
    """A quantile between the percentiles a simulation summary keeps (p50, p90, p95, p99, max):
    interpolated linearly in ``-ln(1 - q)`` (exact for an exponential tail), past the P99
    extrapolated from the P95 and P99 that way and capped at the maximum."""
    known = [(level, stats.get(name)) for name, level in SUMMARY_LEVELS]
    points = [(-math.log(1 - level), float(v)) for level, v in known if v is not None]
    top = stats.get("max")
    if len(points) < 2:
        return None if top is None else float(top)
    if q >= 1:
        return float(top) if top is not None else None
    t = -math.log(1 - max(q, 0.0))
    xs, ys = [x for x, _ in points], [y for _, y in points]
    if t <= xs[0]:
        slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
        return max(0.0, ys[0] + (t - xs[0]) * slope)
    if t <= xs[-1]:
        return float(np.interp(t, xs, ys))
    slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    value = ys[-1] + (t - xs[-1]) * slope
    return min(value, float(top)) if top is not None else value


@dataclass(frozen=True)
class SamplingBounds:
    low: float
    high: float
    low_exact: bool  # False: too few requests, the sample's extreme stands in
    high_exact: bool


def sampling_bounds(
    n: int,
    p: float,
    confidence: float,
    quantile: Callable[[float], float | None],
    *,
    two_sided: bool,
) -> SamplingBounds | None:
    """The order-statistic bounds of a ``p``-quantile read from ``n`` samples (``quantile``:
    the sample's quantile function); two-sided at ``confidence`` (each side ``(1 + c) / 2``),
    else only the upper one is meaningful (the low one is the point)."""
    side = (1 + confidence) / 2 if two_sided else confidence
    hi, lo = upper_rank(n, p, side), lower_rank(n, p, side)
    high = quantile(rank_level(hi, n) if hi is not None else 1.0)
    low = quantile(rank_level(lo, n) if lo is not None else 0.0) if two_sided else quantile(p)
    if high is None or low is None:
        return None
    return SamplingBounds(low, high, lo is not None or not two_sided, hi is not None)


@dataclass(frozen=True)
class Interval:
    """A predicted percentile with its ``confidence`` interval ``[low, high]`` and the one-sided
    upper bound at the same confidence (what sizing checks)."""

    point: float
    low: float
    high: float
    upper: float
    confidence: float
    choice: ErrorChoice
    requests: int | None = None
    sampling_exact: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "low": self.low,
            "high": self.high,
            "upper": self.upper,
            "confidence": self.confidence,
            "group": self.choice.to_dict()["group"],
            "error_group": self.choice.to_dict(),
            "requests": self.requests,
            "sampling_bound_exact": self.sampling_exact,
        }


def percentile_interval(
    point: float,
    p: float,
    confidence: float,
    choice: ErrorChoice,
    *,
    requests: int | None = None,
    quantile: Callable[[float], float | None] | None = None,
) -> Interval:
    """``point`` (the ``p``-quantile predicted) with the model's error and, given the
    ``requests`` it was read from and their ``quantile`` function, the sampling error: the
    two-sided interval is the sampling interval widened by the model's, the upper bound
    ``sampling_upper / (1 + q(1 - c))``."""
    low = high = upper = point
    exact = True
    if requests and quantile is not None:
        both = sampling_bounds(requests, p, confidence, quantile, two_sided=True)
        one = sampling_bounds(requests, p, confidence, quantile, two_sided=False)
        if both is not None and one is not None:
            low, high, upper = min(both.low, point), max(both.high, point), max(one.high, point)
            exact = both.low_exact and both.high_exact and one.high_exact
    group = choice.group
    return Interval(
        point,
        low / (1 + group.quantile((1 + confidence) / 2)),
        high / (1 + group.quantile((1 - confidence) / 2)),
        upper * upper_factor(group, confidence),
        confidence,
        choice,
        requests,
        exact,
    )


def stats_intervals(
    values: Mapping[str, Any],
    metric: str,
    requests: int,
    confidence: float,
    accuracy: Accuracy,
    engine: str,
    gpu: str,
) -> dict[str, dict[str, Any]]:
    """The intervals of the percentiles a simulation summary keeps for ``metric`` (p50, p90,
    p95, p99, whichever it has: ``values``), from ``requests`` simulated requests, as the JSON
    results give them (``planner simulate`` and ``planner latency`` both)."""

    def quantile(q: float) -> float | None:
        return summary_quantile(values, q)

    return {
        name: percentile_interval(
            float(values[name]),
            level,
            confidence,
            accuracy.lookup(engine, gpu, metric, name),
            requests=requests,
            quantile=quantile,
        ).to_dict()
        for name, level in SUMMARY_LEVELS
        if values.get(name) is not None
    }
