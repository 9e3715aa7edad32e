"""Per-operator check of the latency model against published operator timings.

``data/reference/operator_timings.csv`` holds median per-layer times of single operators (QKV,
O, MLP up+gate and down projections; prefill and decode attention) that Microsoft's Vidur
simulator profiled on A100-80GB and H100-SXM GPUs (see ``data/reference/README.md``). This
module reads them, predicts each one from :class:`planner.latency.model.LatencyModel` (its public
``cost`` API only) and summarises the errors by GPU, operator family and token bucket.

The model prices whole groups of operators for all layers of one GPU's shard; a point is priced
as its share of the matching group, divided by the model's layers:

- ``linear_qkv`` / ``linear_o``: the ``projections`` group split by parameter count
  (Q, K, V versus O);
- ``linear_mlp_up_gate`` / ``linear_mlp_down``: 2/3 and 1/3 of the ``mlp`` group (gated MLP);
- ``attn_prefill``: ``attention`` for ``batch`` sequences of ``prefill_len`` new tokens each
  after ``context`` cached ones (``context`` = 0: a fresh prompt): pairs
  batch x (prefill_len x context + prefill_len (prefill_len + 1) / 2), KV read batch x context;
- ``attn_decode``: ``attention`` for ``batch`` sequences with ``context`` tokens of context
  each: pairs batch x (context + 1), KV read batch x context.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from planner.errors import PlannerError
from planner.latency.catalog import Catalog, ModelSpec
from planner.latency.model import Deployment, LatencyModel
from planner.latency.profile import Profile
from planner.paths import data_dir

LINEAR_OPERATORS = ("linear_qkv", "linear_o", "linear_mlp_up_gate", "linear_mlp_down")
ATTENTION_OPERATORS = ("attn_prefill", "attn_decode")
OPERATORS = LINEAR_OPERATORS + ATTENTION_OPERATORS
FAMILIES = ("linear", "attn_prefill", "attn_decode")
BUCKETS = ("<=128", "129-511", ">=512")  # by the point's tokens through the operator
REQUIRED_COLUMNS = (
    "gpu",
    "model",
    "tp",
    "operator",
    "tokens",
    "batch",
    "context",
    "prefill_len",
    "measured_ms",
    "dtype",
)
MAX_ROWS = 1_000_000  # a reference file, not a dataset: refuse anything absurdly large


class OperatorDataError(PlannerError):
    """The operator-timings file is missing or malformed."""


def bundled_operator_timings_path() -> Path:
    """The bundled file, ``data/reference/operator_timings.csv`` (or its ``.gz``)."""
    folder = data_dir() / "reference"
    plain, packed = folder / "operator_timings.csv", folder / "operator_timings.csv.gz"
    return packed if packed.exists() and not plain.exists() else plain


@dataclass(frozen=True)
class OperatorPoint:
    """One measured operator: median milliseconds per layer on one GPU of a TP group."""

    gpu: str
    model: str
    tp: int
    operator: str
    tokens: int  # tokens through the operator (linear: rows; prefill: batch x prefill_len)
    batch: int  # sequences (attention); 0 for linear operators
    context: int  # cached tokens per sequence before this step (attention); 0 for linear
    prefill_len: int  # new tokens per sequence (attn_prefill); 0 otherwise
    measured_ms: float
    dtype: str = "fp16"
    backend: str = ""
    source_repo: str = ""
    source_path: str = ""
    commit: str = ""

    @property
    def family(self) -> str:
        """``linear``, ``attn_prefill`` or ``attn_decode``."""
        return "linear" if self.operator in LINEAR_OPERATORS else self.operator

    @property
    def bucket(self) -> str:
        """The token bucket: ``<=128``, ``129-511`` or ``>=512``."""
        return token_bucket(self.tokens)


def token_bucket(tokens: int) -> str:
    if tokens <= 128:
        return BUCKETS[0]
    if tokens < 512:
        return BUCKETS[1]
    return BUCKETS[2]


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise OperatorDataError(f"operator timings file not found: {path}")
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        return raw.decode("utf-8-sig")
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise OperatorDataError(f"{path}: not a readable UTF-8 CSV file ({exc})") from None


def _whole(path: Path, number: int, row: dict[str, str], column: str, minimum: int) -> int:
    text = (row.get(column) or "").strip()
    if not text and column in ("batch", "context", "prefill_len"):
        return 0  # not applicable to this operator
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not value.is_integer() or value < minimum:
        raise OperatorDataError(
            f"{path}: row {number}, column {column}: expected a whole number >= {minimum}, "
            f"got {text[:40]!r}"
        )
    return int(value)


def _point(path: Path, number: int, row: dict[str, str]) -> OperatorPoint:
    operator = (row.get("operator") or "").strip()
    if operator not in OPERATORS:
        raise OperatorDataError(
            f"{path}: row {number}, column operator: expected one of {', '.join(OPERATORS)}, "
            f"got {operator[:40]!r}"
        )
    text = (row.get("measured_ms") or "").strip()
    try:
        measured = float(text)
    except ValueError:
        measured = math.nan
    if not math.isfinite(measured) or measured <= 0:
        raise OperatorDataError(
            f"{path}: row {number}, column measured_ms: expected a positive number of "
            f"milliseconds, got {text[:40]!r}"
        )
    for column in ("gpu", "model", "dtype"):
        if not (row.get(column) or "").strip():
            raise OperatorDataError(f"{path}: row {number}, column {column}: empty")
    attention = operator in ATTENTION_OPERATORS
    decode, prefill = operator == "attn_decode", operator == "attn_prefill"
    point = OperatorPoint(
        gpu=row["gpu"].strip(),
        model=row["model"].strip(),
        tp=_whole(path, number, row, "tp", 1),
        operator=operator,
        tokens=_whole(path, number, row, "tokens", 1),
        batch=_whole(path, number, row, "batch", 1 if attention else 0),
        context=_whole(path, number, row, "context", 1 if decode else 0),
        prefill_len=_whole(path, number, row, "prefill_len", 1 if prefill else 0),
        measured_ms=measured,
        dtype=row["dtype"].strip(),
        backend=(row.get("backend") or "").strip(),
        source_repo=(row.get("source_repo") or "").strip(),
        source_path=(row.get("source_path") or "").strip(),
        commit=(row.get("commit") or "").strip(),
    )
    expected = {
        "attn_prefill": point.batch * point.prefill_len,
        "attn_decode": point.batch,
    }.get(operator, point.tokens)
    if point.tokens != expected:
        raise OperatorDataError(
            f"{path}: row {number}, column tokens: {operator} with batch {point.batch} and "
            f"prefill_len {point.prefill_len} has {expected} tokens, got {point.tokens}"
        )
    return point


def read_operator_points(path: Path | str | None = None) -> list[OperatorPoint]:
    """The measured operators of ``path`` (default: the bundled file), every cell checked: a
    malformed file is an :class:`OperatorDataError` naming its file, row and column."""
    path = Path(path) if path is not None else bundled_operator_timings_path()
    text = _read_text(path)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = reader.fieldnames or []
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise OperatorDataError(
                f"{path}: missing column {missing[0]!r} (needs {', '.join(REQUIRED_COLUMNS)})"
            )
        points = []
        for number, row in enumerate(reader, start=1):
            if number > MAX_ROWS:
                raise OperatorDataError(f"{path}: more than {MAX_ROWS:,} rows")
            points.append(_point(path, number, {k: v or "" for k, v in row.items() if k}))
    except csv.Error as exc:
        raise OperatorDataError(f"{path}: not a readable CSV file ({exc})") from None
    if not points:
        raise OperatorDataError(f"{path}: no data rows")
    return points


def _qkv_share(model: ModelSpec) -> float:
    """Q, K and V's share of the attention projections' parameters (O has the rest)."""
    q = model.hidden_size * model.attention_heads * model.head_dim
    kv = 2 * model.hidden_size * model.kv_heads * model.head_dim
    return (q + kv) / model.attention_params_per_layer


def predict_ms(point: OperatorPoint, profile: Profile, catalog: Catalog) -> float:
    """The latency model's milliseconds per layer for ``point`` (see the module docstring)."""
    model = catalog.models.get(point.model)
    deployment = Deployment(
        catalog.gpus.get(point.gpu), model, catalog.precisions.get(point.dtype), tp=point.tp
    )
    latency = LatencyModel(deployment, profile)
    if point.operator in LINEAR_OPERATORS:
        cost = latency.cost(point.tokens, 0.0, 0.0, 0.0)
        projection = point.operator in ("linear_qkv", "linear_o")
        group = float(cost.projections if projection else cost.mlp)
        share = {
            "linear_qkv": _qkv_share(model),
            "linear_o": 1.0 - _qkv_share(model),
            "linear_mlp_up_gate": 2.0 / 3.0,
            "linear_mlp_down": 1.0 / 3.0,
        }[point.operator]
        seconds = group * share
    else:
        b, c = float(point.batch), float(point.context)
        if point.operator == "attn_prefill":
            q = float(point.prefill_len)
            tokens, pairs = b * q, b * (q * c + q * (q + 1) / 2)
        else:
            tokens, pairs = b, b * (c + 1)
        cost = latency.cost(tokens, pairs, b * c, 0.0)
        seconds = float(cost.attention)
    return seconds / model.layers * 1e3


