"""Hardware, model and precision catalogs: plain CSV files under ``data/catalog/``, each row
with its source, read into small frozen dataclasses. The models a user adds from a Hugging Face
``config.json`` (``planner catalog add-model``, :func:`model_from_hf_config`) live in
``$PLANNER_HOME/catalog/models.csv`` and are merged over the bundled ones."""

from __future__ import annotations

import csv
import functools
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from planner.common.text import MAX_SHOWN_CHARS, closest, shown
from planner.errors import PlannerError, UsageError
from planner.paths import data_dir, user_catalog_dir

GIB = 1024**3
MIB = 1024**2
GB = 1e9
MEMORY_UNITS: Mapping[str, float] = {"GiB": GIB, "GB": GB}  # bytes per unit of ``GPU.memory``


class CatalogError(PlannerError):
    """A catalog file is missing or malformed."""


class UnsupportedError(UsageError):
    """A combination the hardware or model cannot run (FP8 without FP8 units, bad TP degree)."""


@dataclass(frozen=True)
class GPU:
    name: str
    aliases: tuple[str, ...]
    vendor: str
    memory: float  # the vendor's nominal figure ("80" for an 80 GB H100) in ``memory_unit``
    memory_unit: str  # "GiB" (HBM and GDDR capacities are binary) or "GB" (1e9 bytes)
    device_memory_mib: float | None  # total the driver reports (nvidia-smi MiB), when published
    mem_bw_gbps: float
    peak_tflops: Mapping[str, float]  # column (bf16_tflops, fp8_tflops, ...) -> dense peak
    interconnect: str
    link_gbps: float  # per direction, per GPU
    max_gpus_per_node: int
    source: str
    notes: str = ""

    @property
    def memory_bytes(self) -> float:
        """Device memory in bytes: the driver's total where known (what an engine can size
        its KV cache against), else the nominal figure in its unit."""
        if self.device_memory_mib is not None:
            return self.device_memory_mib * MIB
        return self.nominal_memory_bytes

    @property
    def nominal_memory_bytes(self) -> float:
        return self.memory * MEMORY_UNITS[self.memory_unit]

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB

    @property
    def bandwidth(self) -> float:
        """Memory bandwidth in bytes/s."""
        return self.mem_bw_gbps * GB

    def peak(self, column: str) -> float:
        """Dense peak in FLOP/s (or OP/s) for a precision's compute column."""
        value = self.peak_tflops.get(column)
        if value is None:
            raise UnsupportedError(
                f"{self.name} has no {column.split('_')[0].upper()} tensor-core peak "
                "in the catalog (unsupported or unknown)"
            )
        return value * 1e12


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer's shape, as its published config gives it.

    The fields after ``source`` are the 2026 models' (issue 33) and default to "not used", so
    a row without them is the plain grouped-query, every-layer-alike model it always was:

    - ``dense_layers``: leading layers with a dense MLP instead of experts (DeepSeek-V3's
      ``first_k_dense_replace`` = 3); ``moe_layer_step``: every step-th layer after them is a
      mixture of experts, the others dense (Llama 4 Maverick's ``interleave_moe_layer_step`` 2);
    - ``dense_intermediate_size``: the dense layers' MLP width (0: ``intermediate_size``, which
      for a mixture of experts is one routed expert's width);
    - ``shared_experts`` and ``shared_expert_intermediate_size`` (0: ``intermediate_size``):
      experts every token passes through besides its routed top-k;
    - ``kv_lora_rank``, ``q_lora_rank``, ``qk_rope_head_dim``, ``v_head_dim``: multi-head latent
      attention (MLA, DeepSeek-V2/V3): the KV cache holds one compressed latent of
      ``kv_lora_rank`` plus a shared RoPE key of ``qk_rope_head_dim`` per token and layer;
      ``head_dim`` is then the query/key head (nope + rope) and ``v_head_dim`` the value head;
    - ``sliding_window`` and ``sliding_layers``: that many layers attend only to the last
      ``sliding_window`` tokens (gpt-oss, Gemma 3) or within chunks of that size (Llama 4's
      chunked attention, priced the same way).
    """

    name: str
    aliases: tuple[str, ...]
    family: str
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    experts: int
    experts_per_token: int
    tied_embeddings: bool
    max_context: int
    source: str
    dense_layers: int = 0
    moe_layer_step: int = 1
    dense_intermediate_size: int = 0
    shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int = 0
    sliding_layers: int = 0

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention: a compressed KV cache, one latent per token and layer."""
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        """Layers with routed experts (none in a dense model)."""
        if not self.is_moe:
            return 0
        return (self.layers - self.dense_layers) // self.moe_layer_step

    @property
    def dense_mlp_layers(self) -> int:
        """Layers with a dense MLP (all of a dense model's)."""
        return self.layers - self.moe_layers

    @property
    def global_layers(self) -> int:
        """Layers whose attention (and KV cache) spans the whole context."""
        return self.layers - self.sliding_layers

    @property
    def attention_params_per_layer(self) -> int:
        """Q, K, V and O projections (grouped-query: K and V have kv_heads heads). MLA: the query
        down/up projections (or one full one without ``q_lora_rank``), the KV down-projection
        to the latent and the shared RoPE key, the latent's up-projection to each head's
        no-RoPE key and value, and the output projection."""
        if self.is_mla:
            heads, hidden = self.attention_heads, self.hidden_size
            v_dim = self.v_head_dim or self.head_dim
            q_width = heads * self.head_dim
            if self.q_lora_rank:
                q = hidden * self.q_lora_rank + self.q_lora_rank * q_width
            else:
                q = hidden * q_width
            kv_down = hidden * (self.kv_lora_rank + self.qk_rope_head_dim)
            kv_up = self.kv_lora_rank * heads * (self.head_dim - self.qk_rope_head_dim + v_dim)
            return q + kv_down + kv_up + heads * v_dim * hidden
        q_and_o = 2 * self.hidden_size * self.attention_heads * self.head_dim
        k_and_v = 2 * self.hidden_size * self.kv_heads * self.head_dim
        return q_and_o + k_and_v

    @property
    def attention_replicated_params_per_layer(self) -> int:
        """Attention weights every TP rank holds whole: MLA's down-projections (vLLM runs them
        as replicated linears; the heads' projections are split). None otherwise."""
        if not self.is_mla:
            return 0
        return self.hidden_size * (self.q_lora_rank + self.kv_lora_rank + self.qk_rope_head_dim)

    @property
    def expert_params(self) -> int:
        """One gated MLP (gate, up, down projections)."""
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def dense_mlp_params(self) -> int:
        """A dense layer's gated MLP."""
        return 3 * self.hidden_size * (self.dense_intermediate_size or self.intermediate_size)

    @property
    def shared_expert_params(self) -> int:
        """The shared experts of one MoE layer (every token passes through them)."""
        width = self.shared_expert_intermediate_size or self.intermediate_size
        return self.shared_experts * 3 * self.hidden_size * width

    @property
    def router_params_per_layer(self) -> int:
        return self.hidden_size * self.experts if self.is_moe else 0

    @property
    def embedding_params(self) -> int:
        """Input embedding plus LM head (counted once when tied)."""
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)

    @property
    def always_active_mlp_params(self) -> int:
        """MLP weights of a mixture of experts that every token passes through: the dense
        layers' MLPs and the MoE layers' shared experts (0 for a dense model, whose MLP is its
        one "expert")."""
        if not self.is_moe:
            return 0
        return (
            self.dense_mlp_layers * self.dense_mlp_params
            + self.moe_layers * self.shared_expert_params
        )

    @property
    def routed_expert_params(self) -> int:
        """All routed experts of all MoE layers (what expert parallelism spreads)."""
        return self.moe_layers * self.experts * self.expert_params

    def _layer_params(self, experts: int) -> int:
        """Matmul weights of all layers when ``experts`` experts per layer count."""
        if not self.is_moe:
            per_layer = self.attention_params_per_layer + experts * self.expert_params
            return self.layers * per_layer
        moe = self.moe_layers * (
            experts * self.expert_params + self.shared_expert_params + self.router_params_per_layer
        )
        dense = self.dense_mlp_layers * self.dense_mlp_params
        return self.layers * self.attention_params_per_layer + moe + dense

    @property
    def linear_params(self) -> int:
        """Weights of all transformer-layer matmuls (what quantization shrinks)."""
        return self._layer_params(self.experts)

    @property
    def total_params(self) -> int:
        return self.linear_params + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (MoE: only its top-k experts, plus the shared
        experts and dense layers; the input embedding and LM head both counted)."""
        return self._layer_params(self.experts_per_token) + self.embedding_params


@dataclass(frozen=True)
class Precision:
    name: str
    aliases: tuple[str, ...]
    weight_bits: int
    scale_bits_per_weight: float
    activation: str
    compute_peak: str  # GPU column for this precision's matmul peak
    dequant_compute_factor: float
    quality_delta_pct: float
    quality_source: str
    notes: str = ""
    # which weights the format quantizes: "all" linear layers, or in a mixture of experts only
    # the routed "experts" (the rest in 16-bit, as gpt-oss ships its MXFP4 checkpoint)
    scope: str = "all"

    def experts_only(self, model: ModelSpec) -> bool:
        """Whether only ``model``'s routed experts are in this precision (its other weights in
        16-bit): a precision of scope "experts" on a mixture of experts."""
        return self.scope == "experts" and model.is_moe

    @property
    def weight_bytes(self) -> float:
        """Bytes per weight, with the format's per-group scales (int4-awq: one FP16 scale per
        128 weights = 0.125 bit; NVFP4: one FP8 scale per 16 weights = 0.5 bit)."""
        return (self.weight_bits + self.scale_bits_per_weight) / 8


class Named(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def aliases(self) -> tuple[str, ...]: ...


T = TypeVar("T", bound=Named)


class Table(Generic[T]):
    """Catalog entries by name and alias, matched case-insensitively."""

    def __init__(self, kind: str, entries: Iterable[T]) -> None:
        self.kind: str = kind
        self.entries: list[T] = list(entries)
        self._by_key: dict[str, T] = {}
        for entry in self.entries:
            for key in (entry.name, *entry.aliases):
                self._by_key[key.strip().lower()] = entry

    def get(self, name: str) -> T:
        try:
            return self._by_key[name.strip().lower()]
        except KeyError:
            names = [e.name for e in self.entries]
            near = closest(name[:MAX_SHOWN_CHARS], names)
            raise UsageError(
                f"unknown {self.kind} {shown(name)}; known {self.kind}s: {near}"
            ) from None

    def names(self) -> list[str]:
        return [e.name for e in self.entries]


@dataclass(frozen=True)
class Catalog:
    gpus: Table[GPU]
    models: Table[ModelSpec]
    precisions: Table[Precision]


GPU_COLUMNS = (
    "name",
    "aliases",
    "memory",
    "memory_unit",
    "device_memory_mib",
    "mem_bw_gbps",
    "link_gbps",
    "max_gpus_per_node",
)
MODEL_COLUMNS = (
    "name",
    "aliases",
    "layers",
    "hidden_size",
    "attention_heads",
    "kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "experts",
    "experts_per_token",
    "tied_embeddings",
    "max_context",
)
PRECISION_COLUMNS = (
    "name",
    "aliases",
    "weight_bits",
    "scale_bits_per_weight",
    "compute_peak",
    "dequant_compute_factor",
    "quality_delta_pct",
)
PRECISION_SCOPES = ("all", "experts")
PEAK_COLUMNS = (
    "bf16_tflops",
    "fp16_tflops",
    "fp8_tflops",
    "fp4_tflops",
    "int8_tops",
    "fp32_tflops",
)


def _rows(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    """The rows of a catalog file (``$PLANNER_DATA_DIR`` may point at a user's own), every
    cell text (a short row's missing cells empty); an unreadable file is a CatalogError."""
    if not path.is_file():
        raise CatalogError(f"catalog file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8-sig")
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = reader.fieldnames or []
        rows = [{k: v or "" for k, v in row.items() if isinstance(k, str)} for row in reader]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CatalogError(f"{path}: not a readable UTF-8 CSV file ({exc})") from None
    missing = [c for c in columns if c not in header]
    if missing:
        raise CatalogError(f"{path}: missing column {missing[0]!r} (needs {', '.join(columns)})")
    for row in rows:
        if not row["name"].strip():
            raise CatalogError(f"{path}: a row without a name")
    return rows


def _aliases(value: str) -> tuple[str, ...]:
    return tuple(a.strip() for a in value.split(",") if a.strip())


def _float(row: Mapping[str, str], key: str, path: Path) -> float | None:
    text = (row.get(key) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise CatalogError(
            f"{path}: {shown(row.get('name'))}: {key} = {shown(text)} is not a number"
        )
    return value


def _required(row: Mapping[str, str], key: str, path: Path, *, positive: bool = True) -> float:
    value = _float(row, key, path)
    if value is None:
        raise CatalogError(f"{path}: {shown(row.get('name'))}: {key} is required")
    if positive and value <= 0:
        raise CatalogError(f"{path}: {shown(row.get('name'))}: {key} = {value:g} must be positive")
    return value


def _whole(row: Mapping[str, str], key: str, path: Path) -> int:
    value = _required(row, key, path)
    if not value.is_integer():
        raise CatalogError(f"{path}: {shown(row.get('name'))}: {key} = {value:g} must be whole")
    return int(value)


def _memory_unit(row: Mapping[str, str], path: Path) -> str:
    unit = row["memory_unit"].strip()
    if unit not in MEMORY_UNITS:
        raise CatalogError(
            f"{path}: {shown(row['name'])}: memory_unit must be one of "
            f"{', '.join(MEMORY_UNITS)}, got {shown(unit)}"
        )
    return unit


def _check_device_memory(gpu: GPU, path: Path) -> None:
    """The driver's total cannot exceed the nominal capacity (it reserves, never adds)."""
    if gpu.device_memory_mib is None:
        return
    if gpu.device_memory_mib * MIB > gpu.nominal_memory_bytes:
        raise CatalogError(
            f"{path}: {shown(gpu.name)}: device_memory_mib = {gpu.device_memory_mib:g} "
            f"({gpu.device_memory_mib * MIB / GIB:.2f} GiB) exceeds memory = {gpu.memory:g} "
            f"{gpu.memory_unit}; is memory_unit right?"
        )


def load_gpus(path: Path) -> list[GPU]:
    gpus = []
    for row in _rows(path, GPU_COLUMNS):
        peaks = {c: v for c in PEAK_COLUMNS if (v := _float(row, c, path)) is not None}
        if any(v <= 0 for v in peaks.values()):
            raise CatalogError(f"{path}: {shown(row['name'])}: peaks must be positive")
        device_mib = _float(row, "device_memory_mib", path)
        if device_mib is not None and device_mib <= 0:
            raise CatalogError(
                f"{path}: {shown(row['name'])}: device_memory_mib = {device_mib:g} "
                "must be positive (or blank when unknown)"
            )
        max_per_node = _whole(row, "max_gpus_per_node", path)
        link = _required(row, "link_gbps", path, positive=False)
        if link < 0 or (link == 0 and max_per_node > 1):
            raise CatalogError(
                f"{path}: {shown(row['name'])}: link_gbps = {link:g} must be positive "
                "(0 only for a device that is never split: max_gpus_per_node 1)"
            )
        gpu = GPU(
            name=row["name"],
            aliases=_aliases(row["aliases"]),
            vendor=row.get("vendor", ""),
            memory=_required(row, "memory", path),
            memory_unit=_memory_unit(row, path),
            device_memory_mib=device_mib,
            mem_bw_gbps=_required(row, "mem_bw_gbps", path),
            peak_tflops=peaks,
            interconnect=row.get("interconnect", ""),
            link_gbps=link,
            max_gpus_per_node=max_per_node,
            source=row.get("source", ""),
            notes=row.get("notes", ""),
        )
        _check_device_memory(gpu, path)
        gpus.append(gpu)
    return gpus


# Optional columns of models.csv (blank: not used; see ModelSpec), with their "not used" value.
MODEL_OPTIONAL_COLUMNS: Mapping[str, int] = {
    "dense_layers": 0,
    "moe_layer_step": 1,
    "dense_intermediate_size": 0,
    "shared_experts": 0,
    "shared_expert_intermediate_size": 0,
    "kv_lora_rank": 0,
    "q_lora_rank": 0,
    "qk_rope_head_dim": 0,
    "v_head_dim": 0,
    "sliding_window": 0,
    "sliding_layers": 0,
}


def _optional_whole(row: Mapping[str, str], key: str, path: Path) -> int:
    """An optional column: blank is its "not used" value, else a whole number of 0 or more."""
    value = _float(row, key, path)
    if value is None:
        return MODEL_OPTIONAL_COLUMNS[key]
    if value < 0 or not value.is_integer():
        raise CatalogError(
            f"{path}: {shown(row.get('name'))}: {key} = {value:g} must be a whole number, "
            "0 or more (or blank: not used)"
        )
    return int(value)


def check_model_shape(model: ModelSpec) -> str | None:
    """What is inconsistent in ``model``'s 2026 fields (None when nothing): leading dense
    layers and MoE interleaving within the layers, windowed layers with a window, MLA's RoPE
    key within the query/key head."""
    if model.experts_per_token > model.experts or model.attention_heads % model.kv_heads:
        return "experts_per_token must not exceed experts, and kv_heads must divide attention_heads"
    if model.moe_layer_step < 1 or model.dense_layers >= model.layers:
        return "moe_layer_step must be 1 or more and dense_layers fewer than the layers"
    if (model.dense_layers or model.moe_layer_step > 1 or model.shared_experts) and (
        not model.is_moe
    ):
        return "dense_layers, moe_layer_step and shared_experts describe a mixture of experts"
    if model.sliding_layers > model.layers or (model.sliding_layers > 0) != (
        model.sliding_window > 0
    ):
        return "sliding_layers (at most the layers) and sliding_window go together"
    if model.sliding_layers >= model.layers:
        return "sliding_layers must leave at least one global layer"
    if model.is_mla and model.sliding_layers:
        return "MLA with sliding-window layers is not modelled"
    if model.is_mla and not 0 < model.qk_rope_head_dim < model.head_dim:
        return "an MLA model needs qk_rope_head_dim, less than head_dim (the query/key head)"
    if not model.is_mla and (model.q_lora_rank or model.qk_rope_head_dim):
        return "q_lora_rank and qk_rope_head_dim describe MLA: give kv_lora_rank too"
    return None


def load_models(path: Path) -> list[ModelSpec]:
    models = []
    for row in _rows(path, MODEL_COLUMNS):
        extra = {key: _optional_whole(row, key, path) for key in MODEL_OPTIONAL_COLUMNS}
        model = ModelSpec(
            name=row["name"],
            aliases=_aliases(row["aliases"]),
            family=row.get("family", ""),
            layers=_whole(row, "layers", path),
            hidden_size=_whole(row, "hidden_size", path),
            attention_heads=_whole(row, "attention_heads", path),
            kv_heads=_whole(row, "kv_heads", path),
            head_dim=_whole(row, "head_dim", path),
            intermediate_size=_whole(row, "intermediate_size", path),
            vocab_size=_whole(row, "vocab_size", path),
            experts=_whole(row, "experts", path),
            experts_per_token=_whole(row, "experts_per_token", path),
            tied_embeddings=row["tied_embeddings"].strip().lower() == "true",
            max_context=_whole(row, "max_context", path),
            source=row.get("source", ""),
            **extra,
        )
        problem = check_model_shape(model)
        if problem:
            raise CatalogError(f"{path}: {shown(model.name)}: {problem}")
        models.append(model)
    return models


def load_precisions(path: Path) -> list[Precision]:
    precisions = []
    for row in _rows(path, PRECISION_COLUMNS):
        if row["compute_peak"] not in PEAK_COLUMNS:
            raise CatalogError(
                f"{path}: {shown(row['name'])}: compute_peak must be one of "
                f"{', '.join(PEAK_COLUMNS)}, got {shown(row['compute_peak'])}"
            )
        scale_bits = _required(row, "scale_bits_per_weight", path, positive=False)
        if scale_bits < 0:
            raise CatalogError(
                f"{path}: {shown(row['name'])}: scale_bits_per_weight = {scale_bits:g} "
                "must be 0 or more"
            )
        scope = (row.get("scope") or "").strip() or "all"
        if scope not in PRECISION_SCOPES:
            raise CatalogError(
                f"{path}: {shown(row['name'])}: scope must be one of "
                f"{', '.join(PRECISION_SCOPES)} (or blank: all), got {shown(scope)}"
            )
        precisions.append(
            Precision(
                name=row["name"],
                aliases=_aliases(row["aliases"]),
                weight_bits=_whole(row, "weight_bits", path),
                scale_bits_per_weight=scale_bits,
                activation=row.get("activation", ""),
                compute_peak=row["compute_peak"],
                dequant_compute_factor=_required(row, "dequant_compute_factor", path),
                quality_delta_pct=_required(row, "quality_delta_pct", path, positive=False),
                quality_source=row.get("quality_source", ""),
                notes=row.get("notes", ""),
                scope=scope,
            )
        )
    return precisions


USER_MODELS_FILE = "models.csv"  # under $PLANNER_HOME/catalog


def user_models_path() -> Path:
    """The user's models (``planner catalog add-model``): ``$PLANNER_HOME/catalog/models.csv``."""
    return user_catalog_dir() / USER_MODELS_FILE


def merge_models(bundled: Sequence[ModelSpec], user: Sequence[ModelSpec]) -> list[ModelSpec]:
    """The bundled models with the user's merged over them: a user model named as a bundled
    one (or one of its aliases) replaces it."""
    taken = {key.lower() for m in user for key in (m.name, *m.aliases)}
    kept = [m for m in bundled if m.name.lower() not in taken]
    return [*kept, *user]


def load_catalog(folder: Path | None = None) -> Catalog:
    """The catalogs under ``folder`` (default ``data/catalog``), read once per process; by
    default with the user's models (:func:`user_models_path`) merged over the bundled ones
    (read again when that file changes)."""
    if folder is not None:
        return _load_catalog(folder, None, None)
    user = user_models_path()
    try:
        info = user.stat()
        stamp: tuple[int, int] | None = (info.st_mtime_ns, info.st_size)
    except OSError:
        stamp = None
    return _load_catalog(data_dir() / "catalog", user if stamp else None, stamp)


@functools.cache
def _load_catalog(folder: Path, user_models: Path | None, stamp: tuple[int, int] | None) -> Catalog:
    models = load_models(folder / "models.csv")
    if user_models is not None:
        models = merge_models(models, load_models(user_models))
    return Catalog(
        gpus=Table("GPU", load_gpus(folder / "gpus.csv")),
        models=Table("model", models),
        precisions=Table("precision", load_precisions(folder / "precisions.csv")),
    )


# --- a model from a Hugging Face config.json ------------------------------------------------

HF_CONFIG_MAX_BYTES = 1 << 20  # a config.json is a few KiB
# Architectures whose shape the step model prices: decoder-only, grouped-query attention, a
# gated (SwiGLU) MLP, or Mixtral's top-k mixture of such MLPs.
HF_ARCHITECTURES: Mapping[str, str] = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "MixtralForCausalLM": "mixtral",
    # the 2026 models (issue 33): MoE with shared experts and dense layers, MLA, windows
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "GptOssForCausalLM": "gpt_oss",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "Llama4ForCausalLM": "llama4",
    "Llama4ForConditionalGeneration": "llama4",
    "Gemma3ForCausalLM": "gemma3",
    "Gemma3ForConditionalGeneration": "gemma3",
    "Mistral3ForConditionalGeneration": "mistral",
}
HF_MOE_FAMILIES = ("mixtral", "qwen3_moe", "gpt_oss", "deepseek_v2", "deepseek_v3", "llama4")
# Multimodal configs keep the language model's fields under text_config (the vision encoder
# is not priced: planner serves text)
HF_TEXT_CONFIG = (
    "Llama4ForConditionalGeneration",
    "Gemma3ForConditionalGeneration",
    "Mistral3ForConditionalGeneration",
)
_MOST = {  # generous bounds: larger is a typo, not a model
    "hidden_size": 1 << 17,
    "num_hidden_layers": 4096,
    "num_attention_heads": 4096,
    "num_key_value_heads": 4096,
    "head_dim": 4096,
    "intermediate_size": 1 << 20,
    "vocab_size": 1 << 24,
    "max_position_embeddings": 1 << 27,
    "num_local_experts": 4096,
    "num_experts_per_tok": 4096,
    "n_routed_experts": 4096,
    "num_experts": 4096,
    "experts_per_token": 4096,
    "moe_intermediate_size": 1 << 20,
    "intermediate_size_mlp": 1 << 20,
    "shared_expert_intermediate_size": 1 << 20,
    "n_shared_experts": 64,
    "first_k_dense_replace": 4096,
    "interleave_moe_layer_step": 4096,
    "moe_layer_freq": 4096,
    "decoder_sparse_step": 4096,
    "kv_lora_rank": 1 << 16,
    "q_lora_rank": 1 << 16,
    "qk_rope_head_dim": 4096,
    "qk_nope_head_dim": 4096,
    "v_head_dim": 4096,
    "sliding_window": 1 << 27,
    "attention_chunk_size": 1 << 27,
    "sliding_window_pattern": 4096,
    "no_rope_layer_interval": 4096,
}
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
ALIAS_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/ -]{0,127}")


class ModelConfigError(UsageError):
    """A Hugging Face config.json planner cannot take as a model (names the file and field)."""


def _config_whole(config: Mapping[str, Any], key: str, where: str, default: int | None) -> int:
    value = config.get(key)
    if value is None:
        if default is None:
            raise ModelConfigError(f"{where}: {key} is missing: expected a whole number")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelConfigError(
            f"{where}: {key} = {shown(str(value))}: expected a whole number, got "
            f"{type(value).__name__}"
        )
    most = _MOST[key]
    if not 1 <= value <= most:
        raise ModelConfigError(
            f"{where}: {key} = {value}: expected a whole number from 1 to {most:,}"
        )
    return value


def check_model_name(name: str, option: str = "--name") -> str:
    """A catalog name: letters, digits, ``.``, ``_`` and ``-``, 64 characters at most."""
    if not NAME_PATTERN.fullmatch(name):
        raise ModelConfigError(
            f"{option} {shown(name)}: expected 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (e.g. codellama-34b)"
        )
    return name


def check_model_aliases(aliases: Iterable[str]) -> tuple[str, ...]:
    """Other names a model answers to (a Hugging Face id such as meta-llama/CodeLlama-34b-hf)."""
    found: list[str] = []
    for alias in aliases:
        alias = alias.strip()
        if not ALIAS_PATTERN.fullmatch(alias) or "," in alias:
            raise ModelConfigError(
                f"--aliases {shown(alias)}: expected 1 to 128 letters, digits, spaces, '.', '_', "
                "'-' or '/', starting with a letter or digit"
            )
        if alias.lower() not in (a.lower() for a in found):
            found.append(alias)
    return tuple(found)


def _first_whole(config: Mapping[str, Any], keys: Sequence[str], where: str, default: int) -> int:
    """The first of ``keys`` the config gives (a whole number), else ``default``."""
    for key in keys:
        if config.get(key) is not None:
            return _config_whole(config, key, where, None)
    return default


def _sliding_layers(config: Mapping[str, Any], family: str, layers: int, where: str) -> int:
    """How many layers attend within a window (or a chunk): gpt-oss and newer configs list
    ``layer_types``; Gemma 3 gives ``sliding_window_pattern`` (every n-th layer global); Llama
    4 chunks every layer but its NoPE ones (``no_rope_layers``: 0 marks a global layer, or
    every ``no_rope_layer_interval``-th, default 4)."""
    kinds = config.get("layer_types")
    if isinstance(kinds, list) and kinds:
        if len(kinds) != layers or not all(isinstance(k, str) for k in kinds):
            raise ModelConfigError(
                f"{where}: layer_types: expected {layers} names (one per layer), got {len(kinds)}"
            )
        return sum(k in ("sliding_attention", "chunked_attention") for k in kinds)
    if family == "gemma3" and config.get("sliding_window_pattern") is not None:
        pattern = _config_whole(config, "sliding_window_pattern", where, None)
        return layers - layers // pattern
    if family == "llama4" and config.get("attention_chunk_size") is not None:
        flags = config.get("no_rope_layers")
        if isinstance(flags, list) and flags:
            if len(flags) != layers or any(f not in (0, 1) for f in flags):
                raise ModelConfigError(
                    f"{where}: no_rope_layers: expected {layers} flags of 0 or 1, one per layer"
                )
            return sum(flags)
        interval = _first_whole(config, ("no_rope_layer_interval",), where, 4)
        return layers - layers // interval
    return 0


def model_from_hf_config(
    config: Mapping[str, Any], where: str, name: str, aliases: tuple[str, ...], source: str
) -> ModelSpec:
    """The catalog model a Hugging Face ``config.json`` (parsed) describes. Every field is
    checked; a :class:`ModelConfigError` names ``where`` (the file), the field and what was
    expected. Fields: architectures, hidden_size, num_hidden_layers, num_attention_heads,
    num_key_value_heads (default: the attention heads), head_dim (default: hidden_size /
    heads), intermediate_size, vocab_size, max_position_embeddings, tie_word_embeddings
    (default false); for a mixture of experts num_local_experts (or n_routed_experts,
    num_experts) and num_experts_per_tok, moe_intermediate_size (the routed experts' width;
    intermediate_size is then the dense layers'), n_shared_experts or
    shared_expert_intermediate_size, first_k_dense_replace, interleave_moe_layer_step (or
    moe_layer_freq, decoder_sparse_step), Llama 4's intermediate_size_mlp; for MLA
    kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim; for windows
    sliding_window (or attention_chunk_size) with layer_types, sliding_window_pattern or
    no_rope_layers. A multimodal config's text_config is read (the vision part is not
    priced)."""
    architectures = config.get("architectures")
    if not (
        isinstance(architectures, list) and architectures and isinstance(architectures[0], str)
    ):
        raise ModelConfigError(
            f"{where}: architectures: expected a list naming one of {', '.join(HF_ARCHITECTURES)}"
        )
    architecture = architectures[0]
    if architecture not in HF_ARCHITECTURES:
        raise ModelConfigError(
            f"{where}: architectures = {shown(architecture)}: planner models "
            f"{', '.join(HF_ARCHITECTURES)} (decoder-only, grouped-query or latent attention, "
            "gated MLP or a mixture of them)"
        )
    family_kind = HF_ARCHITECTURES[architecture]
    outer = config
    if architecture in HF_TEXT_CONFIG:
        text = config.get("text_config")
        if not isinstance(text, Mapping):
            raise ModelConfigError(
                f"{where}: text_config: expected the language model's fields ({architecture} "
                "keeps them there)"
            )
        config = text
        where = f"{where}: text_config"
    hidden = _config_whole(config, "hidden_size", where, None)
    heads = _config_whole(config, "num_attention_heads", where, None)
    kv_heads = _config_whole(config, "num_key_value_heads", where, heads)
    if heads % kv_heads:
        raise ModelConfigError(
            f"{where}: num_key_value_heads = {kv_heads} must divide num_attention_heads = {heads}"
        )
    layers = _config_whole(config, "num_hidden_layers", where, None)
    kv_lora = _first_whole(config, ("kv_lora_rank",), where, 0)
    mla: dict[str, int] = {}
    if kv_lora:
        rope = _config_whole(config, "qk_rope_head_dim", where, None)
        nope = _config_whole(config, "qk_nope_head_dim", where, None)
        head_dim = nope + rope
        mla = {
            "kv_lora_rank": kv_lora,
            "q_lora_rank": _first_whole(config, ("q_lora_rank",), where, 0),
            "qk_rope_head_dim": rope,
            "v_head_dim": _config_whole(config, "v_head_dim", where, head_dim),
        }
    else:
        if config.get("head_dim") is None and hidden % heads:
            raise ModelConfigError(
                f"{where}: hidden_size = {hidden} is not a multiple of num_attention_heads = "
                f"{heads}; give head_dim"
            )
        head_dim = _config_whole(config, "head_dim", where, hidden // heads)
    moe = family_kind in HF_MOE_FAMILIES
    expert_keys = ("num_local_experts", "n_routed_experts", "num_experts")
    experts = _first_whole(config, expert_keys, where, 0 if moe else 1)
    if moe and not experts:
        raise ModelConfigError(
            f"{where}: num_local_experts is missing (or n_routed_experts, num_experts): "
            f"expected a whole number for the mixture of experts {architecture}"
        )
    per_token = _first_whole(
        config, ("num_experts_per_tok", "experts_per_token"), where, 0 if moe else 1
    )
    if moe and not per_token:
        raise ModelConfigError(f"{where}: num_experts_per_tok is missing: expected 1 to {experts}")
    if moe and not 1 <= per_token <= experts:
        raise ModelConfigError(
            f"{where}: num_experts_per_tok = {per_token} must be from 1 to num_local_experts = "
            f"{experts}"
        )
    if not moe and experts != 1:
        moe_architectures = [a for a, f in HF_ARCHITECTURES.items() if f in HF_MOE_FAMILIES]
        raise ModelConfigError(
            f"{where}: num_local_experts = {experts} with architecture {architecture}: expected "
            f"1 (a mixture of experts is {', '.join(moe_architectures)})"
        )
    intermediate = _config_whole(config, "intermediate_size", where, None)
    moe_fields: dict[str, int] = {}
    if moe:
        dense_width = intermediate
        if config.get("moe_intermediate_size") is not None:
            intermediate = _config_whole(config, "moe_intermediate_size", where, None)
        if family_kind == "llama4":
            dense_width = _first_whole(config, ("intermediate_size_mlp",), where, intermediate)
            shared, shared_width = 1, intermediate  # Llama 4's one shared expert
        elif config.get("n_shared_experts") is not None:
            shared = _config_whole(config, "n_shared_experts", where, None)
            shared_width = intermediate  # DeepSeek's shared experts are routed-expert wide
        elif config.get("shared_expert_intermediate_size") is not None:
            shared = 1
            shared_width = _config_whole(config, "shared_expert_intermediate_size", where, None)
        else:
            shared, shared_width = 0, 0
        mlp_only = config.get("mlp_only_layers")
        if isinstance(mlp_only, list) and mlp_only:
            raise ModelConfigError(
                f"{where}: mlp_only_layers = {shown(str(mlp_only))}: dense layers in the middle "
                "are not modelled (only leading ones, first_k_dense_replace)"
            )
        step_keys = ("interleave_moe_layer_step", "moe_layer_freq", "decoder_sparse_step")
        dense_layers = _first_whole(config, ("first_k_dense_replace",), where, 0)
        moe_fields = {
            "dense_layers": dense_layers,
            "moe_layer_step": _first_whole(config, step_keys, where, 1),
            "dense_intermediate_size": dense_width if dense_width != intermediate else 0,
            "shared_experts": shared,
            "shared_expert_intermediate_size": shared_width,
        }
    sliding = _sliding_layers(config, family_kind, layers, where)
    window = 0
    if sliding:
        keys = ("attention_chunk_size",) if family_kind == "llama4" else ("sliding_window",)
        window = _first_whole(config, keys, where, 0)
        if not window:
            raise ModelConfigError(
                f"{where}: {keys[0]} is missing: {sliding} layers attend within a window"
            )
        if sliding >= layers:
            sliding, window = 0, 0  # every layer windowed: priced as global (conservative)
    tied = outer.get("tie_word_embeddings", config.get("tie_word_embeddings", False))
    if not isinstance(tied, bool):
        raise ModelConfigError(
            f"{where}: tie_word_embeddings = {shown(str(tied))}: expected true or false"
        )
    model_type = outer.get("model_type")
    family = (
        model_type if isinstance(model_type, str) and NAME_PATTERN.fullmatch(model_type) else ""
    )
    model = ModelSpec(
        name=check_model_name(name),
        aliases=check_model_aliases(aliases),
        family=family or family_kind,
        layers=layers,
        hidden_size=hidden,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=_config_whole(config, "vocab_size", where, None),
        experts=experts,
        experts_per_token=per_token,
        tied_embeddings=tied,
        max_context=_config_whole(config, "max_position_embeddings", where, None),
        source=source,
        sliding_window=window,
        sliding_layers=sliding,
        **mla,
        **moe_fields,
    )
    problem = check_model_shape(model)
    if problem:
        raise ModelConfigError(f"{where}: {problem}")
    return model


MODEL_FILE_COLUMNS = (
    *MODEL_COLUMNS[:2],
    "family",
    *MODEL_COLUMNS[2:],
    "source",
    "source_date",
    *MODEL_OPTIONAL_COLUMNS,
)


def model_row(model: ModelSpec, source_date: str) -> dict[str, str]:
    """``model`` as a row of a models catalog file (:data:`MODEL_FILE_COLUMNS`)."""
    return {
        "name": model.name,
        "aliases": ",".join(model.aliases),
        "family": model.family,
        "layers": str(model.layers),
        "hidden_size": str(model.hidden_size),
        "attention_heads": str(model.attention_heads),
        "kv_heads": str(model.kv_heads),
        "head_dim": str(model.head_dim),
        "intermediate_size": str(model.intermediate_size),
        "vocab_size": str(model.vocab_size),
        "experts": str(model.experts),
        "experts_per_token": str(model.experts_per_token),
        "tied_embeddings": "true" if model.tied_embeddings else "false",
        "max_context": str(model.max_context),
        "source": model.source,
        "source_date": source_date,
        # the 2026 columns: blank where not used, as in the bundled file
        **{
            key: "" if getattr(model, key) == unused else str(getattr(model, key))
            for key, unused in MODEL_OPTIONAL_COLUMNS.items()
        },
    }


def models_csv(rows: Iterable[Mapping[str, str]]) -> str:
    """A models catalog file's text: the header, then ``rows``."""
    out = io.StringIO()
    writer = csv.DictWriter(out, MODEL_FILE_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
