"""Disaggregated prefill and decode: each role's time on its own deployment, and the KV cache's
transfer between them (issue 33, first step). Numbers in, numbers out: no store, no CLI.

- A **prefill instance** runs prompts only (no decodes share its iterations): a prompt of s
  tokens costs :meth:`LatencyModel.prefill_time`, in chunks of the deployment's
  ``max_batched_tokens`` when longer.
- A **decode instance** runs decode steps only (no prefill interference): a step of b sequences
  holding c tokens of context costs :meth:`LatencyModel.decode_time`.
- The **KV transfer** moves the prompt's KV cache, 2 (K and V) x layers x KV heads x head dim x
  KV bytes per token, from the prefill GPUs' tensor-parallel shards to the decode GPUs' shards,
  over a :class:`Link` from ``data/catalog/links.csv``: ``latency + bytes / (line rate x
  efficiency)``, flows over GPU-aligned NICs in parallel, over a shared NIC one after another.

Each role has its own :class:`~planner.latency.model.Deployment` (GPU type, TP, precision,
batch limits) and calibration profile, so a prefill pool may use another GPU than the decode
pool (Splitwise's point). What is not modelled yet (queues, contention between transfers that
share a link, pools, the search) comes in later steps of issue 33.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from planner.common.text import shown
from planner.errors import UsageError
from planner.latency.catalog import (
    CatalogError,
    ModelSpec,
    Table,
    UnsupportedError,
    _aliases,
    _float,
    _required,
    _rows,
    _whole,
)
from planner.latency.model import Deployment, LatencyModel
from planner.paths import data_dir

KV_BYTES = (1.0, 2.0, 4.0)  # per KV element: fp8, fp16/bf16, fp32 (as Deployment.kv_bytes)
KV_PRECISIONS: Mapping[str, float] = {
    "fp8": 1.0,
    "fp16": 2.0,
    "bf16": 2.0,
    "fp32": 4.0,
}
DEFAULT_LINK_EFFICIENCY = 0.8  # assumption: share of the line rate a bulk transfer reaches
LINK_SCOPES = ("network", "node")
FIRST_TOKEN = ("decode", "prefill")

# --- the KV cache of a prompt, and how it crosses from one TP layout to another --------------


@dataclass(frozen=True)
class _KVLayout:
    """The part of a :class:`Deployment` that sizes the KV cache: the model, its TP degree and
    the KV element size. It borrows Deployment's own properties so that the bytes per token
    are computed by one piece of code only."""

    model: ModelSpec
    tp: int
    kv_bytes: float

    kv_heads_per_gpu = Deployment.kv_heads_per_gpu
    kv_bytes_per_token = Deployment.kv_bytes_per_token
    window_kv_bytes_per_token = Deployment.window_kv_bytes_per_token
    kv_bytes_for = Deployment.kv_bytes_for


def kv_bytes_value(kv_precision: float | str) -> float:
    """Bytes per KV element for ``kv_precision``: 1, 2 or 4, or a name (fp8, fp16, bf16, fp32)."""
    if isinstance(kv_precision, str):
        value = KV_PRECISIONS.get(kv_precision.strip().lower())
        if value is None:
            raise UsageError(
                f"KV precision {shown(kv_precision)}: expected one of {', '.join(KV_PRECISIONS)}"
            )
        return value
    if float(kv_precision) not in KV_BYTES:
        raise UsageError(
            f"KV precision {kv_precision!r} bytes per element: expected 1 (fp8), 2 (fp16/bf16) "
            "or 4 (fp32)"
        )
    return float(kv_precision)


def _check_tp(model: ModelSpec, tp: int, side: str) -> None:
    """The TP degrees a Deployment accepts for this model (its heads and KV heads divide)."""
    if tp < 1 or model.attention_heads % tp or (model.kv_heads % tp and tp % model.kv_heads):
        raise UnsupportedError(
            f"{side} tensor parallelism {tp} does not fit {model.name}: it must divide the "
            f"{model.attention_heads} attention heads, and it and the {model.kv_heads} KV heads "
            "must divide one another"
        )


def _heads_of(rank: int, tp: int, kv_heads: int) -> range:
    """The KV heads TP rank ``rank`` holds: a contiguous slice when tp <= kv_heads, else one
    head replicated over tp / kv_heads consecutive ranks (vLLM's layout)."""
    if tp <= kv_heads:
        per = kv_heads // tp
        return range(rank * per, (rank + 1) * per)
    head = rank // (tp // kv_heads)
    return range(head, head + 1)


@dataclass(frozen=True)
class Flow:
    """One GPU-to-GPU copy: from prefill TP rank ``source`` to decode TP rank ``target``."""

    source: int
    target: int
    heads: int
    bytes: float


@dataclass(frozen=True)
class KVTransfer:
    """The KV cache of ``tokens`` prompt tokens moving from a TP ``prefill_tp`` layout to a TP
    ``decode_tp`` one.

    ``cache_bytes`` is the prompt's KV cache (each KV head once); ``bytes`` what crosses the
    link (more than ``cache_bytes`` when the decode side replicates KV heads, TP > KV heads).
    Each decode rank receives the heads it holds from a prefill rank that holds them; with
    TP_p != TP_d the heads are re-sharded: TP 8 -> TP 4 of 8 KV heads is 8 flows of one head,
    two into each decode GPU; TP 4 -> TP 8 is 8 flows of one head, two out of each prefill GPU.
    """

    tokens: int
    prefill_tp: int
    decode_tp: int
    bytes_per_token: float  # KV cache of one token, all heads once (= TP 1's per-GPU bytes)
    flows: tuple[Flow, ...]

    @property
    def cache_bytes(self) -> float:
        return self.bytes_per_token * self.tokens

    @property
    def bytes(self) -> float:
        return sum(f.bytes for f in self.flows)

    @property
    def flow_count(self) -> int:
        return len(self.flows)

    @property
    def bytes_per_flow(self) -> float:
        """The largest flow's bytes (all flows are equal in the layouts a Deployment allows)."""
        return max(f.bytes for f in self.flows)

    @property
    def senders(self) -> int:
        return len({f.source for f in self.flows})

    @property
    def receivers(self) -> int:
        return len({f.target for f in self.flows})

    @property
    def max_sent_bytes(self) -> float:
        """Bytes the busiest prefill GPU sends."""
        return max(
            sum(f.bytes for f in self.flows if f.source == s) for s in range(self.prefill_tp)
        )

    @property
    def max_received_bytes(self) -> float:
        """Bytes the busiest decode GPU receives."""
        return max(sum(f.bytes for f in self.flows if f.target == t) for t in range(self.decode_tp))


def kv_transfer_bytes(
    model: ModelSpec,
    tokens: int,
    kv_precision: float | str,
    prefill_tp: int = 1,
    decode_tp: int = 1,
) -> KVTransfer:
    """The prompt's KV cache (``tokens`` tokens of ``model`` in ``kv_precision``) and its flows
    from a TP ``prefill_tp`` prefill instance to a TP ``decode_tp`` decode instance.

    Bytes per token are Deployment's (:attr:`Deployment.kv_bytes_per_token` at TP 1: 2 x layers
    x KV heads x head dim x KV bytes). A decode rank takes each head it holds from the prefill
    replicas of that head in turn, so that replicated heads spread over the prefill GPUs.

    Two 2026 cases: an MLA model's latent (layers x (kv_lora_rank + rope) x KV bytes per token)
    is one copy that every TP rank holds whole (vLLM replicates it), so each decode rank
    receives all of it, from the prefill ranks in turn; a model with sliding-window layers
    sends its global layers' KV for every token and its windowed layers' for the last window
    of the prompt only (what the decode side attends to)."""
    if tokens < 0:
        raise UsageError(f"prompt tokens {tokens}: expected 0 or more")
    kv_bytes = kv_bytes_value(kv_precision)
    _check_tp(model, prefill_tp, "prefill")
    _check_tp(model, decode_tp, "decode")
    # _KVLayout carries the fields Deployment's KV properties read (model, tp, kv_bytes)
    layout = cast(Deployment, _KVLayout(model, 1, kv_bytes))
    per_token = float(layout.kv_bytes_per_token)
    if model.is_mla:
        # one latent, whole on every decode rank: each receives all of it
        latent = per_token * tokens
        mla_flows = tuple(
            Flow(target % prefill_tp, target, 1, latent) for target in range(decode_tp)
        )
        return KVTransfer(tokens, prefill_tp, decode_tp, per_token, mla_flows)
    if model.sliding_layers:
        # windowed layers: only the prompt's last window crosses
        cache = float(layout.kv_bytes_for(tokens))
        per_token = cache / tokens if tokens else per_token
    per_head_token = per_token / model.kv_heads
    holders: dict[int, list[int]] = {}
    for rank in range(prefill_tp):
        for head in _heads_of(rank, prefill_tp, model.kv_heads):
            holders.setdefault(head, []).append(rank)
    used = dict.fromkeys(holders, 0)
    pairs: dict[tuple[int, int], int] = {}
    for target in range(decode_tp):
        for head in _heads_of(target, decode_tp, model.kv_heads):
            replicas = holders[head]
            source = replicas[used[head] % len(replicas)]
            used[head] += 1
            pairs[(source, target)] = pairs.get((source, target), 0) + 1
    flows = tuple(
        Flow(source, target, heads, heads * per_head_token * tokens)
        for (source, target), heads in sorted(pairs.items())
    )
    return KVTransfer(tokens, prefill_tp, decode_tp, per_token, flows)


def deployment_kv_transfer(prefill: Deployment, decode: Deployment, tokens: int) -> KVTransfer:
    """:func:`kv_transfer_bytes` between two deployments of one model and one KV precision
    (converting the KV cache between precisions on the way is not modelled)."""
    if prefill.model.name != decode.model.name:
        raise UsageError(
            f"prefill serves {prefill.model.name} and decode {decode.model.name}: the KV cache "
            "only moves between instances of one model"
        )
    if prefill.kv_bytes != decode.kv_bytes:
        raise UnsupportedError(
            f"prefill keeps its KV cache in {prefill.kv_cache} and decode in {decode.kv_cache}: "
            "converting it on the way is not modelled; give both roles one KV precision"
        )
    return kv_transfer_bytes(prefill.model, tokens, prefill.kv_bytes, prefill.tp, decode.tp)


# --- links ------------------------------------------------------------------------------------

LINK_COLUMNS = (
    "name",
    "aliases",
    "scope",
    "line_gbit_s",
    "gpus",
    "gpu_aligned",
    "latency_us",
    "source",
    "source_date",
)


@dataclass(frozen=True)
class Link:
    """What a KV cache crosses between a prefill and a decode instance (a row of links.csv).

    ``line_gbit_s`` is the instance's line rate per direction in gigabits per second, as
    providers quote it (gpus.csv's ``link_gbps`` is in GB/s). With ``gpu_aligned`` each of the
    ``gpus`` GPUs sends over its own NIC(s) (P5's 32 EFA cards, 4 per GPU; ND H100 v5's one
    InfiniBand port per GPU; NVLink), a GPU's share being ``line / gpus``; without it every
    flow shares the one NIC."""

    name: str
    aliases: tuple[str, ...]
    scope: str  # "network" (between instances) or "node" (GPUs of one node: NVLink)
    provider: str
    instance_types: tuple[str, ...]
    gpu: str
    transport: str
    line_gbit_s: float
    gpus: int
    gpu_aligned: bool
    latency_s: float  # per transfer: setup, the first byte's trip and the completion
    efficiency: float  # achievable share of the line rate
    source: str
    source_date: str
    notes: str = ""

    @property
    def bandwidth(self) -> float:
        """Bytes/s the whole instance moves, at the achievable share of its line rate."""
        return self.line_gbit_s * 1e9 / 8 * self.efficiency

    @property
    def gpu_bandwidth(self) -> float:
        """Bytes/s one GPU moves: its NICs' share when GPU-aligned, else the shared NIC's."""
        return self.bandwidth / self.gpus if self.gpu_aligned else self.bandwidth

    def flows_bandwidth(self, flows: int) -> float:
        """Bytes/s of ``flows`` parallel flows, each from its own GPU: aligned NICs add up
        (to the instance's line rate), a shared NIC is shared."""
        if flows < 1:
            raise UsageError(f"flows {flows}: expected 1 or more")
        if not self.gpu_aligned:
            return self.bandwidth
        return min(self.bandwidth, self.gpu_bandwidth * flows)


def _bool(row: Mapping[str, str], key: str, path: Path) -> bool:
    text = (row.get(key) or "").strip().lower()
    if text not in ("true", "false"):
        raise CatalogError(
            f"{path}: {shown(row.get('name'))}: {key} = {shown(text)}: expected true or false"
        )
    return text == "true"


def load_links(path: Path) -> list[Link]:
    """The links of a links catalog file; a bad row is a :class:`CatalogError` naming the file,
    the row and the column."""
    links = []
    for row in _rows(path, LINK_COLUMNS):
        name = row["name"].strip()
        scope = row["scope"].strip()
        if scope not in LINK_SCOPES:
            raise CatalogError(
                f"{path}: {shown(name)}: scope = {shown(scope)}: expected one of "
                f"{', '.join(LINK_SCOPES)}"
            )
        for key in ("source", "source_date"):
            if not row[key].strip():
                raise CatalogError(f"{path}: {shown(name)}: {key} is required")
        efficiency = _float(row, "efficiency", path)
        if efficiency is None:
            efficiency = DEFAULT_LINK_EFFICIENCY
        if not 0 < efficiency <= 1:
            raise CatalogError(
                f"{path}: {shown(name)}: efficiency = {efficiency:g}: expected more than 0 "
                "and at most 1"
            )
        links.append(
            Link(
                name=name,
                aliases=_aliases(row["aliases"]),
                scope=scope,
                provider=row.get("provider", "").strip(),
                instance_types=_aliases(row.get("instance_types", "")),
                gpu=row.get("gpu", "").strip(),
                transport=row.get("transport", "").strip(),
                line_gbit_s=_required(row, "line_gbit_s", path),
                gpus=_whole(row, "gpus", path),
                gpu_aligned=_bool(row, "gpu_aligned", path),
                latency_s=_required(row, "latency_us", path, positive=False) * 1e-6,
                efficiency=efficiency,
                source=row["source"].strip(),
                source_date=row["source_date"].strip(),
                notes=row.get("notes", "").strip(),
            )
        )
        if links[-1].latency_s < 0:
            raise CatalogError(f"{path}: {shown(name)}: latency_us must be 0 or more")
    return links


def links_path() -> Path:
    """The bundled links catalog: ``data/catalog/links.csv`` (under ``$PLANNER_DATA_DIR``)."""
    return data_dir() / "catalog" / "links.csv"


@functools.cache
def _links(path: Path) -> Table[Link]:
    return Table("link", load_links(path))


def load_link_table(path: Path | None = None) -> Table[Link]:
    """The links by name or alias (a network link's aliases name its instance types, e.g.
    ``p5.48xlarge``), read once per file."""
    return _links(path or links_path())


def node_link(gpu: str, table: Table[Link] | None = None) -> Link | None:
    """The NVLink row of ``gpu`` (a catalog GPU name): what the KV cache crosses when both
    roles sit in one node; None where the catalog has none."""
    for link in (table or load_link_table()).entries:
        if link.scope == "node" and link.gpu == gpu:
            return link
    return None


def default_link(gpu: str, gpus_used: int, gpus_per_node: int) -> Link:
    """The link a disaggregated deployment takes when none is named: the GPU's NVLink when
    both roles fit one node; otherwise a UsageError listing the links to name."""
    link = node_link(gpu)
    if link is None or gpus_used > gpus_per_node:
        raise UsageError(
            f"the prefill and decode roles ({gpus_used} GPUs of {gpu}) do not share one "
            "node's NVLink: give --kv-link NAME, one of " + ", ".join(load_link_table().names())
        )
    return link


# --- transfer time ------------------------------------------------------------------------


def transfer_seconds(bytes_: float, link: Link, flows: int = 1) -> float:
    """Seconds to move ``bytes_`` over ``link`` in ``flows`` equal parallel flows, each from its
    own GPU: ``latency + bytes / bandwidth``. Over GPU-aligned NICs the flows' NICs add up (to
    the instance's line rate); over a shared NIC they share it. The flows run at once, so the
    latency counts once."""
    if bytes_ < 0:
        raise UsageError(f"bytes {bytes_!r}: expected 0 or more")
    if bytes_ == 0:
        return 0.0
    return link.latency_s + bytes_ / link.flows_bandwidth(flows)


def kv_transfer_seconds(transfer: KVTransfer, link: Link) -> float:
    """Seconds for ``transfer`` over ``link``: the latency plus the slowest of the instance's
    line rate (all bytes), the busiest prefill GPU's NICs (what it sends) and the busiest decode
    GPU's NICs (what it receives); the last two only where the NICs are GPU-aligned."""
    if transfer.bytes == 0:
        return 0.0
    seconds = transfer.bytes / link.bandwidth
    if link.gpu_aligned:
        busiest = max(transfer.max_sent_bytes, transfer.max_received_bytes)
        seconds = max(seconds, busiest / link.gpu_bandwidth)
    return link.latency_s + seconds


# --- the two roles --------------------------------------------------------------------------


@dataclass(frozen=True)
class PrefillRole:
    """A prefill instance: prompts only, no decodes in its iterations."""

    latency: LatencyModel

    @property
    def deployment(self) -> Deployment:
        return self.latency.deployment

    def seconds(self, prompt_tokens: int, prompts: int = 1) -> float:
        """Seconds to prefill ``prompts`` prompts of ``prompt_tokens`` tokens in one batch
        (:meth:`LatencyModel.prefill_time`); one prompt longer than the batched-token budget
        runs in chunks of it, each reading the cached part (:meth:`LatencyModel.mixed_time`
        with no decodes)."""
        if prompt_tokens < 1 or prompts < 1:
            raise UsageError("a prefill needs at least one prompt of at least one token")
        budget = self.deployment.max_batched_tokens
        if prompts * prompt_tokens <= budget:
            return float(self.latency.prefill_time(prompt_tokens, prompts))
        if prompts > 1:
            raise UsageError(
                f"{prompts} prompts of {prompt_tokens:,} tokens exceed the batched-token budget "
                f"({budget:,}); price them one at a time"
            )
        starts = np.arange(0, prompt_tokens, budget, dtype=np.float64)
        chunks = np.minimum(budget, prompt_tokens - starts)
        last = (starts + chunks >= prompt_tokens).astype(np.float64)
        return float(np.sum(self.latency.mixed_time(chunks, starts, 0.0, 0.0, last)))


@dataclass(frozen=True)
class DecodeRole:
    """A decode instance: decode steps only, no prefill interference."""

    latency: LatencyModel

    @property
    def deployment(self) -> Deployment:
        return self.latency.deployment

    def check_batch(self, batch: int, context_per_sequence: float) -> None:
        """The batch fits the instance's limits: its max sequences and its KV cache."""
        d = self.deployment
        if batch < 1 or batch > d.max_seqs:
            raise UnsupportedError(
                f"decode batch {batch}: the decode instance takes 1 to {d.max_seqs} sequences "
                "(max_seqs)"
            )
        need = batch * context_per_sequence
        if need > d.kv_capacity_tokens:
            raise UnsupportedError(
                f"decode batch {batch} x {context_per_sequence:,.0f} tokens of context needs "
                f"{need:,.0f} tokens of KV cache; the decode instance holds "
                f"{d.kv_capacity_tokens:,}"
            )

    def step_seconds(self, batch: int, context_tokens: float) -> float:
        """One decode step of ``batch`` sequences holding ``context_tokens`` tokens of context
        in total (:meth:`LatencyModel.decode_time`)."""
        return float(self.latency.decode_time(batch, context_tokens))


@dataclass(frozen=True)
class DisaggregatedLatency:
    """One request through a prefill instance, the link and a decode instance."""

    prefill_s: float
    transfer_s: float
    first_step_s: float  # the decode step that yields the first token (0 when prefill does)
    ttft_s: float
    tpot_s: float
    e2e_s: float
    transfer: KVTransfer
    link: str
    first_token: str

    @property
    def transfer_share(self) -> float:
        """The transfer's share of TTFT."""
        return self.transfer_s / self.ttft_s if self.ttft_s > 0 else 0.0


def disaggregated_request(
    prefill: PrefillRole,
    decode: DecodeRole,
    link: Link,
    prompt_tokens: int,
    output_tokens: int,
    decode_batch: int = 1,
    first_token: str = "decode",
) -> DisaggregatedLatency:
    """TTFT, TPOT and end-to-end seconds of one request, its prompt prefilled alone on
    ``prefill``, its KV cache moved over ``link``, then decoded on ``decode`` in a batch of
    ``decode_batch`` sequences at the same context as this one.

    ``first_token`` says which side yields the first token:

    - ``"decode"`` (default; vLLM's NIXL connector, from memory, unverified): the decode instance
      loads the prompt's KV cache and recomputes the last prompt token, so TTFT = prefill +
      transfer + one decode step;
    - ``"prefill"`` (SGLang, TensorRT-LLM's context server): the prefill instance samples the
      first token and it travels with the KV cache, so TTFT = prefill + transfer.

    TPOT is the mean of the decode steps after the first token (context growing one token a
    step); E2E = TTFT + (output - 1) x TPOT."""
    if first_token not in FIRST_TOKEN:
        raise UsageError(f"first_token {shown(first_token)}: expected one of decode, prefill")
    if output_tokens < 1:
        raise UsageError(f"output tokens {output_tokens}: expected 1 or more")
    decode.check_batch(decode_batch, prompt_tokens + output_tokens)
    prefill_s = prefill.seconds(prompt_tokens)
    transfer = deployment_kv_transfer(prefill.deployment, decode.deployment, prompt_tokens)
    transfer_s = kv_transfer_seconds(transfer, link)
    first_step_s = (
        decode.step_seconds(decode_batch, decode_batch * prompt_tokens)
        if first_token == "decode"
        else 0.0
    )
    ttft = prefill_s + transfer_s + first_step_s
    if output_tokens > 1:
        # step k (1..output-1) reads prompt + k tokens of context per sequence
        context = prompt_tokens + np.arange(1, output_tokens, dtype=np.float64)
        steps = decode.latency.decode_time(decode_batch, decode_batch * context)
        tpot = float(np.mean(steps))
    else:
        tpot = 0.0
    return DisaggregatedLatency(
        prefill_s=prefill_s,
        transfer_s=transfer_s,
        first_step_s=first_step_s,
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=ttft + (output_tokens - 1) * tpot,
        transfer=transfer,
        link=link.name,
        first_token=first_token,
    )
