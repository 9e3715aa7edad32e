"""An in-process PyTorch inference engine: a Llama-architecture transformer built from a catalog
model's shape, with a real KV cache, timed on this machine.

:class:`TransformerLM` holds the weights (random, seeded) under Hugging Face Llama's tensor
names and runs the forward pass; :class:`TorchEngine` adds a preallocated KV cache with one slot
per running sequence, batched prefill of equal-length prompts and batched decode steps over
sequences of different lengths (greedy next tokens). :func:`measure_static_batch` and
:func:`measure_grid` time static batches with both the wall clock and the process's CPU clock;
:func:`engine_rows` turns the medians into rows of the measurement CSV layout that ``planner
calibrate`` reads. :class:`TorchServingEngine` serves ``planner bench serve`` with continuous
batching on one worker thread.

torch is imported inside the functions that need it, so this module imports without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import statistics
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from planner.common.text import printable, shown
from planner.errors import PlannerError, UsageError
from planner.latency.catalog import Catalog, ModelSpec, load_catalog

if TYPE_CHECKING:
    import torch

TORCH_MISSING = (
    "the in-process engine needs PyTorch: pip install 'planner[bench]' (pins torch==2.13.0; "
    "CPU build where installed)"
)
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # precision -> torch dtype
DEVICES = ("cpu", "cuda")
CLOCKS = ("cpu", "wall")
Clock = Literal["cpu", "wall"]
Stopped = Literal["seconds", "interrupted"]
INIT_STD = 0.02  # Llama's initializer_range: activations stay small enough for bf16 and fp16
ROPE_THETA = 10_000.0
NORM_EPS = 1e-5
MEMORY_SHARE = 0.8  # of the device's memory the weights and KV cache may take
TOKEN_WORDS = 1000  # placeholder words the serving engine's token ids map onto


def require_torch() -> None:
    """A :class:`UsageError` saying how to install torch, when it is missing. Entry points call
    it; code running after them imports torch directly."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageError(TORCH_MISSING) from None


def torch_version() -> str:
    require_torch()
    import torch

    return str(torch.__version__)


def check_precision(precision: str) -> str:
    name = precision.strip().lower()
    if name not in DTYPES:
        raise UsageError(
            f"--precision {shown(precision)}: the in-process engine runs "
            f"{', '.join(DTYPES)} (weights and activations in that dtype)"
        )
    return name


def check_device(device: str) -> str:
    name = device.strip().lower()
    if name not in DEVICES:
        raise UsageError(f"--device {shown(device)}: expected cpu or cuda")
    require_torch()
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            "--device cuda: PyTorch sees no CUDA GPU here (a CPU build of torch, or no "
            "driver); use --device cpu"
        )
    return name


def check_threads(threads: int) -> int:
    cores = os.cpu_count() or 1
    if not 1 <= threads <= max(cores, 1) * 4:
        raise UsageError(
            f"--threads {threads}: expected 1 to {cores * 4} (this machine has {cores} cores; "
            "1 is the least noisy on a shared machine)"
        )
    return threads


def check_spec(spec: ModelSpec) -> ModelSpec:
    if spec.is_moe:
        raise UsageError(
            f"model {spec.name} is a mixture of experts ({spec.experts} experts); the "
            "in-process engine builds dense Llama-architecture models only"
        )
    if spec.attention_heads % spec.kv_heads:
        raise UsageError(
            f"model {spec.name}: {spec.attention_heads} attention heads are not a multiple of "
            f"its {spec.kv_heads} KV heads (grouped-query attention needs that)"
        )
    if spec.head_dim % 2:
        raise UsageError(f"model {spec.name}: rotary embeddings need an even head_dim")
    return spec


CHECKPOINT_TYPES = ("llama", "mistral")  # Hugging Face model_type values with Llama's layout


def _config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not folder.is_dir():
        raise UsageError(
            f"--checkpoint {printable(str(folder))}: expected a folder (config.json "
            "and *.safetensors, as Hugging Face saves a model)"
        )
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--checkpoint {printable(str(folder))}: no config.json in it") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{printable(str(path))}: not a readable JSON config ({exc})") from None
    if not isinstance(config, dict):
        raise UsageError(f"{printable(str(path))}: expected a JSON object")
    return config


