"""Engine profiles: what an inference engine does with memory and batches by default, as plain
data (``data/catalog/engines.csv``, each row sourced) plus a small dataclass.

A calibration :class:`~planner.latency.profile.Profile` says how *fast* an engine runs on a GPU;
an :class:`Engine` says how it *sizes* things: which share of memory its KV cache gets, which
KV-cache precision it picks when none is asked for, its default batch limits and how it admits
requests. :func:`deploy` builds a :class:`~planner.latency.model.Deployment` with those defaults,
so every caller (CLI, simulator, recommender, calibration) applies the same rules.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from planner.common.text import MAX_SHOWN_CHARS, closest, shown
from planner.errors import UsageError
from planner.latency.catalog import (
    GIB,
    GPU,
    CatalogError,
    ModelSpec,
    Precision,
    _aliases,
    _float,
    _required,
    _rows,
    _whole,
)
from planner.latency.model import Deployment
from planner.paths import data_dir

MemoryRule = Literal["total", "free", "static"]
KVDefault = Literal["model", "weights"]
Admission = Literal["preempt", "no_evict"]
# TensorRT-LLM's capacity scheduler policies (SchedulerConfig.capacity_scheduler_policy) and the
# simulator's admission each runs as: GUARANTEED_NO_EVICT (the default) reserves a request's
# whole prompt and output before admitting it; MAX_UTILIZATION packs requests while the KV
# cache they hold now fits and pauses the newest when it runs out (preempt, no watermark).
SCHEDULERS: dict[str, tuple[Admission, float]] = {
    "guaranteed_no_evict": ("no_evict", 0.0),
    "max_utilization": ("preempt", 0.0),
}
SCHEDULER_ENGINE = "trtllm"  # the engine whose scheduler policies these are
KV_CACHE_BYTES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0}
ENGINE_COLUMNS = (
    "name",
    "aliases",
    "memory_rule",
    "memory_fraction",
    "kv_cache_default",
    "max_batched_tokens",
    "max_seqs",
    "admission",
    "runtime_reserve_gib",
    "logits_bytes",
    "source",
)


@dataclass(frozen=True)
class Engine:
    """An inference engine's sizing defaults.

    - ``memory_rule``: ``total`` when the KV cache gets ``memory_fraction`` of the device's
      whole memory less weights and activations (vLLM ``gpu_memory_utilization``); ``free``
      when it gets ``memory_fraction`` of what is free after weights and activations
      (TensorRT-LLM ``free_gpu_memory_fraction``); ``static`` when weights and KV cache share
      ``memory_fraction`` of the device and activations use the rest (SGLang
      ``mem_fraction_static``).
    - ``kv_cache_default``: ``model`` keeps the KV cache in the model's 16-bit dtype unless asked
      (vLLM, SGLang ``kv_cache_dtype=auto``); ``weights`` follows FP8 weights with an FP8 KV
      cache (TensorRT-LLM's FP8 checkpoints).
    - ``admission``: ``no_evict`` reserves a request's whole KV need before admitting it
      (TensorRT-LLM ``GUARANTEED_NO_EVICT``); ``preempt`` admits greedily and preempts by
      recomputation when blocks run out (vLLM, SGLang).
    """

    name: str
    aliases: tuple[str, ...]
    display: str
    memory_rule: MemoryRule
    memory_fraction: float
    kv_cache_default: KVDefault
    max_batched_tokens: int
    max_seqs: int
    admission: Admission
    runtime_reserve_gib: float
    logits_bytes: float
    source: str
    notes: str = ""
    # Smaller batch defaults on some GPUs (vLLM: under 70 GiB, and every A100)
    small_gpu_below_gib: float | None = None
    small_gpu_names: tuple[str, ...] = ()
    small_max_batched_tokens: int | None = None
    small_max_seqs: int | None = None

    def batch_defaults(self, gpu: GPU) -> tuple[int, int]:
        """(batched-token budget, max sequences) this engine picks on ``gpu``."""
        small = (
            self.small_gpu_below_gib is not None and gpu.memory_gib < self.small_gpu_below_gib
        ) or any(name.lower() in gpu.name.lower() for name in self.small_gpu_names)
        if small and self.small_max_batched_tokens and self.small_max_seqs:
            return self.small_max_batched_tokens, self.small_max_seqs
        return self.max_batched_tokens, self.max_seqs

    def default_kv_cache(self, precision: Precision, gpu: GPU) -> str:
        """The KV-cache precision this engine picks when the user names none."""
        if precision.activation == "fp32":
            return "fp32"  # an FP32 model keeps its cache in FP32 (engines' dtype "auto")
        fp8_weights = precision.compute_peak in ("fp8_tflops", "fp4_tflops")
        if self.kv_cache_default == "weights" and fp8_weights and "fp8_tflops" in gpu.peak_tflops:
            return "fp8"
        return "fp16"


def _choice(row: dict[str, str], key: str, allowed: tuple[str, ...], path: Path) -> str:
    value = row[key].strip()
    if value not in allowed:
        raise CatalogError(
            f"{path}: {shown(row['name'])}: {key} must be one of {', '.join(allowed)}, "
            f"got {shown(value)}"
        )
    return value


def _optional_whole(row: dict[str, str], key: str, path: Path) -> int | None:
    return _whole(row, key, path) if (row.get(key) or "").strip() else None


def load_engines(path: Path | None = None) -> list[Engine]:
    path = path or data_dir() / "catalog" / "engines.csv"
    engines = []
    for row in _rows(path, ENGINE_COLUMNS):
        fraction = _required(row, "memory_fraction", path)
        if not 0.1 <= fraction <= 1.0:
            raise CatalogError(
                f"{path}: {shown(row['name'])}: memory_fraction = {fraction:g} must be 0.1 to 1"
            )
        engines.append(
            Engine(
                name=row["name"].strip(),
                aliases=_aliases(row["aliases"]),
                display=(row.get("display") or row["name"]).strip(),
                memory_rule=_choice(row, "memory_rule", ("total", "free", "static"), path),  # type: ignore[arg-type]
                memory_fraction=fraction,
                kv_cache_default=_choice(row, "kv_cache_default", ("model", "weights"), path),  # type: ignore[arg-type]
                max_batched_tokens=_whole(row, "max_batched_tokens", path),
                max_seqs=_whole(row, "max_seqs", path),
                admission=_choice(row, "admission", ("preempt", "no_evict"), path),  # type: ignore[arg-type]
                runtime_reserve_gib=_required(row, "runtime_reserve_gib", path, positive=False),
                logits_bytes=_required(row, "logits_bytes", path, positive=False),
                source=row["source"].strip(),
                notes=(row.get("notes") or "").strip(),
                small_gpu_below_gib=_float(row, "small_gpu_below_gib", path),
                small_gpu_names=_aliases(row.get("small_gpu_names") or ""),
                small_max_batched_tokens=_optional_whole(row, "small_max_batched_tokens", path),
                small_max_seqs=_optional_whole(row, "small_max_seqs", path),
            )
        )
    return engines


@functools.cache
def _engines() -> dict[str, Engine]:
    table = {}
    for engine in load_engines():
        for key in (engine.name, *engine.aliases):
            table[key.lower()] = engine
    return table


def engine_names() -> list[str]:
    return sorted({e.name for e in _engines().values()})


def get_engine(name: str) -> Engine:
    """The engine named ``name`` (or an alias, any case); unknown names get suggestions."""
    try:
        return _engines()[name.strip().lower()]
    except KeyError:
        raise UsageError(
            f"unknown engine {shown(name)}; known engines: "
            f"{closest(name[:MAX_SHOWN_CHARS], engine_names())}"
        ) from None


def scheduler_admission(engine: Engine | str, scheduler: str) -> tuple[Admission, float]:
    """The simulator's (admission, KV watermark) for ``engine``'s ``--scheduler`` policy:
    TensorRT-LLM's ``guaranteed_no_evict`` or ``max_utilization`` (any case, ``-`` for ``_``).
    Another engine, or another name, is a :class:`~planner.errors.UsageError`."""
    spec = get_engine(engine) if isinstance(engine, str) else engine
    name = scheduler.strip().lower().replace("-", "_")
    if spec.name != SCHEDULER_ENGINE:
        raise UsageError(
            f"--scheduler {shown(scheduler)} is TensorRT-LLM's capacity scheduler policy "
            f"(--engine {SCHEDULER_ENGINE}); {spec.display} ({spec.name}) schedules with its own "
            f"admission ({spec.admission}): leave --scheduler out, or use --engine "
            f"{SCHEDULER_ENGINE}"
        )
    if name not in SCHEDULERS:
        raise UsageError(
            f"--scheduler {shown(scheduler)}: expected {' or '.join(SCHEDULERS)} "
            f"(TensorRT-LLM's default is guaranteed_no_evict)"
        )
    return SCHEDULERS[name]


def kv_cache_bytes(kv_cache: str) -> float:
    try:
        return KV_CACHE_BYTES[kv_cache.lower()]
    except KeyError:
        raise UsageError(
            f"unknown KV-cache precision {shown(kv_cache)}; expected fp32, fp16, bf16 or fp8"
        ) from None


def deploy(
    engine: Engine | str,
    gpu: GPU,
    model: ModelSpec,
    precision: Precision,
    tp: int = 1,
    *,
    kv_cache: str | None = None,
    memory_utilization: float | None = None,
    max_batched_tokens: int | None = None,
    max_seqs: int | None = None,
) -> Deployment:
    """A deployment sized as ``engine`` sizes it; every ``None`` takes the engine's default."""
    spec = get_engine(engine) if isinstance(engine, str) else engine
    kv = kv_cache or spec.default_kv_cache(precision, gpu)
    tokens, seqs = spec.batch_defaults(gpu)
    return Deployment(
        gpu=gpu,
        model=model,
        precision=precision,
        tp=tp,
        kv_bytes=kv_cache_bytes(kv),
        memory_utilization=(
            spec.memory_fraction if memory_utilization is None else memory_utilization
        ),
        max_batched_tokens=max_batched_tokens or tokens,
        max_seqs=max_seqs or seqs,
        memory_rule=spec.memory_rule,
        runtime_reserve_bytes=spec.runtime_reserve_gib * GIB,
        logits_bytes=spec.logits_bytes,
    )
