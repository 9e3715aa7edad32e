"""Calibration profiles: the fitted efficiencies and overheads of one engine on one GPU."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from planner.common.text import shown
from planner.errors import UsageError
from planner.paths import data_dir

DEFAULT_ENGINE = "trtllm"

# Parameters a calibration may fit, with their bounds.
FIT_BOUNDS: dict[str, tuple[float, float]] = {
    "compute_eff": (0.05, 1.0),
    "gemm_half_tokens": (0.0, 2048.0),
    "attn_prefill_eff": (0.05, 1.0),
    "attn_decode_eff": (0.05, 1.0),
    "attn_layer_us": (0.0, 100.0),
    "fp8_gemm_scale": (0.3, 1.5),
    "int8_gemm_scale": (0.3, 1.5),
    "int4_gemm_scale": (0.3, 1.5),
    "fp4_gemm_scale": (0.3, 1.5),
    "memory_eff": (0.1, 1.0),
    "iteration_overhead_ms": (0.0, 50.0),
    "request_overhead_ms": (0.0, 500.0),
    "allreduce_us": (0.5, 100.0),
    "comm_eff": (0.1, 1.0),
    "sequence_us": (0.0, 500.0),
    "tp_eff_loss": (0.0, 1.0),
}


@dataclass(frozen=True)
class Profile:
    """Parameters of the roofline: what fraction of peak an engine reaches, and its overheads."""

    name: str
    engine: str = DEFAULT_ENGINE
    gpu: str | None = None  # None: fits any GPU of the engine
    # GEMMs reach compute_eff x n / (n + gemm_half_tokens) of the 16-bit dense peak with n
    # tokens: small token counts cannot fill the tensor cores (tile quantization, wave tails)
    # (defaults: round figures of the bundled profiles' fits, a start for new ones)
    compute_eff: float = 0.7
    gemm_half_tokens: float = 100.0
    # Attention is its own kernel (FlashAttention / paged attention), far from the GEMM roofline:
    # prefill reaches attn_prefill_eff of the 16-bit peak, decode attn_decode_eff of the memory
    # bandwidth while reading the KV cache.
    attn_prefill_eff: float = 0.3
    attn_decode_eff: float = 0.85
    attn_layer_us: float = 15.0  # fixed cost of a layer's attention kernels per iteration
    # Quantized GEMMs reach a different share of their own peak than 16-bit ones.
    fp8_gemm_scale: float = 1.0
    int8_gemm_scale: float = 1.0
    int4_gemm_scale: float = 1.0
    fp4_gemm_scale: float = 1.0
    memory_eff: float = 0.7  # fraction of memory bandwidth reading weights
    iteration_overhead_ms: float = 1.0  # scheduling, kernel launches, sampling per iteration
    request_overhead_ms: float = 4.0  # per request, on its first token (tokenize, HTTP, queue)
    allreduce_us: float = 25.0  # fixed latency of one tensor-parallel all-reduce
    comm_eff: float = 0.7  # fraction of link bandwidth an all-reduce reaches
    # host work per running sequence per iteration: sampling, per-sequence scheduling,
    # detokenizing and streaming its token (measured under load: 0 in offline tables)
    sequence_us: float = 0.0
    # GEMMs and weight reads of a TP shard are narrower and less efficient: efficiency at TP t
    # is divided by 1 + tp_eff_loss x log2(t)
    tp_eff_loss: float = 0.0

    def with_params(self, **params: float) -> Profile:
        return Profile.from_dict({**self.to_dict(), **params})

    def params(self) -> dict[str, float]:
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if isinstance(getattr(self, f.name), float)
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class ProfileError(UsageError):
    """No such profile (a bad --profile or --engine)."""


def bundled_profiles_path() -> Path:
    return data_dir() / "calibration" / "profiles.json"


def load_bundled_profiles(path: Path | None = None) -> list[Profile]:
    """The default profiles fitted on published measurements (``data/calibration``)."""
    path = path or bundled_profiles_path()
    if not path.exists():
        return []
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{path}: not a readable JSON file ({exc})") from exc
    return profiles_in(payload, path)


def profiles_in(payload: Any, path: Path) -> list[Profile]:
    """The profiles of a profiles file's content (``{"profiles": [{"profile": {...}}, ...]}``),
    every parameter checked: a malformed file is a :class:`ProfileError` naming it."""
    entries = payload.get("profiles") if isinstance(payload, dict) else None
    if not isinstance(entries, list):
        raise ProfileError(f'{path}: not a profiles file (expected {{"profiles": [...]}})')
    profiles = []
    for number, entry in enumerate(entries, start=1):
        data = entry.get("profile") if isinstance(entry, dict) else None
        try:
            if not isinstance(data, dict):
                raise TypeError("no 'profile' object")
            profile = Profile.from_dict(data)
            _check(profile)
        except (TypeError, ValueError) as exc:
            raise ProfileError(f"{path}: profile {number}: {exc}") from None
        profiles.append(profile)
    return profiles


def _check(profile: Profile) -> None:
    if not isinstance(profile.name, str) or not isinstance(profile.engine, str):
        raise ValueError("name and engine must be text")
    if profile.gpu is not None and not isinstance(profile.gpu, str):
        raise ValueError("gpu must be text or null")
    for name in FIT_BOUNDS:
        value = getattr(profile, name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name} must be a number, got {shown(value)}")
        if not math.isfinite(value) or value < 0 or (value == 0 and name.endswith("_eff")):
            raise ValueError(f"{name} = {value!r} is out of range")


def choose_profile(profiles: list[Profile], gpu: str, engine: str = DEFAULT_ENGINE) -> Profile:
    """The profile fitted for this GPU and engine, else the engine's GPU-independent one."""
    for profile in profiles:
        if profile.engine == engine and profile.gpu == gpu:
            return profile
    for profile in profiles:
        if profile.engine == engine and profile.gpu is None:
            return profile
    engines = sorted({p.engine for p in profiles})
    raise ProfileError(
        f"no calibration profile for engine {shown(engine)}"
        + (f"; engines with profiles: {', '.join(engines)}" if engines else "")
        + " (fit one with `planner calibrate`)"
    )
