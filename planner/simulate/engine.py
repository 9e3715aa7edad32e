"""One serving replica: an inference engine's scheduler, iteration by iteration.

Continuous batching as vLLM does it: a waiting queue; admission bounded by the maximum number of
sequences, the tokens one iteration may batch and free KV-cache blocks; chunked prefill (prompt
chunks ride along with the decodes) or prefill-first (a prefill-only iteration whenever a prompt
waits); preemption by recomputation when the KV cache runs out. Admission is one of two
policies (``EngineConfig.admission``): ``preempt`` (vLLM, SGLang: admit while the prompt fits,
keeping ``watermark`` of the cache free, and preempt the newest when decodes run out) or
``no_evict`` (TensorRT-LLM's GUARANTEED_NO_EVICT: admit only what can run to its end, never
preempt). Also the static batching the seed articles describe (collect up to a batch size or a
wait window, run it to the end).

Event-level work grows with requests and scheduling changes, not with tokens: while the batch
does not change, decode steps form one *segment* whose duration is a closed-form sum (a decode
step costs ``D0[B] + gamma * context``, and the context grows by B tokens a step), planned up to
the next completion, KV exhaustion or arrival, and cut short when a request arrives.
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final, Protocol

import numpy as np
from librt.vecs import append, pop, vec
from mypy_extensions import i64

from planner.common.native import compiled_twin
from planner.latency.model import LatencyModel
from planner.latency.step import StepFormula

# Final: the compiled build reads these as constants, not from the module's dict at each use
BLOCK_TOKENS: Final = 16  # vLLM's KV-cache block size
#: Children per node of the fleet's heaps (Dispatch): half the depth of a binary heap, fewer
#: moves per sift, and a node's children side by side in memory
HEAP_ARITY: Final = 4
ADMISSION_POLICIES = ("preempt", "no_evict")
VLLM_WATERMARK = 0.01  # vLLM's default share of KV blocks kept free at admission


class StepTimes(Protocol):
    """Seconds an engine iteration takes: the simulator's view of a latency model."""

    @property
    def gamma(self) -> float:
        """Seconds per token of context per decode step."""
        ...

    def decode_base(self, batch: int) -> float:
        """Seconds of a decode step of ``batch`` sequences, excluding the context term."""
        ...

    def iteration(self, tokens: float, attn_pairs: float, kv_read: float, logits: float) -> float:
        """Seconds of any iteration (see :class:`planner.latency.model.LatencyModel`)."""
        ...

    @property
    def request_overhead(self) -> float:
        """Seconds each request spends outside the GPU (HTTP, tokenizing, detokenizing): its
        first token and its end come this much later than the engine produces them."""
        ...


class RooflineStepTimes:
    """Step times from the calibrated latency model, with decode steps tabulated by batch."""

    def __init__(self, model: LatencyModel, max_batch: int) -> None:
        self.model = model
        batches = np.arange(max_batch + 1.0)  # 0.0, 1.0, ..., max_batch
        base = model.decode_time(batches, 0.0)
        # decode_time(B, C) = base(B) + gamma * C exactly: attention is the only context term and
        # its FLOPs and bytes both scale with (C + B).
        self.gamma = float(model.decode_time(1, 1_000_000.0) - model.decode_time(1, 0.0)) / 1e6
        self._base = [0.0, *(float(b) for b in base[1:])]
        self.request_overhead = model.profile.request_overhead_ms * 1e-3
        # the one step formula, which LatencyModel.iteration_seconds calls too; compiled with
        # this module (setup.py), the call below is a native one
        self._step: StepFormula = model.step

    def decode_base(self, batch: int) -> float:
        return self._base[batch]

    def iteration(self, tokens: float, attn_pairs: float, kv_read: float, logits: float) -> float:
        """``LatencyModel.iteration_seconds``: :meth:`planner.latency.step.StepFormula.seconds`,
        the one step formula, once per iteration (the compiled builds call it natively)."""
        return self._step.seconds(tokens, attn_pairs, kv_read, logits)


@dataclass(frozen=True)
class LinearStepTimes:
    """A plain linear cost (seconds per token plus per iteration), for queueing-theory checks
    and what-if engines."""

    per_token_s: float
    per_iteration_s: float = 0.0
    gamma: float = 0.0
    request_overhead: float = 0.0

    def decode_base(self, batch: int) -> float:
        return self.per_iteration_s + batch * self.per_token_s

    def iteration(self, tokens: float, attn_pairs: float, kv_read: float, logits: float) -> float:
        return self.per_iteration_s + tokens * self.per_token_s


