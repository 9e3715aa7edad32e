"""Co-location: several models on the same GPUs, one engine process each, and whether their
memory fits.

Small models leave most of a large GPU to KV cache they may never use; two or three of them can
share the GPUs instead, each in its own engine process given a share of the memory (vLLM's
``--gpu-memory-utilization 0.45`` twice, say). :func:`colocation_fit` says which shares, what KV
cache each process then gets (as the engine itself sizes it, through
:func:`planner.latency.engines.deploy`), and, when the models do not fit, which one is short and
by how much. The compute they share is the simulator's business
(:mod:`planner.simulate.colocate`).

The rule, per GPU of the ``tp`` GPUs every process spans:

- **Budget.** All processes together may use what one process alone would take under the
  engine's memory rule and fraction ``F`` (``memory_utilization``, default the engine's):
  ``F`` of device memory (``total``: vLLM, the in-process engine); ``F`` plus one process's
  activations (``static``: SGLang keeps activations outside ``mem_fraction_static``; the largest
  member's); weights and activations plus ``F`` of the rest (``free``: TensorRT-LLM; the largest
  member's). So one member alone gets the engine's default sizing (to the thousandth).
- **Minimum per process.** Its weights per GPU, its own activation peak and runtime reserve
  (each process has its own CUDA context, graphs and buffers: nothing is shared), and KV cache
  for one sequence of the model's full context or 8,192 tokens, whichever is smaller
  (:data:`MIN_KV_TOKENS`): a process that cannot hold one long request is not a deployment.
- **Split.** Each process gets its minimum, and what is left of the budget is split in
  proportion to the KV bytes per token times ``max_seqs`` of each model (the KV cache its batch
  would fill at equal context), so a model with a larger cache per token or more sequences
  gets more.

Shares are rounded to thousandths (minimums up, the split of the rest down), the precision the
engines' flags are written with, and the KV capacity is computed from the rounded setting.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from planner.common.text import shown
from planner.errors import UsageError
from planner.latency.catalog import GIB, GPU, Catalog, UnsupportedError, load_catalog
from planner.latency.engines import Engine, deploy, get_engine
from planner.latency.model import Deployment

#: The longest sequence each process's KV cache must hold at the least (or the model's context)
MIN_KV_TOKENS = 8192
#: The engine setting each memory rule's share is given as
SETTINGS = {
    "total": "gpu_memory_utilization",  # vLLM --gpu-memory-utilization
    "static": "mem_fraction_static",  # SGLang --mem-fraction-static
    "free": "free_gpu_memory_fraction",  # TensorRT-LLM KvCacheConfig
}
_STEP = 1000  # shares in thousandths


@dataclass(frozen=True)
class MemberFit:
    """One co-located process: its share of each GPU's memory and what it holds. When the set
    does not fit, ``share`` is the member's minimum and it has no setting or KV capacity."""

    model: str
    precision: str
    max_seqs: int
    share: float  # of each GPU's memory this process may use: weights, activations, KV cache
    setting: float  # the engine's flag for that share (``setting_name``)
    setting_name: str
    kv_capacity_tokens: int  # as the engine sizes it with ``setting`` (0: it does not fit)
    min_kv_tokens: int
    need_gib: float  # per GPU: weights + activations and runtime + the minimum KV cache
    fits: bool
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ColocationFit:
    """Whether ``members`` share ``tp`` GPUs of one type under an engine, and how."""

    engine: str
    gpu: str
    tp: int
    budget: float  # of each GPU's memory all processes together may use
    budget_gib: float
    members: tuple[MemberFit, ...]

    @property
    def fits(self) -> bool:
        return all(m.fits for m in self.members)

    @property
    def reason(self) -> str:
        """Why not, naming the first model that is short (empty when everything fits)."""
        return next((m.reason for m in self.members if not m.fits), "")

    @property
    def total_share(self) -> float:
        return sum(m.share for m in self.members)

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "gpu": self.gpu,
            "tp": self.tp,
            "budget": self.budget,
            "budget_gib": self.budget_gib,
            "fits": self.fits,
            "reason": self.reason,
            "members": [m.to_dict() for m in self.members],
        }


@dataclass(frozen=True)
class _Sized:
    """One member's sizes per GPU, as the engine computes them at its default share."""

    deployment: Deployment
    min_tokens: int
    need: float  # bytes: weights + activations + min_tokens of KV

    @property
    def fixed(self) -> float:
        return self.deployment.weight_bytes_per_gpu + self.deployment.activation_reserve_bytes