@dataclass(frozen=True)
class PointError:
    """One point's prediction and its signed relative error ((predicted - measured) / measured;
    negative: the model predicts the operator too fast)."""

    point: OperatorPoint
    predicted_ms: float

    @property
    def error(self) -> float:
        return (self.predicted_ms - self.point.measured_ms) / self.point.measured_ms


@dataclass(frozen=True)
class ErrorRow:
    """Errors of one (GPU, operator family, token bucket) group, in percent."""

    gpu: str
    family: str
    bucket: str
    points: int
    signed_median_pct: float  # median of (predicted - measured) / measured
    median_abs_pct: float  # median of |predicted - measured| / measured

    def to_dict(self) -> dict[str, str | int | float]:
        return {
            "gpu": self.gpu,
            "family": self.family,
            "bucket": self.bucket,
            "points": self.points,
            "signed_median_pct": self.signed_median_pct,
            "median_abs_pct": self.median_abs_pct,
        }


def point_errors(
    points: Iterable[OperatorPoint], profile: Profile, catalog: Catalog
) -> list[PointError]:
    """Every point with its prediction."""
    return [PointError(p, predict_ms(p, profile, catalog)) for p in points]


def summarize(errors: Sequence[PointError]) -> list[ErrorRow]:
    """Signed and absolute median errors per (GPU, family, bucket), in a stable order."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for e in errors:
        groups.setdefault((e.point.gpu, e.point.family, e.point.bucket), []).append(e.error)
    order = {name: i for i, name in enumerate(FAMILIES + BUCKETS)}
    rows = [
        ErrorRow(
            gpu=gpu,
            family=family,
            bucket=bucket,
            points=len(values),
            signed_median_pct=100.0 * statistics.median(values),
            median_abs_pct=100.0 * statistics.median(abs(v) for v in values),
        )
        for (gpu, family, bucket), values in groups.items()
    ]
    return sorted(rows, key=lambda r: (r.gpu, order[r.family], order[r.bucket]))


def operator_errors(
    points: Iterable[OperatorPoint], profile: Profile, catalog: Catalog
) -> list[ErrorRow]:
    """The error summary of ``points`` under ``profile``: one row per (GPU, operator family,
    token bucket) that has points."""
    return summarize(point_errors(points, profile, catalog))


def markdown_table(rows: Sequence[ErrorRow]) -> str:
    """``rows`` as a Markdown table (for docs: paste before/after a model change)."""
    lines = [
        "| GPU | family | tokens | points | signed median error | median abs error |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.gpu} | {r.family} | {r.bucket} | {r.points} | "
            f"{r.signed_median_pct:+.0f}% | {r.median_abs_pct:.0f}% |"
        )
    return "\n".join(lines)