@dataclass(frozen=True)
class EngineConfig:
    max_seqs: int = 256
    max_batched_tokens: int = 8192
    kv_capacity_tokens: int = 1 << 40
    chunked_prefill: bool = True
    policy: str = "continuous"  # or "static"
    static_max_batch: int = 8
    static_max_wait_s: float = 0.05
    prefix_cache_tokens: int = 0  # tokens of prefix cache (0: none)
    prefix_hit_rate: float = (
        0.0  # what-if share of prompt tokens cached, for logs without block ids
    )
    # Continuous batching: "preempt" admits while the prompt fits and preempts by recomputation
    # when decodes run out of KV (vLLM, SGLang); "no_evict" admits only what can run to its end
    # (TensorRT-LLM's GUARANTEED_NO_EVICT) and never preempts.
    admission: str = "preempt"
    # "preempt": share of the KV cache a prompt must leave free to be admitted (vLLM's
    # watermark, 0.01), so the running decodes have room to grow. 0 admits to the last block.
    watermark: float = 0.0

    def __post_init__(self) -> None:
        if self.policy not in ("continuous", "static"):
            raise ValueError(f"policy must be continuous or static, got {self.policy!r}")
        if self.admission not in ADMISSION_POLICIES:
            raise ValueError(
                f"admission must be one of {', '.join(ADMISSION_POLICIES)}, got {self.admission!r}"
            )
        if not 0 <= self.watermark < 1:
            raise ValueError(f"watermark must be a share in [0, 1), got {self.watermark!r}")

    @property
    def watermark_tokens(self) -> int:
        """KV tokens a prompt must leave free: whole blocks, as vLLM counts them."""
        return int(self.watermark * (self.kv_capacity_tokens // BLOCK_TOKENS)) * BLOCK_TOKENS


class Sequence:
    """A request inside a replica."""

    __slots__ = (
        "admit_step",
        "arrival",
        "blocks",
        "cached",
        "ctx_at_admit",
        "first_token",
        "gen",
        "generated",
        "id",
        "input_tokens",
        "klass",
        "output_tokens",
        "preemptions",
        "prefill_done",
        "prefill_total",
        "state",
    )

    def __init__(
        self,
        rid: int,
        arrival: float,
        input_tokens: int,
        output_tokens: int,
        klass: int,
        blocks: tuple[int, ...] | None = None,
    ) -> None:
        self.id = rid
        self.arrival = arrival
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens if output_tokens > 1 else 1  # max(1, ...), faster
        self.klass = klass
        self.blocks = blocks
        self.generated = 0  # tokens generated so far (the first token counts)
        self.prefill_total = input_tokens
        self.prefill_done = 0
        self.cached = 0
        self.first_token = math.nan
        self.admit_step = 0
        self.ctx_at_admit = 0
        self.preemptions = 0
        self.gen = 0  # admissions to a decode batch; tells stale heap entries apart
        self.state = 0  # 0 waiting, 1 prefilling, 2 decoding, 3 done


# What leaves a replica, a row per request: (id, arrival, first_token, finish, replica, class,
# input, output, cached, preemptions). A refused request has NaN times and replica -1.
Finished = tuple[int, float, float, float, int, int, int, int, int, int]

# what a replica is doing (Replica.activity)
_IDLE: Final = 0
_ITER: Final = 1  # an iteration (prefill, with decodes riding along if chunked), or a static batch
_SEGMENT: Final = 2  # decode steps summed in closed form


class PrefixListener(Protocol):
    """Told when a block enters or leaves a replica's prefix cache (the fleet's block index
    for prefix-affinity routing)."""

    def cached(self, block: int, replica: int) -> None: ...

    def evicted(self, block: int, replica: int) -> None: ...


class Replica:
    """One engine instance. The fleet calls :meth:`advance` to move it to a time and
    :meth:`submit` to hand it a request; finished (and refused) requests are appended to
    ``records``, a list the fleet may share between its replicas."""

    # slots: more attributes than CPython 3.11 shares keys for, read in every hot path
    __slots__ = (
        "_chunked",
        "_decode_base",
        "_gamma",
        "_iteration",
        "_kv_capacity",
        "_max_batched_tokens",
        "_max_seqs",
        "_no_hit_rate",
        "_request_overhead",
        "_static",
        "_watermark_tokens",
        "activity",
        "activity_busy",
        "activity_end",
        "activity_start",
        "admit_order",
        "batch",
        "busy_s",
        "clock",
        "committed",
        "config",
        "ctx_base",
        "draining",
        "finished_some",
        "index",
        "iteration_decodes",
        "iteration_work",
        "last_out",
        "no_evict",
        "outstanding_tokens",
        "prefilling",
        "prefix_block_tokens",
        "prefix_cache",
        "prefix_capacity",
        "prefix_listener",
        "records",
        "refused",
        "reserved",
        "routable",
        "run_keys",
        "running",
        "segment_steps",
        "static_batch",
        "steps",
        "times",
        "waiting",
    )

    def __init__(
        self,
        index: int,
        times: StepTimes,
        config: EngineConfig,
        records: list[Finished] | None = None,
        prefix_block_tokens: int = 512,
    ) -> None:
        self.index = index
        # the fleet's flags (see Dispatch): whether the router may pick it, whether it drains
        self.routable = False
        self.draining = False
        self.times = times
        self.config = config
        self.records: list[Finished] = [] if records is None else records
        self.refused = 0  # requests too long for the KV cache, refused at submit
        self.last_out = 0.0  # when the last request left, as the client sees it
        self.finished_some = False  # a request left since the fleet last looked (Dispatch)
        self.prefix_block_tokens = prefix_block_tokens
        self.clock = 0.0
        self.busy_s = 0.0
        self.waiting: deque[Sequence] = deque()
        self.prefilling: list[Sequence] = []
        # heap of (finish step, id, admission number) -> seq, as heapq would order the tuples:
        # the sequences in ``running`` and their keys in ``run_keys``, three to an entry,
        # unboxed (no tuple or int object made or freed per admission); entries of preempted
        # runs are stale (see _run_push)
        self.running: list[Sequence] = []
        self.run_keys: vec[i64] = vec[i64]()
        self.admit_order: list[Sequence] = []  # running, oldest first (preemption takes the last)
        self.batch = 0  # sequences decoding
        self.steps = 0  # decode steps this replica has run
        self.ctx_base = 0  # sum over decoding sequences of (context at admission - admit step)
        self.reserved = 0  # KV tokens reserved by prompts being prefilled
        # no_evict: the whole need (whole_kv_need) of every sequence admitted and not finished
        self.no_evict = config.admission == "no_evict" and config.policy == "continuous"
        self.committed = 0
        self.activity = _IDLE
        self.activity_end = math.inf
        self.activity_start = 0.0
        self.activity_busy = False  # False while a static batch waits for its window
        self.segment_steps = 0
        self.iteration_work: list[tuple[Sequence, int]] = []
        self.iteration_decodes = False
        self.prefix_cache: OrderedDict[int, None] = OrderedDict()
        self.prefix_capacity = config.prefix_cache_tokens // max(1, prefix_block_tokens)
        # set by a prefix-affinity fleet; None (no cost) otherwise
        self.prefix_listener: PrefixListener | None = None
        self.outstanding_tokens = 0
        self.static_batch: list[Sequence] = []
        # the hot paths' constants, looked up once (the config is frozen; the step times fixed)
        self._static = config.policy == "static"
        self._chunked = config.chunked_prefill
        self._kv_capacity = config.kv_capacity_tokens
        self._max_seqs = config.max_seqs
        self._max_batched_tokens = config.max_batched_tokens
        self._watermark_tokens = config.watermark_tokens
        self._decode_base = times.decode_base
        self._gamma = times.gamma
        self._iteration = times.iteration
        self._request_overhead = times.request_overhead
        # without a what-if hit rate, a request caches nothing unless its blocks meet a cache
        self._no_hit_rate = not config.prefix_hit_rate > 0

    # --- what the router sees --------------------------------------------------------------

    @property
    def outstanding(self) -> int:
        return len(self.waiting) + len(self.prefilling) + self.batch + len(self.static_batch)

    @property
    def idle(self) -> bool:
        return self.activity == _IDLE and not self.waiting

    # --- the fleet's interface -------------------------------------------------------------

    def submit(self, seq: Sequence, now: float) -> None:
        """A request arrives at ``now`` (the replica has been advanced to ``now``)."""
        # whole_kv_need(...), inlined: once per request
        if seq.input_tokens + seq.output_tokens + BLOCK_TOKENS > self._kv_capacity:
            # even alone it could never finish: the engine refuses it (vLLM: too long)
            seq.state = 3
            self.refused += 1
            self.last_out = self.clock
            self.finished_some = True
            nan = math.nan
            self.records.append(
                (
                    seq.id,
                    seq.arrival,
                    nan,
                    nan,
                    -1,
                    seq.klass,
                    seq.input_tokens,
                    seq.output_tokens,
                    seq.cached,
                    seq.preemptions,
                )
            )
            return
        self.waiting.append(seq)
        self.outstanding_tokens += seq.input_tokens + seq.output_tokens
        activity = self.activity
        if activity == _IDLE:
            if now > self.clock:  # max(self.clock, now)
                self.clock = now
            self._plan()
        elif activity == _SEGMENT:
            self._cut_segment(now)
        elif (
            self._static
            and not self.static_batch
            and len(self.waiting) >= self.config.static_max_batch
        ):
            self.activity_end = now  # the batch is full: stop waiting for the window

    def advance(self, until: float) -> None:
        """Run every iteration that ends by ``until``."""
        # finishing the activity and _plan() are inlined: this loop runs once per iteration
        # or decode segment
        while (activity := self.activity) != _IDLE and self.activity_end <= until:
            end = self.activity_end
            if self.activity_busy:  # False while a static batch waits for its window
                self.busy_s += end - self.activity_start
            self.clock = end
            if activity == _SEGMENT:
                steps = self.steps = self.steps + self.segment_steps
                # a cut segment ends no decode: skip the call (the heap's top is its minimum)
                if self.run_keys[0] <= steps:
                    self._complete_decodes(end)
            else:  # an iteration
                if self.static_batch:
                    for seq in self.static_batch:
                        self._finish(seq, end)
                    self.static_batch = []
                if self.iteration_decodes:
                    self.steps += 1
                    if self.run_keys[0] <= self.steps:  # the heap top may be stale: check
                        self._complete_decodes(end)
                self._complete_prefills(end)
            self.activity, self.activity_end = _IDLE, math.inf
            if self._static:
                self._plan_static()
                continue
            if self.waiting:
                self._admit()
            if self.prefilling:
                self._start_prefill_iteration()
            elif self.batch:
                self._start_segment()
            else:
                self.activity, self.activity_end = _IDLE, math.inf

    def next_event(self) -> float:
        return self.activity_end if self.activity != _IDLE else math.inf

    def evict(self) -> list[Sequence]:
        """Stop now (a spot interruption): every request inside is returned, progress lost."""
        keys = self.run_keys
        decoding = (
            s for k, s in enumerate(self.running) if s.state == 2 and s.gen == keys[3 * k + 2]
        )
        seqs = [*self.waiting, *self.prefilling, *decoding, *self.static_batch]
        self.static_batch = []
        self.waiting.clear()
        self.prefilling.clear()
        self.running.clear()
        self.run_keys = vec[i64]()
        self.admit_order.clear()
        self.batch = self.ctx_base = self.reserved = self.outstanding_tokens = 0
        self.committed = 0
        self.activity, self.activity_end = _IDLE, math.inf
        for seq in seqs:
            seq.state = 0
            seq.generated = seq.prefill_done = seq.cached = 0
            seq.prefill_total = seq.input_tokens
            seq.first_token = math.nan
            seq.preemptions += 1
        return seqs

    # --- scheduling ------------------------------------------------------------------------

    def _kv_used(self) -> int:
        # every decoding sequence may hold one partly filled block
        return self.ctx_base + self.batch * self.steps + self.batch * BLOCK_TOKENS + self.reserved

    def _admit(self) -> None:
        """Move waiting requests, oldest first, into prefill while the batch and the KV cache
        allow; the first that does not fit stops admission (no request overtakes another)."""
        capacity = self._kv_capacity
        max_seqs = self._max_seqs
        waiting = self.waiting
        prefilling = self.prefilling
        batch = self.batch  # admission moves requests into prefill only: the batch stays
        # the decodes' share of _kv_used(), inlined (all integers: the order does not matter)
        decoding_kv = self.ctx_base + batch * self.steps + batch * BLOCK_TOKENS
        while waiting and batch + len(prefilling) < max_seqs:
            seq = waiting[0]
            if self.no_evict:
                # reserve what it will hold at its last step, on top of what the running
                # requests reserved: every admitted request can finish, so none is preempted
                need = seq.input_tokens + seq.output_tokens + BLOCK_TOKENS  # whole_kv_need
                if self.committed + need > capacity:
                    break  # wait for a request to finish (it fits alone: submit checked)
                self.committed += need
            else:
                # vLLM keeps ``watermark`` of the blocks free after an admission, so the running
                # decodes have room to grow; a request that would be alone is admitted whenever
                # it fits, or it could wait forever
                room = capacity - self._watermark_tokens if batch or prefilling else capacity
                if decoding_kv + self.reserved + seq.prefill_total + BLOCK_TOKENS > room:
                    break  # wait for blocks to free up (it fits alone: submit checked)
            waiting.popleft()
            seq.state = 1
            if seq.prefill_done == 0:
                if self._no_hit_rate and (seq.blocks is None or self.prefix_capacity <= 0):
                    # _apply_prefix_cache(seq) without a cache to ask, inlined: nothing cached
                    # (min(0, prompt - 1), as there)
                    if seq.generated == 0:
                        last = seq.input_tokens - 1
                        seq.prefill_done = seq.cached = last if last < 0 else 0
                    else:
                        seq.prefill_done = seq.cached = 0
                else:
                    self._apply_prefix_cache(seq)
            self.reserved += seq.prefill_total
            prefilling.append(seq)

    def _apply_prefix_cache(self, seq: Sequence) -> None:
        cfg = self.config
        cached = 0
        if seq.blocks is not None and self.prefix_capacity > 0:
            cache = self.prefix_cache
            hits = 0
            for block in seq.blocks:
                if block not in cache:
                    break
                hits += 1
            listener = self.prefix_listener
            for block in seq.blocks:
                if block in cache:
                    cache.move_to_end(block)
                else:
                    cache[block] = None
                    if listener is not None:
                        listener.cached(block, self.index)
            while len(cache) > self.prefix_capacity:
                block, _ = cache.popitem(last=False)
                if listener is not None:
                    listener.evicted(block, self.index)
            cached = hits * self.prefix_block_tokens
            if cached < seq.input_tokens:  # reused in whole KV blocks of the engine's own size
                cached -= cached % BLOCK_TOKENS
        elif cfg.prefix_hit_rate > 0:
            cached = int(seq.input_tokens * cfg.prefix_hit_rate)
        # at least the last prompt token is computed, to produce the first output token
        if seq.generated == 0:
            last = seq.input_tokens - 1
            seq.cached = last if last < cached else cached  # min(cached, last)
        else:
            seq.cached = 0
        seq.prefill_done = seq.cached

    def _plan(self) -> None:
        """Start the next iteration or decode segment at ``self.clock``, or go idle."""
        if self._static:
            self._plan_static()
            return
        if self.waiting:
            self._admit()
        if self.prefilling:
            self._start_prefill_iteration()
        elif self.batch:
            self._start_segment()
        else:
            self.activity, self.activity_end = _IDLE, math.inf

    def _start_prefill_iteration(self) -> None:
        chunked = self._chunked
        batch = self.batch
        if chunked and batch:  # the decodes riding along need a token of KV each
            capacity = self._kv_capacity
            # _kv_used() inlined: once per iteration
            while batch and (
                capacity
                - (self.ctx_base + batch * self.steps + batch * BLOCK_TOKENS + self.reserved)
                < batch
            ):
                self._preempt_newest()
                batch = self.batch
        budget = self._max_batched_tokens - (batch if chunked else 0)
        work: list[tuple[Sequence, int]] = []
        tokens = pairs = kv = 0.0
        finishing = 0
        for seq in self.prefilling:
            done = seq.prefill_done
            left = seq.prefill_total - done
            if chunked:
                take = budget if budget < left else left  # min(left, budget)
                if take <= 0:
                    break
            else:
                take = left
                if take <= 0 or (work and take > budget):
                    break
            work.append((seq, take))
            tokens += take
            pairs += take * done + take * (take + 1) / 2
            kv += done
            if take == left:
                finishing += 1
            budget -= take
            if budget <= 0:
                break
        logits = float(finishing)
        if chunked and batch:  # the decodes ride along
            ctx = self.ctx_base + batch * self.steps
            tokens += batch
            pairs += ctx + batch
            kv += ctx
            logits += batch
        self.iteration_work = work
        self.iteration_decodes = chunked and batch > 0
        seconds = self._iteration(tokens, pairs, kv, logits)
        self.activity_busy = True
        self.activity = _ITER
        clock = self.clock
        self.activity_start = clock
        self.activity_end = clock + seconds

    def _start_segment(self) -> None:
        """Plan decode steps up to the next completion or KV exhaustion."""
        running = self.running
        capacity = self._kv_capacity
        while True:
            # the next finish step: drop stale heap entries (of runs preempted or ended), read
            # the top; in line here, the one place it is needed
            while running:
                seq = running[0]
                if seq.state == 2 and seq.gen == self.run_keys[2]:
                    break
                self._run_pop()
            steps = int(self.run_keys[0]) - self.steps
            batch = self.batch
            # _kv_used() inlined
            room = capacity - (
                self.ctx_base + batch * self.steps + batch * BLOCK_TOKENS + self.reserved
            )
            if room >= batch:
                fit = room // batch
                if fit < steps:  # min(steps, fit)
                    steps = fit
                break
            self._preempt_newest()
            if not self.batch:
                self._plan()
                return
        k = self.segment_steps = steps if steps > 1 else 1  # max(1, steps)
        # k steps of D0[B] + gamma * context, the context growing by B a step (closed form)
        ctx = self.ctx_base + batch * self.steps
        seconds = k * self._decode_base(batch) + self._gamma * (k * ctx + batch * k * (k - 1) / 2)
        self.activity_busy = True
        self.activity = _SEGMENT
        clock = self.clock
        self.activity_start = clock
        self.activity_end = clock + seconds

    def _cut_segment(self, now: float) -> None:
        """A request arrived mid-segment: end the segment at the first step boundary >= now."""
        start = self.activity_start
        elapsed = now - start
        b = self.batch
        base = self._decode_base(b)
        ctx = self.ctx_base + b * self.steps
        gamma = self._gamma
        a = gamma * b / 2
        lin = base + gamma * ctx - a
        # smallest k with a k^2 + lin k >= elapsed
        if a > 0:
            k = math.ceil((-lin + math.sqrt(lin * lin + 4 * a * elapsed)) / (2 * a) - 1e-9)
        else:
            k = math.ceil(elapsed / lin - 1e-9) if lin > 0 else 1
        planned = self.segment_steps
        # max(1, min(planned, k)), written out
        if k > planned:
            k = planned
        if k < 1:
            k = 1
        if k < planned:
            self.segment_steps = k
            # the same closed form as _start_segment's, for k steps
            self.activity_end = start + (k * base + gamma * (k * ctx + b * k * (k - 1) / 2))

    def _complete_prefills(self, now: float) -> None:
        done_prompts = []
        for seq, take in self.iteration_work:
            done = seq.prefill_done = seq.prefill_done + take
            if done >= seq.prefill_total:
                done_prompts.append(seq)
        if done_prompts:
            prefilling = self.prefilling
            admit_order = self.admit_order
            steps = self.steps  # no decode step runs while prompts finish
            for seq in done_prompts:
                prefilling.remove(seq)
                self.reserved -= seq.prefill_total
                generated = seq.generated
                if generated == 0:
                    seq.first_token = now
                # a prefill (first or recompute) ends with the next token
                generated = seq.generated = generated + 1
                if generated >= seq.output_tokens:
                    self._finish(seq, now)
                    continue
                seq.state = 2
                gen = seq.gen = seq.gen + 1
                seq.admit_step = steps
                ctx_at_admit = seq.ctx_at_admit = seq.prefill_total + 1
                self.ctx_base += ctx_at_admit - steps
                self.batch += 1
                finish_step = steps + seq.output_tokens - generated
                self._run_push(finish_step, seq.id, gen, seq)
                admit_order.append(seq)
        self.iteration_work = []

    def _complete_decodes(self, now: float) -> None:
        running = self.running
        steps = self.steps
        while running:
            seq = running[0]
            keys = self.run_keys
            live = seq.state == 2 and seq.gen == keys[2]
            if live and keys[0] > steps:
                break
            self._run_pop()
            if not live:
                continue
            self._leave_batch(seq)
            seq.generated = seq.output_tokens
            self._finish(seq, now)
        if len(self.admit_order) > 2 * self.batch + 16:
            self.admit_order = [s for s in self.admit_order if s.state == 2]

    # The running heap: heapq's own algorithm (heappush, heappop) over (finish step, id,
    # admission number) entries held as three integers each, so that the heap keeps the
    # layout heapq gave it (evict returns the sequences in heap order).

    def _run_push(self, finish: i64, rid: i64, gen: i64, seq: Sequence) -> None:
        """heapq.heappush(running, (finish, rid, gen, seq))."""
        running = self.running
        keys = self.run_keys
        running.append(seq)
        keys = append(keys, finish)
        keys = append(keys, rid)
        keys = append(keys, gen)
        pos: i64 = len(running) - 1
        self.run_keys = keys
        self._run_settle(pos, finish, rid, gen, seq)

    def _run_pop(self) -> None:
        """heapq.heappop(running), the entry dropped: the last entry fills the root, which
        moves down to a leaf by the smaller child and back up (heapq's _siftup)."""
        running = self.running
        last = running.pop()
        keys = self.run_keys
        keys, gen = pop(keys)
        keys, rid = pop(keys)
        keys, finish = pop(keys)
        end: i64 = len(running)
        if end == 0:
            self.run_keys = keys
            return
        pos: i64 = 0
        child: i64 = 1
        while child < end:
            right = child + 1
            if right < end:
                c = 3 * child
                r = 3 * right
                # not heap[child] < heap[right]: the right one
                if not (
                    keys[c] < keys[r]
                    or (
                        keys[c] == keys[r]
                        and (
                            keys[c + 1] < keys[r + 1]
                            or (keys[c + 1] == keys[r + 1] and keys[c + 2] < keys[r + 2])
                        )
                    )
                ):
                    child = right
            c = 3 * child
            q = 3 * pos
            keys[q] = keys[c]
            keys[q + 1] = keys[c + 1]
            keys[q + 2] = keys[c + 2]
            running[pos] = running[child]
            pos = child
            child = 2 * pos + 1
        self.run_keys = keys
        self._run_settle(pos, finish, rid, gen, last)

    def _run_settle(self, pos: i64, finish: i64, rid: i64, gen: i64, seq: Sequence) -> None:
        """Put the entry in the hole at ``pos``, moving it toward the root while it comes
        first (heapq._siftdown)."""
        running = self.running
        keys = self.run_keys
        while pos > 0:  # heapq._siftdown(heap, 0, pos)
            parent = (pos - 1) >> 1
            p = 3 * parent
            parent_finish = keys[p]
            parent_id = keys[p + 1]
            if finish < parent_finish or (
                finish == parent_finish
                and (rid < parent_id or (rid == parent_id and gen < keys[p + 2]))
            ):
                q = 3 * pos
                keys[q] = parent_finish
                keys[q + 1] = parent_id
                keys[q + 2] = keys[p + 2]
                running[pos] = running[parent]
                pos = parent
                continue
            break
        q = 3 * pos
        keys[q] = finish
        keys[q + 1] = rid
        keys[q + 2] = gen
        running[pos] = seq

    def _leave_batch(self, seq: Sequence) -> None:
        self.batch -= 1
        self.ctx_base -= seq.ctx_at_admit - seq.admit_step
        seq.generated += self.steps - seq.admit_step

    def _preempt_newest(self) -> None:
        """Out of KV blocks: the newest sequence gives its blocks back and is recomputed later."""
        while self.admit_order:
            seq = self.admit_order.pop()
            if seq.state == 2:
                break
        else:
            return
        self._leave_batch(seq)
        seq.state = 0
        seq.preemptions += 1
        seq.prefill_total = seq.input_tokens + seq.generated  # recompute prompt and output so far
        seq.prefill_done = 0
        seq.cached = 0
        self.waiting.appendleft(seq)

    def _finish(self, seq: Sequence, now: float) -> None:
        seq.state = 3
        inputs = seq.input_tokens
        outputs = seq.output_tokens
        if self.no_evict:
            self.committed -= inputs + outputs + BLOCK_TOKENS  # whole_kv_need
        self.outstanding_tokens -= inputs + outputs
        # the client sees the first token and the end after the time outside the engine
        overhead = self._request_overhead
        out = self.last_out = now + overhead
        self.finished_some = True
        self.records.append(
            (
                seq.id,
                seq.arrival,
                seq.first_token + overhead,
                out,
                self.index,
                seq.klass,
                inputs,
                outputs,
                seq.cached,
                seq.preemptions,
            )
        )

    # --- static batching -------------------------------------------------------------------

    def _plan_static(self) -> None:
        """Collect up to ``static_max_batch`` requests or wait ``static_max_wait_s`` for the
        first one; prefill them together, decode until the longest ends (padded), return all."""
        cfg = self.config
        if not self.waiting:
            self.activity, self.activity_end = _IDLE, math.inf
            return
        oldest = self.waiting[0].arrival
        if len(self.waiting) < cfg.static_max_batch and self.clock < oldest + cfg.static_max_wait_s:
            self.activity = _ITER  # wait for the window to close (or more arrivals)
            self.activity_busy = False
            self.activity_start = self.clock
            self.activity_end = oldest + cfg.static_max_wait_s
            self.iteration_work = []
            self.iteration_decodes = False
            return
        # padded to the longest prompt and output, the whole batch must fit the KV cache
        batch: list[Sequence] = []
        longest_prompt = longest_output = 0
        while self.waiting and len(batch) < cfg.static_max_batch:
            seq = self.waiting[0]
            prompt = max(longest_prompt, seq.input_tokens)
            output = max(longest_output, seq.output_tokens)
            if batch and (len(batch) + 1) * (prompt + output) > cfg.kv_capacity_tokens:
                break
            batch.append(self.waiting.popleft())
            longest_prompt, longest_output = prompt, output
        b = len(batch)
        times = self.times
        prefill = times.iteration(
            b * longest_prompt, b * longest_prompt * (longest_prompt + 1) / 2, 0, b
        )
        ctx = b * (longest_prompt + 1)
        k = longest_output - 1
        decode = k * times.decode_base(b) + times.gamma * (k * ctx + b * k * (k - 1) / 2)
        first = self.clock + prefill
        end = first + decode
        for seq in batch:
            seq.first_token = first
            seq.generated = seq.output_tokens
        self.static_batch = batch
        self.activity = _ITER
        self.activity_busy = True
        self.activity_start = self.clock
        self.activity_end = end
        self.iteration_work = []
        self.iteration_decodes = False


def whole_kv_need(input_tokens: Any, output_tokens: Any) -> Any:
    """KV tokens a request holds at its last decode step, in the simulator's accounting: its
    prompt and output plus the partly filled block every decoding sequence is allowed (block
    rounding, conservatively). The most a replica ever serves (see :meth:`Replica.submit`),
    and what a no-evict admission reserves. Ints or arrays; the replica's hot paths write it
    out in line."""
    return input_tokens + output_tokens + BLOCK_TOKENS


# --- the fleet's indexes over its replicas ------------------------------------------------


class IndexedHeap:
    """A min-heap of replica indexes by (key, index), in unboxed arrays (librt's ``vec``): the
    keys and indexes slot by slot, and each replica's slot (-1: not in the heap), so a key
    moves in place in O(log replicas) with no stale entries. Four children to a node: half the
    depth of a binary heap, and a node's children side by side. A sift reads a few contiguous
    cache lines, where a heap of replica objects read one line of every replica it passed
    (docs/benchmarks.md)."""

    def __init__(self) -> None:
        self.key: vec[float] = vec[float]()
        self.who: vec[i64] = vec[i64]()
        self.slot: vec[i64] = vec[i64]()  # by replica index

    def track(self) -> None:
        """Make room for the next replica index (not in the heap)."""
        self.slot = append(self.slot, -1)

    def key_of(self, index: i64) -> float:
        """Replica ``index``'s key (math.inf: not in the heap)."""
        slot = self.slot[index]
        return self.key[slot] if slot >= 0 else math.inf

    def set(self, index: i64, key: float) -> None:
        """Put replica ``index`` in the heap at ``key``, or move it there."""
        slot = self.slot[index]
        if slot < 0:
            self.key = append(self.key, key)
            self.who = append(self.who, index)
            self._up(index, key, len(self.key) - 1)
            return
        before = self.key[slot]
        if key < before:
            self._up(index, key, slot)
        elif key > before:
            self._down(index, key, slot)

    def remove(self, index: i64) -> None:
        """Take replica ``index`` out of the heap; the last entry fills its slot."""
        slot = self.slot[index]
        self.slot[index] = -1
        self.key, key = pop(self.key)
        self.who, last = pop(self.who)
        if slot < len(self.key):
            self._up(last, key, slot)
            self._down(last, key, self.slot[last])

    def rebuild(self, entries: list[tuple[float, int]]) -> None:
        """Hold exactly ``entries`` of (key, replica index), replacing what it held."""
        slots = self.slot
        for index in self.who:
            slots[index] = -1
        entries.sort()  # a sorted array is a heap
        self.key = vec[float]([key for key, _ in entries])
        self.who = vec[i64]([index for _, index in entries])
        for slot, (_, index) in enumerate(entries):
            slots[index] = slot

    def _up(self, index: i64, key: float, slot: i64) -> None:
        """Put ``index`` at ``key`` in ``slot``, then move it toward the root while it
        comes first."""
        keys = self.key
        who = self.who
        slots = self.slot
        while slot > 0:
            parent = (slot - 1) // HEAP_ARITY
            parent_key = keys[parent]
            parent_index = who[parent]
            if parent_key < key or (parent_key == key and parent_index < index):
                break
            keys[slot] = parent_key
            who[slot] = parent_index
            slots[parent_index] = slot
            slot = parent
        keys[slot] = key
        who[slot] = index
        slots[index] = slot

    def _down(self, index: i64, key: float, slot: i64) -> None:
        """Put ``index`` at ``key`` in ``slot``, then move it away from the root while a child
        comes first."""
        keys = self.key
        who = self.who
        slots = self.slot
        n = len(keys)
        while True:
            child = HEAP_ARITY * slot + 1
            if child >= n:
                break
            # the first of the children (their indexes read only on a tie of keys)
            child_key = keys[child]
            end = child + HEAP_ARITY if child + HEAP_ARITY < n else n
            other = child + 1
            while other < end:
                other_key = keys[other]
                if other_key < child_key or (other_key == child_key and who[other] < who[child]):
                    child = other
                    child_key = other_key
                other += 1
            child_index = who[child]
            if key < child_key or (key == child_key and index < child_index):
                break
            # the moves are written out, not a method: a call per move costs 1,100
            # instructions a request at 1,000 replicas (cachegrind)
            keys[slot] = child_key
            who[slot] = child_index
            slots[child_index] = slot
            slot = child
        keys[slot] = key
        who[slot] = index
        slots[index] = slot


class Dispatch:
    """Which replicas a fleet must advance, and which one the least-loaded router picks: a heap
    of the replicas with a wake-up due (each one's next iteration or segment end), by that time,
    and a heap of the replicas the router may pick, by (load, index); both
    :class:`IndexedHeap`. They live beside the replica loop to be compiled with it.

    The fleet keeps the rest (purchases, readiness, events); replicas carry the flags the
    fleet sets (``routable``, ``draining``). Replicas due by the same time advance in index
    order, and ties in load go to the lowest index, as a loop over every replica would have
    it."""

    def __init__(self, load: str) -> None:
        """``load``: what least-loaded routing compares, "outstanding" (requests) or
        "outstanding_tokens"; "" when the router does not ask."""
        self.replicas: list[Replica] = []  # every replica ever added, by index
        self.records: list[Finished] = []  # what every replica finished, in order
        self.wakes = IndexedHeap()  # the busy replicas by next event
        self.loads = IndexedHeap()  # the routable replicas by load (when tracked)
        # the wake-up heap's top (math.inf: empty), kept by every public method that moves
        # it: the fleet's arrival loop reads it once per request
        self.soonest = math.inf
        self.routable: list[Replica] = []
        self.by_tokens = load == "outstanding_tokens"
        self.least_loaded_routing = load != ""
        self.track_loads = False  # least-loaded routing over more than one replica
        self.wakeups = 0  # replicas advanced because an event of theirs was due (benchmarks)
        self.drained: list[Replica] = []  # draining replicas left empty (take_drained)
        self._turns = 0  # requests the round-robin router has routed
        self._due: vec[i64] = vec[i64]()  # advance_due's scratch, one slot per replica
        self._below: vec[i64] = vec[i64]()

    def add(self, replica: Replica) -> None:
        """A replica just launched (its index is the number added before it)."""
        assert replica.index == len(self.replicas)
        replica.records = self.records
        self.replicas.append(replica)
        self.wakes.track()
        self.loads.track()
        self._due = append(self._due, 0)
        self._below = append(self._below, 0)

    def next_wake(self) -> float:
        """The earliest next event of any replica (math.inf when all are idle)."""
        return self.soonest

    def _moved_top(self) -> None:
        keys = self.wakes.key
        self.soonest = keys[0] if len(keys) else math.inf

    def advance_due(self, t: float) -> None:
        """Run every replica's iterations that end by ``t``; only replicas with an event due
        are touched, in index order. Draining replicas this leaves empty wait in ``drained``
        for the fleet to retire (:meth:`take_drained`)."""
        wakes = self.wakes
        wake_at = wakes.key
        n = len(wake_at)
        if n == 0 or wake_at[0] > t:
            return
        # the due replicas are the top of the heap (a due replica's parent is due too), found
        # depth first into scratch arrays (one slot per replica: no allocation per call)
        wake_who = wakes.who
        due = self._due
        below = self._below
        due[0] = wake_who[0]
        count: i64 = 1
        pending: i64 = 0
        slot: i64 = 0
        while True:
            child = HEAP_ARITY * slot + 1
            end = child + HEAP_ARITY if child + HEAP_ARITY < n else n
            while child < end:
                if wake_at[child] <= t:
                    below[pending] = child
                    pending += 1
                child += 1
            if pending == 0:
                break
            pending -= 1
            slot = below[pending]
            due[count] = wake_who[slot]
            count += 1
        if count > 1:
            _sort_prefix(due, count)
        self.wakeups += count
        replicas = self.replicas
        for k in range(count):
            index = due[k]
            replica = replicas[index]
            replica.advance(t)
            # each key moves in place: later than t (the due iteration ended), or out
            if replica.activity != _IDLE:
                wakes.set(index, replica.activity_end)
            else:
                wakes.remove(index)
            if replica.finished_some:
                # the load moves only when a request left (advancing otherwise moves requests
                # between the replica's queues)
                replica.finished_some = False
                if replica.draining and replica.outstanding == 0:
                    self.drained.append(replica)
                elif replica.routable and self.track_loads:
                    self._queue_load(replica)
        self._moved_top()

    def advance_before(self, limit: float) -> float:
        """:meth:`advance_due` at every wake-up before ``limit``, one after another, as a
        loop over them would (nothing else may happen before ``limit``: no arrival, fleet
        event or sample). Returns the last wake-up's time (-math.inf: none)."""
        last = -math.inf
        while self.soonest < limit:
            last = self.soonest
            self.advance_due(last)
        return last

    def serve(
        self,
        arrivals: list[float],
        inputs: list[int],
        outputs: list[int],
        classes: list[int],
        blocks: list[tuple[int, ...]] | None,
        first: i64,
        start: i64,
        stop: float,
        next_sample: float,
        chunk_rows: i64,
        round_robin: bool,
    ) -> i64:
        """The fleet's arrival loop while nothing but routing happens: from ``start``, each
        arrival advances the replicas due by its time, becomes a Sequence (its id ``first`` +
        its position) and goes to the router's pick among :attr:`routable` (which must not be
        empty): the only one, the next in turn, or the least loaded. Returns the position of the
        first arrival not routed; it stops before an arrival at or after ``stop`` (a fleet
        event, or the routable replicas change), after an advance that left a draining replica
        empty or ``chunk_rows`` rows, and after routing one at or after ``next_sample`` or that
        filled ``chunk_rows``: what the fleet does then, in the order it would have."""
        records = self.records
        routable = self.routable
        choices: i64 = len(routable)
        replicas = self.replicas
        k = start
        count: i64 = len(arrivals)
        while k < count:
            t = arrivals[k]
            if t >= stop:
                return k
            if self.soonest <= t:
                self.advance_due(t)
                if self.drained or len(records) >= chunk_rows:
                    return k
            rid = first + k
            seq = Sequence(
                rid, t, inputs[k], outputs[k], classes[k], blocks[rid] if blocks else None
            )
            if choices == 1:
                replica = routable[0]
            elif round_robin:
                replica = routable[self.take_turn(choices)]
            else:
                replica = replicas[self.least_loaded()]
            self.submit(replica, seq, t)
            k += 1
            if len(records) >= chunk_rows or t >= next_sample:
                return k
        return k

    def take_drained(self) -> list[Replica]:
        """The draining replicas left empty since the last call, in the order they emptied
        (out of both heaps)."""
        drained = self.drained
        self.drained = []
        return drained

    def submit(self, replica: Replica, seq: Sequence, now: float) -> None:
        """Hand ``seq`` to ``replica`` (advanced to ``now``); queue its new wake-up and load."""
        replica.submit(seq, now)
        self.set_wake(replica, replica.activity_end if replica.activity != _IDLE else math.inf)
        replica.finished_some = False
        if replica.routable and self.track_loads:
            self._queue_load(replica)

    def set_wake(self, replica: Replica, wake: float) -> None:
        """Queue the replica's next event at ``wake`` (math.inf: none, out of the heap)."""
        index: i64 = replica.index
        if wake != math.inf:
            self.wakes.set(index, wake)
        elif self.wakes.slot[index] >= 0:
            self.wakes.remove(index)
        else:
            return
        self._moved_top()

    def set_routable(self, replicas: list[Replica]) -> None:
        """The replicas the router may pick from now on (the fleet's candidates)."""
        for replica in self.routable:
            replica.routable = False
        for replica in replicas:
            replica.routable = True
        self.routable = replicas
        # one candidate needs no index: the router takes it without asking
        self.track_loads = self.least_loaded_routing and len(replicas) > 1
        by_tokens = self.by_tokens
        self.loads.rebuild(
            [
                (
                    float(replica.outstanding_tokens if by_tokens else replica.outstanding),
                    replica.index,
                )
                for replica in replicas
            ]
            if self.track_loads
            else []
        )

    def take_turn(self, choices: i64) -> i64:
        """The round-robin router's next pick among ``choices`` candidates (a position)."""
        self._turns += 1
        return self._turns % choices

    def least_loaded(self) -> int:
        """The index of the routable replica with the least load; the lowest among equals."""
        return self.loads.who[0]

    def _queue_load(self, replica: Replica) -> None:
        # loads are whole numbers: exact as floats up to 2**53
        load = float(replica.outstanding_tokens if self.by_tokens else replica.outstanding)
        self.loads.set(replica.index, load)


def _sort_prefix(values: vec[i64], count: i64) -> None:
    """Sort ``values[:count]`` in place: by insertion, as a handful are due at once; a long
    run (replicas due together after a quiet spell) through list.sort."""
    if count > 32:
        ordered = sorted(values[k] for k in range(count))
        for k in range(count):
            values[k] = ordered[k]
        return
    for k in range(1, count):
        value = values[k]
        j = k - 1
        while j >= 0 and values[j] > value:
            values[j + 1] = values[j]
            j -= 1
        values[j + 1] = value


#: Which build of this module runs: "compiled" (mypyc, see setup.py) or "pure Python".
IMPLEMENTATION = "pure Python"


def _compiled_twin(source: Path) -> ModuleType | None:
    """The mypyc build of this module's ``source``, or None: not built, turned off by
    ``PLANNER_PURE_PYTHON``, built from another version of it (an edit since the install), or
    the step formula it calls not compiled from the current ``planner/latency/step.py``."""
    native = compiled_twin("planner.simulate._engine_native", source, "simulator")
    if native is None:
        return None
    # the compiled copy calls the step formula's compiled copy: both stamps must hold
    from planner.latency import step

    if step.IMPLEMENTATION != "compiled":
        warnings.warn(
            "planner: the compiled step formula is not in use (planner/latency/step.py changed "
            "since the build); running the pure-Python simulator (reinstall planner to rebuild)",
            stacklevel=2,
        )
        return None
    return native


# Only the module under its own name switches: the compiled copy runs this too, under its own.
if __name__ == "planner.simulate.engine" and (_twin := _compiled_twin(Path(__file__))) is not None:
    # every name, so that what one build makes (a Sequence, an EngineConfig) meets its own kind
    globals().update({k: v for k, v in vars(_twin).items() if not k.startswith("__")})
    IMPLEMENTATION = "compiled"