def colocation_fit(
    engine: str,
    gpu: str,
    tp: int,
    members: Sequence[tuple[str, str, int]],
    *,
    memory_utilization: float | None = None,
    kv_cache: str | None = None,
    catalog: Catalog | None = None,
) -> ColocationFit:
    """Whether ``members`` ((model, precision, max_seqs), one engine process each) fit on the
    same ``tp`` GPUs of type ``gpu`` under ``engine``, and each one's share of the memory, its
    engine setting and its KV capacity (see the module's docstring for the rule).

    ``memory_utilization`` replaces the engine's memory fraction ``F``; ``kv_cache`` (fp8,
    fp16, ...) the engine's default KV-cache precision, for every member. Unknown names and bad
    numbers raise :class:`~planner.errors.UsageError`; a combination the hardware cannot run
    (FP8 without FP8 units, a TP degree that does not divide the heads) or a set that does not
    fit is a result with ``fits`` False and a reason."""
    spec = get_engine(engine)
    catalog = catalog or load_catalog()
    device = catalog.gpus.get(gpu)
    if not members:
        raise UsageError("co-location needs at least one model")
    if memory_utilization is not None and not 0.1 <= memory_utilization <= 1.0:
        raise UsageError(
            f"memory utilization {memory_utilization:g}: expected a share of GPU memory, 0.1 to 1"
        )
    fraction = spec.memory_fraction if memory_utilization is None else memory_utilization
    sized: list[_Sized | str] = []
    for model, precision, max_seqs in members:
        if max_seqs < 1:
            raise UsageError(f"{shown(model)}: max sequences {max_seqs} must be at least 1")
        model_spec = catalog.models.get(model)
        precision_spec = catalog.precisions.get(precision)
        try:
            d = deploy(
                spec, device, model_spec, precision_spec, tp, kv_cache=kv_cache, max_seqs=max_seqs
            )
        except UnsupportedError as exc:
            sized.append(str(exc))
            continue
        tokens = min(model_spec.max_context, MIN_KV_TOKENS)
        need = d.weight_bytes_per_gpu + d.activation_reserve_bytes + tokens * d.kv_bytes_per_token
        sized.append(_Sized(d, tokens, need))
    memory = device.memory_bytes
    budget_bytes = max(
        (_alone_bytes(spec, fraction, memory, s) for s in sized if isinstance(s, _Sized)),
        default=fraction * memory,
    )
    budget = _floor(budget_bytes / memory)
    fit = ColocationFit(
        engine=spec.name,
        gpu=device.name,
        tp=tp,
        budget=budget,
        budget_gib=budget * memory / GIB,
        members=(),
    )
    minimums = [_ceil(s.need / memory) if isinstance(s, _Sized) else math.nan for s in sized]
    if any(isinstance(s, str) for s in sized) or sum(minimums) > budget + 1e-9:
        return replace(fit, members=_short(spec, device, tp, members, sized, minimums, budget))
    fitting = [s for s in sized if isinstance(s, _Sized)]  # all of them, by now
    weights = [s.deployment.kv_bytes_per_token * s.deployment.max_seqs for s in fitting]
    rest = budget - sum(minimums)
    shares = [
        round(low + _floor(rest * w / sum(weights)), 3)
        for low, w in zip(minimums, weights, strict=True)
    ]
    fitted = []
    used_before = 0.0
    for (_, _, max_seqs), s, share in zip(members, fitting, shares, strict=True):
        setting, kv_tokens = _setting(spec, device, s, share, used_before)
        used_before += share
        fitted.append(
            MemberFit(
                model=s.deployment.model.name,
                precision=s.deployment.precision.name,
                max_seqs=max_seqs,
                share=share,
                setting=setting,
                setting_name=SETTINGS[spec.memory_rule],
                kv_capacity_tokens=kv_tokens,
                min_kv_tokens=s.min_tokens,
                need_gib=s.need / GIB,
                fits=True,
            )
        )
    return replace(fit, members=tuple(fitted))


def _alone_bytes(spec: Engine, fraction: float, memory: float, s: _Sized) -> float:
    """Bytes of each GPU one process of ``s`` alone takes under the engine's rule at
    ``fraction``: the budget all the co-located processes share."""
    if spec.memory_rule == "static":
        return fraction * memory + s.deployment.activation_reserve_bytes
    if spec.memory_rule == "free":
        return s.fixed + fraction * (memory - s.fixed)
    return fraction * memory