def spec_from_checkpoint(folder: Path) -> ModelSpec:
    """The shape of a local Hugging Face Llama-layout checkpoint (its ``config.json``)."""
    config = _config(folder)
    path = folder / "config.json"
    kind = str(config.get("model_type", ""))
    if kind not in CHECKPOINT_TYPES:
        raise UsageError(
            f"{printable(str(path))}: model_type {shown(kind)}; the in-process engine loads "
            f"{' or '.join(CHECKPOINT_TYPES)} checkpoints (Llama's layout, no biases)"
        )

    def whole(key: str, default: int | None = None) -> int:
        value = config.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(
                f"{printable(str(path))}: {key} = {shown(str(value))}; expected a positive "
                "whole number"
            )
        return value

    heads = whole("num_attention_heads")
    hidden = whole("hidden_size")
    experts = config.get("num_local_experts") or 1
    spec = ModelSpec(
        name=folder.name,
        aliases=(),
        family=kind,
        layers=whole("num_hidden_layers"),
        hidden_size=hidden,
        attention_heads=heads,
        kv_heads=whole("num_key_value_heads", heads),
        head_dim=whole("head_dim", hidden // heads),
        intermediate_size=whole("intermediate_size"),
        vocab_size=whole("vocab_size"),
        experts=int(experts),
        experts_per_token=int(config.get("num_experts_per_tok") or 1),
        tied_embeddings=bool(config.get("tie_word_embeddings", False)),
        max_context=whole("max_position_embeddings", 4096),
        source=str(path),
    )
    return check_spec(spec)


def check_same_shape(spec: ModelSpec, catalog_spec: ModelSpec) -> None:
    """A checkpoint labelled with a catalog model must have that model's shape."""
    fields = ("layers", "hidden_size", "attention_heads", "kv_heads", "head_dim",
              "intermediate_size", "vocab_size")  # fmt: skip
    differ = [f for f in fields if getattr(spec, f) != getattr(catalog_spec, f)]
    if differ:
        shown_fields = ", ".join(
            f"{f} {getattr(spec, f)} vs {getattr(catalog_spec, f)}" for f in differ
        )
        raise UsageError(
            f"--checkpoint {spec.name} is not the shape of --model {catalog_spec.name} "
            f"({shown_fields}); name the catalog model it is"
        )


def _device_memory(device: str) -> float:
    if device == "cuda":
        import torch

        free, _total = torch.cuda.mem_get_info()
        return float(free)
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return math.inf  # not knowable here: let the allocation itself fail


class TransformerLM:
    """A Llama-architecture decoder (token embedding; per layer RMSNorm, grouped-query attention
    with rotary position embeddings, RMSNorm, SwiGLU MLP; final norm; LM head) built from a
    catalog model's shape, with random weights drawn from a seeded generator.

    The weights' values do not change the timings: every token costs the same matmuls whatever
    the numbers are (greedy decoding picks some token either way). They are plain tensors under
    Hugging Face Llama's names (``model.layers.0.self_attn.q_proj.weight``, ...), not an
    ``nn.Module``: inference only, and this module stays importable without torch.
    """

    def __init__(
        self,
        spec: ModelSpec,
        *,
        precision: str = "fp32",
        device: str = "cpu",
        seed: int = 0,
        checkpoint: Path | None = None,
    ) -> None:
        require_torch()
        import torch

        self.spec = check_spec(spec)
        self.checkpoint = checkpoint
        config = _config(checkpoint) if checkpoint is not None else {}
        self.rope_theta = float(config.get("rope_theta", ROPE_THETA))
        self.norm_eps = float(config.get("rms_norm_eps", NORM_EPS))
        self.precision = check_precision(precision)
        self.device = check_device(device)
        self.dtype: torch.dtype = getattr(torch, DTYPES[self.precision])
        self.seed = seed
        generator = torch.Generator().manual_seed(seed)
        s = spec
        q_size, kv_size = s.attention_heads * s.head_dim, s.kv_heads * s.head_dim
        shapes: dict[str, tuple[int, ...]] = {
            "model.embed_tokens.weight": (s.vocab_size, s.hidden_size)
        }
        for layer in range(s.layers):
            p = f"model.layers.{layer}."
            shapes |= {
                p + "self_attn.q_proj.weight": (q_size, s.hidden_size),
                p + "self_attn.k_proj.weight": (kv_size, s.hidden_size),
                p + "self_attn.v_proj.weight": (kv_size, s.hidden_size),
                p + "self_attn.o_proj.weight": (s.hidden_size, q_size),
                p + "mlp.gate_proj.weight": (s.intermediate_size, s.hidden_size),
                p + "mlp.up_proj.weight": (s.intermediate_size, s.hidden_size),
                p + "mlp.down_proj.weight": (s.hidden_size, s.intermediate_size),
            }
        if not s.tied_embeddings:
            shapes["lm_head.weight"] = (s.vocab_size, s.hidden_size)
        element = torch.empty((), dtype=self.dtype).element_size()
        self.weight_bytes = sum(math.prod(shape) for shape in shapes.values()) * element
        available = _device_memory(self.device) * MEMORY_SHARE
        if self.weight_bytes > available:
            raise UsageError(
                f"model {s.name} in {self.precision}: {self.weight_bytes / 2**30:,.1f} GiB of "
                f"weights do not fit in {available / 2**30:,.1f} GiB ({MEMORY_SHARE:.0%} of "
                f"this {self.device}'s memory); pick a smaller model or precision"
            )
        self.weights: dict[str, torch.Tensor] = {}
        for name, shape in shapes.items():
            weight = torch.empty(shape, dtype=self.dtype)
            weight.normal_(0.0, INIT_STD, generator=generator)
            self.weights[name] = weight.to(self.device)
        for layer in range(s.layers):
            for norm in ("input_layernorm", "post_attention_layernorm"):
                self.weights[f"model.layers.{layer}.{norm}.weight"] = torch.ones(
                    s.hidden_size, dtype=self.dtype, device=self.device
                )
        self.weights["model.norm.weight"] = torch.ones(
            s.hidden_size, dtype=self.dtype, device=self.device
        )
        if checkpoint is not None:
            self._load(checkpoint)
        self._rope_cache: tuple[torch.Tensor, torch.Tensor] | None = None

    def _load(self, folder: Path) -> None:
        """Every weight from the checkpoint's ``*.safetensors`` files, each checked against the
        shape built from its config, in this model's dtype."""
        try:
            from safetensors import SafetensorError, safe_open
        except ImportError:
            raise UsageError(
                "--checkpoint needs safetensors: pip install 'planner[bench]'"
            ) from None
        files = sorted(folder.glob("*.safetensors"))
        if not files:
            raise UsageError(f"--checkpoint {printable(str(folder))}: no *.safetensors files in it")
        loaded: set[str] = set()
        for file in files:
            try:
                with safe_open(str(file), framework="pt", device="cpu") as tensors:
                    for name in tensors.keys():  # noqa: SIM118 (safe_open is no mapping)
                        if name not in self.weights:
                            continue  # e.g. rotary inv_freq buffers some exporters save
                        tensor = tensors.get_tensor(name)
                        if tuple(tensor.shape) != tuple(self.weights[name].shape):
                            raise UsageError(
                                f"{printable(str(file))}: {name} has shape {tuple(tensor.shape)}; "
                                f"config.json implies {tuple(self.weights[name].shape)}"
                            )
                        self.weights[name] = tensor.to(dtype=self.dtype, device=self.device)
                        loaded.add(name)
            except SafetensorError as exc:
                raise UsageError(
                    f"{printable(str(file))}: not a safetensors file ({exc})"
                ) from None
        missing = sorted(set(self.weights) - loaded)
        if missing:
            raise UsageError(
                f"--checkpoint {printable(str(folder))}: {len(missing)} weights missing, e.g. "
                f"{missing[0]}"
            )

    @property
    def lm_head(self) -> torch.Tensor:
        return self.weights.get("lm_head.weight", self.weights["model.embed_tokens.weight"])

    def _rope(self, positions: torch.Tensor, span: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin for ``positions`` ([batch, tokens], all below ``span``), shaped [batch,
        1, tokens, head_dim]."""
        import torch

        needed = span
        if self._rope_cache is None or self._rope_cache[0].shape[0] < needed:
            length = max(needed, 2 * (self._rope_cache[0].shape[0] if self._rope_cache else 256))
            half = self.spec.head_dim // 2
            exponent = torch.arange(half, dtype=torch.float32, device=self.device) / half
            frequencies = 1.0 / (self.rope_theta**exponent)
            angles = torch.outer(
                torch.arange(length, dtype=torch.float32, device=self.device), frequencies
            )
            angles = torch.cat((angles, angles), dim=-1)
            self._rope_cache = (angles.cos().to(self.dtype), angles.sin().to(self.dtype))
        cos, sin = self._rope_cache
        return cos[positions].unsqueeze(1), sin[positions].unsqueeze(1)

    def _norm(self, hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        # in fp32 as Llama does: a bf16 mean of squares loses too much
        as_float = hidden.float()
        scale = (as_float.pow(2).mean(-1, keepdim=True) + self.norm_eps).rsqrt()
        return (as_float * scale).to(self.dtype) * weight

    def forward(
        self,
        token_ids: torch.Tensor,
        positions: torch.Tensor,
        attend: Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
        *,
        span: int,
        all_logits: bool = False,
    ) -> torch.Tensor:
        """Logits for ``token_ids`` ([batch, tokens]) at ``positions`` (same shape, each below
        ``span``: known here, so reading it costs no device sync); ``attend``
        (layer, q, k, v) -> attention output does the attention, with or without a cache. Only
        the last position's logits unless ``all_logits`` (an engine needs no more)."""
        import torch

        functional = torch.nn.functional
        s, w = self.spec, self.weights
        batch, tokens = token_ids.shape
        hidden = functional.embedding(token_ids, w["model.embed_tokens.weight"])
        cos, sin = self._rope(positions, span)
        for layer in range(s.layers):
            p = f"model.layers.{layer}."
            x = self._norm(hidden, w[p + "input_layernorm.weight"])
            q = functional.linear(x, w[p + "self_attn.q_proj.weight"])
            k = functional.linear(x, w[p + "self_attn.k_proj.weight"])
            v = functional.linear(x, w[p + "self_attn.v_proj.weight"])
            q = q.view(batch, tokens, s.attention_heads, s.head_dim).transpose(1, 2)
            k = k.view(batch, tokens, s.kv_heads, s.head_dim).transpose(1, 2)
            v = v.view(batch, tokens, s.kv_heads, s.head_dim).transpose(1, 2)
            q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
            attended = attend(layer, q, k, v)
            attended = attended.transpose(1, 2).reshape(batch, tokens, -1)
            hidden = hidden + functional.linear(attended, w[p + "self_attn.o_proj.weight"])
            x = self._norm(hidden, w[p + "post_attention_layernorm.weight"])
            gate = functional.silu(functional.linear(x, w[p + "mlp.gate_proj.weight"]))
            up = functional.linear(x, w[p + "mlp.up_proj.weight"])
            hidden = hidden + functional.linear(gate * up, w[p + "mlp.down_proj.weight"])
        if not all_logits:
            hidden = hidden[:, -1:]
        hidden = self._norm(hidden, w["model.norm.weight"])
        logits = functional.linear(hidden, self.lm_head).float()
        return logits if all_logits else logits[:, -1]

    def logits_without_cache(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Every position's logits ([batch, tokens, vocab]) of whole sequences, attention
        recomputed over all of them: the reference a KV cache must agree with."""
        import torch

        positions = torch.arange(token_ids.shape[1], device=self.device).expand_as(token_ids)

        def attend(_layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return _attention(q, k, v, causal=True)

        with torch.inference_mode():
            return self.forward(
                token_ids.to(self.device),
                positions,
                attend,
                span=token_ids.shape[1],
                all_logits=True,
            )


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding, as Hugging Face Llama applies it (halves, not pairs)."""
    import torch

    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def _attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Scaled dot-product attention, grouped-query (KV heads shared by groups of query heads)."""
    import torch

    functional = torch.nn.functional
    grouped = q.shape[1] != k.shape[1]
    return functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=grouped
    )


class TorchEngine:
    """A :class:`TransformerLM` with a preallocated KV cache: per layer K and V tensors of
    ``[slots, kv_heads, max_len, head_dim]``. Each running sequence owns a slot and a length;
    :meth:`prefill` starts sequences, :meth:`decode` moves each given one on by a token, and
    :meth:`free` gives slots back. Next tokens are greedy (argmax)."""

    def __init__(
        self,
        spec: ModelSpec,
        *,
        precision: str = "fp32",
        device: str = "cpu",
        threads: int = 1,
        slots: int = 8,
        max_len: int | None = None,
        seed: int = 0,
        checkpoint: Path | None = None,
    ) -> None:
        require_torch()
        import torch

        self.threads = check_threads(threads)
        torch.set_num_threads(self.threads)  # process-wide: intra-op parallelism
        self.model = TransformerLM(
            spec, precision=precision, device=device, seed=seed, checkpoint=checkpoint
        )
        self.spec = spec
        self.device = self.model.device
        self.max_len = min(max_len or spec.max_context, spec.max_context)
        if slots < 1 or self.max_len < 2:
            raise UsageError(f"a KV cache needs a slot and 2 positions, got {slots} x {max_len}")
        self.slots = slots
        shape = (slots, spec.kv_heads, self.max_len, spec.head_dim)
        element = self.model.weights["model.norm.weight"].element_size()
        self.cache_bytes = 2 * spec.layers * math.prod(shape) * element
        available = _device_memory(self.device) * MEMORY_SHARE - self.model.weight_bytes
        if self.cache_bytes > available:
            raise UsageError(
                f"a KV cache of {slots} sequences x {self.max_len:,} tokens of {spec.name} "
                f"needs {self.cache_bytes / 2**30:,.1f} GiB beside the weights, more than this "
                f"{self.device} has; use fewer or shorter sequences"
            )
        self.keys = [torch.zeros(shape, dtype=self.model.dtype, device=self.device)]
        self.keys += [torch.zeros_like(self.keys[0]) for _ in range(spec.layers - 1)]
        self.values = [torch.zeros_like(self.keys[0]) for _ in range(spec.layers)]
        self.lengths = [0] * slots  # tokens cached per slot
        self.next_tokens = [0] * slots  # each sequence's pending token (decode's input)
        self._prompts = torch.Generator().manual_seed(seed + 1)

    @property
    def description(self) -> str:
        s = self.spec
        return (
            f"{s.name} ({s.layers} layers, hidden {s.hidden_size}, {s.attention_heads}/"
            f"{s.kv_heads} heads) in {self.model.precision} on {self.device}, "
            f"{self.threads} thread{'s' if self.threads != 1 else ''}"
        )

    def synchronize(self) -> None:
        """Wait for queued device work, so clocks read after it are right."""
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def random_prompts(self, batch: int, tokens: int) -> torch.Tensor:
        """``batch`` prompts of ``tokens`` random token ids (seeded)."""
        import torch

        return torch.randint(0, self.spec.vocab_size, (batch, tokens), generator=self._prompts)

    def _check_slots(self, slots: Sequence[int]) -> None:
        if (
            not slots
            or len(set(slots)) != len(slots)
            or not all(0 <= s < self.slots for s in slots)
        ):
            raise PlannerError(
                f"slots {list(slots)}: expected distinct slots 0 to {self.slots - 1}"
            )

    def _slot_index(self, slots: Sequence[int]) -> slice | torch.Tensor:
        """Slots as an index: a slice when they are consecutive (no copy of the cache)."""
        if list(slots) == list(range(slots[0], slots[0] + len(slots))):
            return slice(slots[0], slots[0] + len(slots))
        import torch

        return torch.tensor(list(slots), device=self.device)

    def prefill_logits(self, slots: Sequence[int], token_ids: torch.Tensor) -> torch.Tensor:
        """Start a sequence in each slot with its prompt (``token_ids``: [len(slots), tokens],
        equal lengths, one batch, causal attention) and cache its K and V; the logits after
        each prompt ([len(slots), vocab])."""
        import torch

        self._check_slots(slots)
        batch, tokens = token_ids.shape
        if batch != len(slots) or not 1 <= tokens <= self.max_len:
            raise PlannerError(
                f"prefill of {batch} x {tokens} tokens into {len(slots)} slots of "
                f"{self.max_len} positions"
            )
        index = self._slot_index(slots)
        positions = torch.arange(tokens, device=self.device).expand(batch, tokens)

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            self.keys[layer][index, :, :tokens] = k
            self.values[layer][index, :, :tokens] = v
            return _attention(q, k, v, causal=True)

        with torch.inference_mode():
            logits = self.model.forward(token_ids.to(self.device), positions, attend, span=tokens)
        for slot in slots:
            self.lengths[slot] = tokens
        return logits

    def decode_logits(
        self, slots: Sequence[int], token_ids: Sequence[int] | None = None
    ) -> torch.Tensor:
        """One token for each slot (its pending token unless ``token_ids`` are given), attending
        over that slot's own cached length (shorter sequences masked); the logits after it
        ([len(slots), vocab])."""
        import torch

        self._check_slots(slots)
        lengths = [self.lengths[s] for s in slots]
        if min(lengths) < 1 or max(lengths) >= self.max_len:
            raise PlannerError(
                f"decode of slots {list(slots)} at lengths {lengths}: each needs a started "
                f"sequence and room in its {self.max_len} positions"
            )
        tokens = [self.next_tokens[s] for s in slots] if token_ids is None else list(token_ids)
        ids = torch.tensor(tokens, device=self.device).unsqueeze(1)
        positions = torch.tensor(lengths, device=self.device).unsqueeze(1)
        index = self._slot_index(slots)
        span = max(lengths) + 1
        mask = None
        if min(lengths) != max(lengths):  # attend to each sequence's own tokens only
            mask = torch.arange(span, device=self.device) <= positions
            mask = mask[:, None, None, :]  # [batch, heads, query, key]
        slot_ids = torch.tensor(list(slots), device=self.device)

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            self.keys[layer][slot_ids, :, positions[:, 0]] = k[:, :, 0]
            self.values[layer][slot_ids, :, positions[:, 0]] = v[:, :, 0]
            # a view of the cache when the slots are consecutive, else a gathered copy
            keys = self.keys[layer][index, :, :span]
            values = self.values[layer][index, :, :span]
            return _attention(q, keys, values, mask=mask)

        with torch.inference_mode():
            logits = self.model.forward(ids, positions, attend, span=span)
        for slot in slots:
            self.lengths[slot] += 1
        return logits

    def _pick(self, slots: Sequence[int], logits: torch.Tensor) -> list[int]:
        chosen = [int(t) for t in logits.argmax(dim=-1).tolist()]
        for slot, token in zip(slots, chosen, strict=True):
            self.next_tokens[slot] = token
        return chosen

    def prefill(self, slots: Sequence[int], token_ids: torch.Tensor) -> list[int]:
        """Start sequences (see :meth:`prefill_logits`); each one's first generated token."""
        return self._pick(slots, self.prefill_logits(slots, token_ids))

    def decode(self, slots: Sequence[int]) -> list[int]:
        """One decode step of the given sequences; each one's next token."""
        return self._pick(slots, self.decode_logits(slots))

    def free(self, slots: Iterable[int]) -> None:
        for slot in slots:
            self.lengths[slot] = 0


# --- measuring -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """One clock's reading of a static batch, in milliseconds. ``tpot_ms`` is None for one
    output token (no decode step)."""

    ttft_ms: float
    tpot_ms: float | None
    e2e_ms: float


@dataclass(frozen=True)
class Point:
    """A static batch of ``batch`` prompts of ``prompt_tokens``, each generating
    ``output_tokens``: medians over ``repeats`` runs, per clock (``cpu``: the process's CPU
    time, all threads; ``wall``: elapsed time)."""

    batch: int
    prompt_tokens: int
    output_tokens: int
    wall: Timing
    cpu: Timing
    repeats: int = 1

    def timing(self, clock: Clock) -> Timing:
        return self.cpu if clock == "cpu" else self.wall

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Skipped:
    batch: int
    prompt_tokens: int
    reason: str


@dataclass
class GridResult:
    points: list[Point] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    stopped: Stopped | None = None  # why the grid ended early, if it did


def _clocks(engine: TorchEngine) -> tuple[float, float]:
    engine.synchronize()
    return time.perf_counter(), time.process_time()


def measure_static_batch(
    engine: TorchEngine, batch: int, prompt_tokens: int, output_tokens: int
) -> Point:
    """Time one static batch: TTFT is the batched prefill (which yields the first token), TPOT
    the mean of the ``output_tokens - 1`` decode steps after it (context growing), E2E the
    whole; with the wall clock and the process's CPU clock."""
    if output_tokens < 1 or prompt_tokens < 1 or batch < 1:
        raise UsageError(
            f"a static batch needs a sequence, a prompt token and an output token, got batch "
            f"{batch}, {prompt_tokens} prompt and {output_tokens} output tokens"
        )
    slots = list(range(batch))
    prompts = engine.random_prompts(batch, prompt_tokens)
    try:
        start_wall, start_cpu = _clocks(engine)
        engine.prefill(slots, prompts)
        first_wall, first_cpu = _clocks(engine)
        for _ in range(output_tokens - 1):
            engine.decode(slots)
        end_wall, end_cpu = _clocks(engine)
    finally:
        engine.free(slots)
    steps = output_tokens - 1

    def timing(start: float, first: float, end: float) -> Timing:
        if not steps:  # one output token: the prefill is the whole request
            return Timing((first - start) * 1000, None, (first - start) * 1000)
        return Timing((first - start) * 1000, (end - first) * 1000 / steps, (end - start) * 1000)

    return Point(
        batch,
        prompt_tokens,
        output_tokens,
        wall=timing(start_wall, first_wall, end_wall),
        cpu=timing(start_cpu, first_cpu, end_cpu),
    )


def _median(timings: list[Timing]) -> Timing:
    tpots = [t.tpot_ms for t in timings if t.tpot_ms is not None]
    return Timing(
        statistics.median(t.ttft_ms for t in timings),
        statistics.median(tpots) if tpots else None,
        statistics.median(t.e2e_ms for t in timings),
    )


def _median_point(runs: list[Point]) -> Point:
    first = runs[0]
    return Point(
        first.batch,
        first.prompt_tokens,
        first.output_tokens,
        wall=_median([r.wall for r in runs]),
        cpu=_median([r.cpu for r in runs]),
        repeats=len(runs),
    )


def skip_reason(engine: TorchEngine, batch: int, prompt_tokens: int, output_tokens: int) -> str:
    """Why a combination cannot run on ``engine`` ("" when it can)."""
    total = prompt_tokens + output_tokens
    if total > engine.spec.max_context:
        return (
            f"{prompt_tokens} prompt + {output_tokens} output tokens exceed the "
            f"{engine.spec.max_context:,}-token context of {engine.spec.name}"
        )
    if total > engine.max_len:
        return f"{total} tokens exceed the KV cache's {engine.max_len:,} positions per sequence"
    if batch > engine.slots:
        return f"batch {batch} exceeds the KV cache's {engine.slots} sequence slots"
    return ""


def measure_grid(
    engine: TorchEngine,
    batches: Sequence[int],
    prompts: Sequence[int],
    output_tokens: int,
    *,
    repeats: int = 3,
    warmup: int = 1,
    max_seconds: float = 600.0,
    on_point: Callable[[Point], None] | None = None,
    on_run: Callable[[], None] | None = None,
) -> GridResult:
    """Every (batch, prompt) combination: ``warmup`` runs left out, then ``repeats`` runs whose
    medians make the point. Combinations the model's context or the cache cannot hold are
    skipped with the reason. Past ``max_seconds`` (checked between runs) or on Ctrl-C the grid
    stops and keeps what it measured (a point from the repeats that completed)."""
    if repeats < 1 or warmup < 0:
        raise UsageError(f"--repeats {repeats} / --warmup {warmup}: expected >= 1 and >= 0")
    result = GridResult()
    deadline = time.monotonic() + max_seconds
    runs: list[Point] = []  # measured runs of the combination under way

    def keep() -> None:
        if runs:
            result.points.append(_median_point(runs))
            runs.clear()
            if on_point is not None:
                on_point(result.points[-1])

    try:
        for batch in batches:
            for prompt in prompts:
                reason = skip_reason(engine, batch, prompt, output_tokens)
                if reason:
                    result.skipped.append(Skipped(batch, prompt, reason))
                    continue
                for run in range(warmup + repeats):
                    if time.monotonic() > deadline:
                        result.stopped = "seconds"
                        break
                    measured = measure_static_batch(engine, batch, prompt, output_tokens)
                    if run >= warmup:
                        runs.append(measured)
                    if on_run is not None:
                        on_run()
                keep()
                if result.stopped:
                    return result
    except KeyboardInterrupt:  # Ctrl-C: keep the repeats of the point under way
        result.stopped = "interrupted"
        with contextlib.suppress(KeyboardInterrupt):
            keep()
    return result


def engine_rows(
    points: Iterable[Point],
    *,
    gpu: str,
    model: str,
    precision: str,
    engine: str = "torch",
    clock: Clock = "cpu",
    source: str,
    threads: int = 1,
    device: str = "cpu",
    catalog: Catalog | None = None,
) -> list[dict[str, str]]:
    """Rows of the measurement CSV layout (:data:`planner.latency.calibration.
    MEASUREMENT_COLUMNS`): each point's TTFT, TPOT and E2E in ms at ``static=B`` (a static
    batch: all prompts prefilled together, then decoded together), read from ``clock``.
    ``gpu``, ``model`` and ``precision`` must be catalog names (what calibration reads back);
    a name the catalog lacks is a :class:`UsageError` naming the option."""
    from planner.latency.calibration import MEASUREMENT_COLUMNS, MIN_LATENCY_MS

    catalog = catalog or load_catalog()
    names = {}
    for option, table, given in (
        ("--gpu", catalog.gpus, gpu),
        ("--model", catalog.models, model),
        ("--precision", catalog.precisions, precision),
    ):
        try:
            names[option] = table.get(given).name
        except UsageError as exc:
            raise UsageError(f"{option}: calibration rows need catalog names; {exc}") from None
    framework = f"planner in-process PyTorch {torch_version()}"
    rows: list[dict[str, str]] = []
    for point in points:
        timing = point.timing(clock)
        base = {
            "source": source,
            "url_or_path": source,
            "model": names["--model"],
            "gpu": names["--gpu"],
            "num_gpus": "1",
            "precision": names["--precision"],
            "framework": framework,
            "input_len": str(point.prompt_tokens),
            "output_len": str(point.output_tokens),
            "batch_or_concurrency": f"static={point.batch}",
            "notes": (
                f"static batch measured by planner bench engine: {clock} clock "
                f"({'process CPU time' if clock == 'cpu' else 'elapsed time'}), "
                f"{threads} thread{'s' if threads != 1 else ''}, device {device}, median of "
                f"{point.repeats} run{'s' if point.repeats != 1 else ''}"
            ),
            "engine": engine,
            "kv_cache": "",
        }
        for metric, value in (
            ("TTFT", timing.ttft_ms),
            ("TPOT", timing.tpot_ms),
            ("E2E", timing.e2e_ms),
        ):
            if value is not None and value >= MIN_LATENCY_MS:
                row = {**base, "metric": metric, "value": repr(value), "unit": "ms"}
                rows.append({column: row[column] for column in MEASUREMENT_COLUMNS})
    return rows


# --- serving ---------------------------------------------------------------------------------


def token_text(token_id: int) -> str:
    """A placeholder word for a token id (there is no tokenizer)."""
    return f" w{token_id % TOKEN_WORDS}"


@dataclass(eq=False)
class _Request:
    prompt_tokens: int
    max_tokens: int
    loop: asyncio.AbstractEventLoop
    tokens: asyncio.Queue[str | BaseException | None]
    cancelled: bool = False
    generated: int = 0
    slot: int = -1


class TorchServingEngine:
    """The :class:`planner.bench.server.Engine` of ``planner bench serve --backend torch``:
    continuous batching on one worker thread. Requests wait in a queue; each iteration admits
    waiting requests into free slots (up to ``max_seqs`` running, each prompt prefilled on its
    own, random token ids of the requested length), then runs one batched decode step of every
    running sequence. Tokens reach each request's asyncio queue with ``call_soon_threadsafe``;
    a finished or abandoned request frees its slot. The work is real, so each token's delay is
    0. :meth:`close` stops the worker."""

    def __init__(
        self,
        spec: ModelSpec,
        *,
        precision: str = "fp32",
        device: str = "cpu",
        threads: int = 1,
        max_seqs: int = 8,
        max_len: int | None = None,
        seed: int = 0,
        checkpoint: Path | None = None,
    ) -> None:
        if max_seqs < 1:
            raise UsageError(f"--max-seqs {max_seqs}: expected at least 1 sequence")
        self.engine = TorchEngine(
            spec,
            precision=precision,
            device=device,
            threads=threads,
            slots=max_seqs,
            max_len=max_len,
            seed=seed,
            checkpoint=checkpoint,
        )
        self.model_name = spec.name
        self.max_context: int | None = self.engine.max_len
        self.description = (
            f"the in-process PyTorch engine: {self.engine.description}, "
            f"{'weights of ' + str(checkpoint) if checkpoint else 'random weights'}, "
            f"continuous batching of up to {max_seqs} sequences of {self.engine.max_len:,} tokens"
        )
        self._waiting: deque[_Request] = deque()
        self._running: list[_Request] = []
        self._free = list(range(max_seqs))
        self._wake = threading.Condition()
        self._closing = False
        self._failure: PlannerError | None = None
        self._thread = threading.Thread(target=self._work, name="torch-engine", daemon=True)
        self._thread.start()

    @property
    def running(self) -> int:
        """Sequences holding a slot now."""
        with self._wake:
            return len(self._running)

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    async def generate(
        self, prompt_tokens: int, max_tokens: int
    ) -> AsyncGenerator[tuple[str, float], None]:
        limit = self.engine.max_len
        if prompt_tokens < 1 or max_tokens < 1 or prompt_tokens + max_tokens > limit:
            raise UsageError(
                f"{prompt_tokens} prompt + {max_tokens} output tokens: expected at least one "
                f"of each, at most {limit} together"
            )
        request = _Request(prompt_tokens, max_tokens, asyncio.get_running_loop(), asyncio.Queue())
        with self._wake:
            if self._closing:
                raise self._failure or PlannerError("the in-process engine is closed")
            self._waiting.append(request)
            self._wake.notify()
        try:
            while True:
                item = await request.tokens.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item, 0.0
        finally:
            with self._wake:  # a client gone away gives its slot back at the next iteration
                request.cancelled = True
                self._wake.notify()

    def close(self, timeout: float = 30.0) -> None:
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(timeout)

    def __enter__(self) -> TorchServingEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the worker thread --------------------------------------------------------------------

    def _send(self, request: _Request, item: str | BaseException | None) -> None:
        try:
            request.loop.call_soon_threadsafe(request.tokens.put_nowait, item)
        except RuntimeError:  # its event loop is closed: nobody is listening
            request.cancelled = True

    def _finish(self, request: _Request, item: BaseException | None = None) -> None:
        if request in self._running:
            self._running.remove(request)
            self.engine.free([request.slot])
            self._free.append(request.slot)
        if not request.cancelled:
            self._send(request, item)

    def _work(self) -> None:
        import torch

        torch.set_num_threads(self.engine.threads)
        try:
            while self._iteration():
                pass
        except Exception as exc:  # a bug or out of memory: fail every request, not hang them
            self._failure = PlannerError(f"the in-process engine failed: {exc}")
            with self._wake:
                self._closing = True
                for request in [*self._running, *self._waiting]:
                    self._finish(request, self._failure)
                self._waiting.clear()
            return
        with self._wake:
            closed = PlannerError("the in-process engine was closed")
            for request in [*self._running, *self._waiting]:
                self._finish(request, closed)
            self._waiting.clear()

    def _iteration(self) -> bool:
        """Admit, prefill, decode once; False when closing."""
        with self._wake:
            for request in [r for r in self._running if r.cancelled]:
                self._finish(request)
            while not self._closing and not self._running and not self._waiting:
                self._wake.wait()
            if self._closing:
                return False
            admitted = []
            while self._waiting and self._free:
                request = self._waiting.popleft()
                if not request.cancelled:
                    request.slot = self._free.pop(0)
                    self._running.append(request)
                    admitted.append(request)
        # the model runs outside the lock: clients may queue and cancel meanwhile
        for request in admitted:
            prompt = self.engine.random_prompts(1, request.prompt_tokens)
            (token,) = self.engine.prefill([request.slot], prompt)
            self._deliver([request], [token])
        with self._wake:
            decoding = [r for r in self._running if not r.cancelled and r not in admitted]
        if decoding:
            tokens = self.engine.decode([r.slot for r in decoding])
            self._deliver(decoding, tokens)
        return True

    def _deliver(self, requests: list[_Request], tokens: list[int]) -> None:
        with self._wake:
            for request, token in zip(requests, tokens, strict=True):
                if request.cancelled:
                    self._finish(request)
                    continue
                self._send(request, token_text(token))
                request.generated += 1
                if request.generated >= request.max_tokens:
                    self._finish(request)


DEFAULT_MODEL = "bench-llama-tiny"


def engine_spec(model: str | None, checkpoint: Path | None) -> ModelSpec:
    """The shape to build: a catalog model's (``--model``, default :data:`DEFAULT_MODEL`), or a
    local checkpoint's, named after the catalog model it is when ``--model`` says so (rows and
    predictions need a catalog name) and checked to have its shape."""
    if checkpoint is None:
        return load_spec(model or DEFAULT_MODEL)
    spec = spec_from_checkpoint(checkpoint)
    if model is None:
        return spec
    known = load_spec(model)
    check_same_shape(spec, known)
    return replace(spec, name=known.name, aliases=known.aliases)


def load_spec(model: str, catalog: Catalog | None = None) -> ModelSpec:
    """A catalog model the engine can build, or a :class:`UsageError` naming ``--model``."""
    catalog = catalog or load_catalog()
    try:
        spec = catalog.models.get(model)
    except UsageError as exc:
        raise UsageError(f"--model: {exc}") from None
    return check_spec(spec)