def _setting(
    spec: Engine, device: GPU, s: _Sized, share: float, used_before: float
) -> tuple[float, int]:
    """The engine's flag for ``share`` and the KV tokens the engine sizes with it.

    ``total``: the share itself. ``static``: the share less the process's activations (they
    live outside SGLang's static pool). ``free``: the share of the memory free when the process
    starts, after the processes before it (``used_before``, started in the members' order) and
    its own weights and activations."""
    memory = device.memory_bytes
    d = s.deployment
    if spec.memory_rule == "static":
        setting = _floor(share - d.activation_reserve_bytes / memory)
        return setting, _kv_tokens(spec, d, setting)
    if spec.memory_rule == "free":
        free_at_start = memory * (1 - used_before) - s.fixed
        kv_bytes = share * memory - s.fixed
        setting = _floor(kv_bytes / free_at_start)
        # TensorRT-LLM sizes from the free memory it finds; the same bytes, as a total share
        # of the device, through the engine's own weight and activation sizing
        total_share = (setting * free_at_start + s.fixed) / memory
        return setting, _kv_tokens(replace(spec, memory_rule="total"), d, total_share)
    return share, _kv_tokens(spec, d, share)


def _kv_tokens(spec: Engine, d: Deployment, utilization: float) -> int:
    """KV tokens ``spec`` sizes at ``utilization`` (the deployment's other settings kept)."""
    sized = deploy(
        spec,
        d.gpu,
        d.model,
        d.precision,
        d.tp,
        kv_cache=d.kv_cache,
        memory_utilization=min(1.0, max(0.1, utilization)),
        max_batched_tokens=d.max_batched_tokens,
        max_seqs=d.max_seqs,
    )
    # Deployment takes 0.1 to 1; a smaller share (a tiny model among several) is the same
    # sizing less the memory below 0.1, which is linear in the utilization under every rule
    # used here (total, static)
    kv_bytes = sized.kv_cache_bytes - (sized.memory_utilization - utilization) * d.gpu.memory_bytes
    return int(kv_bytes // d.kv_bytes_per_token) if kv_bytes > 0 else 0


def _short(
    spec: Engine,
    device: GPU,
    tp: int,
    members: Sequence[tuple[str, str, int]],
    sized: list[_Sized | str],
    minimums: list[float],
    budget: float,
) -> tuple[MemberFit, ...]:
    """Each member's minimum, and for those that do not fit (in the members' order: the first
    whose minimum, with the ones before it, passes the budget, and every one after), why."""
    memory = device.memory_bytes
    out = []
    used = 0.0
    where = f"{tp} x {device.name} under {spec.display}"
    for (model, precision, max_seqs), s, low in zip(members, sized, minimums, strict=True):
        if isinstance(s, str):
            out.append(
                MemberFit(
                    model=model,
                    precision=precision,
                    max_seqs=max_seqs,
                    share=0.0,
                    setting=0.0,
                    setting_name=SETTINGS[spec.memory_rule],
                    kv_capacity_tokens=0,
                    min_kv_tokens=0,
                    need_gib=0.0,
                    fits=False,
                    reason=f"{model} ({precision}) cannot run on {where}: {s}",
                )
            )
            continue
        used += low
        fits = used <= budget + 1e-9
        d = s.deployment
        reason = ""
        if not fits:
            reason = (
                f"{d.model.name} ({d.precision.name}) does not fit on {where}: it needs "
                f"{s.need / GIB:.1f} GiB per GPU ({d.weight_bytes_per_gpu / GIB:.1f} GiB weights, "
                f"{d.activation_reserve_bytes / GIB:.1f} GiB activations and runtime, "
                f"{s.min_tokens * d.kv_bytes_per_token / GIB:.1f} GiB of KV cache for one "
                f"{s.min_tokens:,}-token sequence)"
                + (
                    f", {used * memory / GIB:.1f} GiB with the models before it,"
                    if used > low
                    else ""
                )
                + f" of the {budget * memory / GIB:.1f} GiB all processes may use ({budget:g} x "
                f"{memory / GIB:.1f} GiB): {(used - budget) * memory / GIB:.1f} GiB short; use "
                "more GPUs (--tp), a smaller precision, a larger GPU or fewer models"
            )
        out.append(
            MemberFit(
                model=d.model.name,
                precision=d.precision.name,
                max_seqs=max_seqs,
                share=low,
                setting=0.0,
                setting_name=SETTINGS[spec.memory_rule],
                kv_capacity_tokens=0,
                min_kv_tokens=s.min_tokens,
                need_gib=s.need / GIB,
                fits=fits,
                reason=reason,
            )
        )
    return tuple(out)


def _ceil(share: float) -> float:
    # round() first: 0.3 * 1000 is 300.00000000000006, whose ceiling is 301
    return math.ceil(round(share * _STEP, 6)) / _STEP


def _floor(share: float) -> float:
    return math.floor(round(share * _STEP, 6)) / _STEP
