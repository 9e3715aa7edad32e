"""What a recommendation starts from: the demand, the latency targets and the constraints."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.errors import UsageError
from planner.latency.engines import scheduler_admission
from planner.latency.profile import DEFAULT_ENGINE
from planner.latency.uncertainty import NO_ACCURACY, Accuracy
from planner.recommend.margin import Margin
from planner.simulate.metrics import SLO
from planner.simulate.workload import DEFAULT_CLASS, Workload, synthetic
from planner.workload.rates import HOUR_S, RateCurve
from pricing.model import PurchaseOption

DEFAULT_PRECISIONS = ("bf16", "fp16", "fp8", "int8", "int4-awq")
DEFAULT_TP = (1, 2, 4, 8)
DEFAULT_MAX_SEQS = (64, 128, 256)
DEFAULT_PURCHASE = tuple(o for o in PurchaseOption if o is not PurchaseOption.SPOT)
POOL_SAMPLE = 4096  # token-length pairs kept for the screen's statistics


@dataclass(frozen=True, eq=False)
class Demand:
    """Requests per hour over the planning horizon, with the request lengths to expect.

    ``replay`` holds the real requests when the demand comes from an ingested dataset: the
    verification then replays them; otherwise it draws arrivals from the hourly rates and
    (input, output) pairs from ``inputs``/``outputs``.
    """

    curve: RateCurve
    inputs: NDArray[np.int64]
    outputs: NDArray[np.int64]
    source: str
    replay: Workload | None = None

    def __post_init__(self) -> None:
        if len(self.inputs) == 0 or len(self.inputs) != len(self.outputs):
            raise UsageError("the demand needs request lengths: (input, output) token pairs")
        if self.curve.total_requests <= 0:
            raise UsageError(f"the demand ({self.source}) has no requests in any hour")
        if self.curve.total_requests < 1:
            raise UsageError(
                f"the demand ({self.source}) adds up to {self.curve.total_requests:.2g} requests "
                "in all its hours, less than one: nothing to plan for (a smaller --load-scale "
                "than meant?)"
            )

    @classmethod
    def from_workload(cls, workload: Workload, source: str) -> Demand:
        """Hourly counts of a replayed workload (hours from its time zero)."""
        if len(workload) == 0:
            raise UsageError(f"{source}: no requests to plan for")
        hours = max(1, math.ceil(workload.duration_s / HOUR_S + 1e-9))
        counts = np.bincount((workload.arrival_s // HOUR_S).astype(np.intp), minlength=hours)
        return cls(
            curve=RateCurve(workload.start, counts[:hours].astype(np.float64)),
            inputs=workload.input_tokens,
            outputs=np.maximum(workload.output_tokens, 1),
            source=source,
            replay=workload,
        )

    @property
    def hours(self) -> int:
        return self.curve.hours

    @property
    def classes(self) -> tuple[str, ...]:
        return self.replay.classes if self.replay is not None else (DEFAULT_CLASS,)

    def scaled(self, factor: float) -> Demand:
        """The same demand with every hour's rate multiplied by ``factor`` (replay is dropped:
        scaled load is drawn from the rates)."""
        return Demand(
            RateCurve(self.curve.start, self.curve.requests_per_hour * factor),
            self.inputs,
            self.outputs,
            f"{self.source} x {factor:g}",
        )

    def window(self, first_hour: int, last_hour: int, seed: int) -> Workload:
        """The requests of hours ``[first_hour, last_hour)``: the real ones when replaying,
        else drawn from the rates (deterministic for ``seed``)."""
        if self.replay is not None:
            return self.replay.window(first_hour * HOUR_S, last_hour * HOUR_S)
        rates = self.curve.requests_per_hour[first_hour:last_hour]
        start = self.curve.start + timedelta(hours=first_hour)
        if rates.sum() <= 0:  # idle hours: nothing to serve
            empty = np.zeros(0, dtype=np.int64)
            return Workload(
                start, np.zeros(0), empty, empty, np.zeros(0, dtype=np.int16), self.classes
            )
        return synthetic(RateCurve(start, rates), self.inputs, self.outputs, seed=seed)

    def summary(self) -> dict[str, Any]:
        rates = self.curve.requests_per_hour
        return {
            "source": self.source,
            "start": self.curve.start.isoformat(),
            "hours": self.hours,
            "requests": float(rates.sum()),
            "mean_requests_per_s": float(rates.mean() / HOUR_S),
            "peak_requests_per_s": float(rates.max() / HOUR_S),
            "mean_input_tokens": float(self.inputs.mean()),
            "mean_output_tokens": float(self.outputs.mean()),
            "p99_input_tokens": float(np.quantile(self.inputs, 0.99)),
            "p99_output_tokens": float(np.quantile(self.outputs, 0.99)),
            "replayed": self.replay is not None,
        }


@dataclass(frozen=True)
class Targets:
    """P99 latency targets per request class, and the share of requests that must meet all
    of them (SLO attainment)."""

    slos: dict[str, SLO]
    min_attainment: float | None = None

    def __post_init__(self) -> None:
        if not any(
            t is not None for s in self.slos.values() for t in (s.ttft_s, s.tpot_s, s.e2e_s)
        ):
            raise UsageError(
                "give at least one latency target (--slo-ttft-p99, --slo-tpot-p99 or "
                "--slo-e2e-p99): without one every fleet of one replica would do"
            )
        if self.min_attainment is not None and not 0 < self.min_attainment <= 1:
            raise UsageError(
                f"minimum SLO attainment {self.min_attainment}: expected a share in (0, 1]"
            )

    def strictest(self) -> SLO:
        """The tightest target of each kind over all classes (what the screen plans for)."""

        def least(name: str) -> float | None:
            values = [getattr(s, name) for s in self.slos.values() if getattr(s, name)]
            return min(values) if values else None

        return SLO(least("ttft_s"), least("tpot_s"), least("e2e_s"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "slos": {name: asdict(slo) for name, slo in self.slos.items()},
            "min_attainment": self.min_attainment,
            "quantile": 0.99,
        }


@dataclass(frozen=True)
class Constraints:
    """The space to search and the limits on it."""

    model: str
    alternative_models: tuple[str, ...] = ()  # other models the service may run instead
    providers: tuple[str, ...] = ()  # empty: any
    regions: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    instance_types: tuple[str, ...] = ()
    precisions: tuple[str, ...] = DEFAULT_PRECISIONS
    max_quality_loss_pct: float | None = None  # None: any precision in the list
    tp_degrees: tuple[int, ...] = DEFAULT_TP
    max_tp: int = 8
    max_seqs: tuple[int, ...] = DEFAULT_MAX_SEQS
    chunked_prefill: tuple[bool, ...] = (True, False)
    kv_cache: str | None = None  # None: the engine's default (TensorRT-LLM: FP8 under FP8)
    engine: str = DEFAULT_ENGINE  # sizes memory, KV cache and batches (engines.csv)
    memory_utilization: float | None = None  # None: the engine's memory fraction
    # TensorRT-LLM's capacity scheduler policy (--scheduler; None: the engine's admission)
    scheduler: str | None = None
    purchase_options: tuple[PurchaseOption, ...] = DEFAULT_PURCHASE
    max_spot_share: float = 0.0
    spot_classes: tuple[str, ...] = ()  # classes that tolerate interruption; empty: all
    spot_interruptions_per_hour: float = 0.05
    spot_replace_hours: float = 2 / 60
    budget_usd_per_month: float | None = None
    min_replicas: int = 1

    def __post_init__(self) -> None:
        if not self.precisions:
            raise UsageError("no precisions allowed: give at least one (--precision)")
        if self.scheduler is not None:
            scheduler_admission(self.engine, self.scheduler)  # TensorRT-LLM's names only
        if self.max_tp < 1 or any(tp < 1 for tp in self.tp_degrees):
            raise UsageError("tensor-parallel degrees must be at least 1")
        if not self.max_seqs or min(self.max_seqs) < 1:
            raise UsageError("max sequences per replica must be at least 1")
        if not 0 <= self.max_spot_share <= 1:
            raise UsageError(f"--max-spot-share {self.max_spot_share}: expected a share in [0, 1]")
        if self.max_spot_share > 0 and PurchaseOption.SPOT not in self.purchase_options:
            object.__setattr__(
                self, "purchase_options", (*self.purchase_options, PurchaseOption.SPOT)
            )
        if PurchaseOption.ON_DEMAND not in self.purchase_options:
            raise UsageError("on-demand must be allowed: it serves the load above commitments")
        if self.budget_usd_per_month is not None and self.budget_usd_per_month <= 0:
            raise UsageError("--budget must be a positive number of dollars a month")
        if self.memory_utilization is not None and not 0.1 <= self.memory_utilization <= 1.0:
            raise UsageError(
                f"--gpu-memory-utilization {self.memory_utilization:g}: expected a share of GPU "
                "memory from 0.1 to 1.0"
            )
        if self.min_replicas < 0:
            raise UsageError("--min-replicas cannot be negative")
        if self.max_quality_loss_pct is not None and self.max_quality_loss_pct < 0:
            raise UsageError(
                "--max-quality-loss is a loss in accuracy points: 0 or more (0: full precision)"
            )

    @property
    def models(self) -> tuple[str, ...]:
        """The model, then its allowed alternatives (without repeats)."""
        return tuple(dict.fromkeys((self.model, *self.alternative_models)))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["purchase_options"] = [o.value for o in self.purchase_options]
        return data


DISAGGREGATION = ("auto", "only", "off")


@dataclass(frozen=True)
class SearchOptions:
    """How hard to look: how many screened candidates to verify, over which hours."""

    verify_top: int = 20
    verify_hours: int = 1  # consecutive hours around the peak, simulated
    max_attempts: int = 3  # a candidate that misses is re-verified with more replicas
    escalation: float = 0.85  # capacity per replica kept at each new attempt
    tighten_steps: int = 3  # tries to serve the winner's load with fewer replicas
    tighten_margin: float = 0.1  # a tightened fleet must also pass its peak hour at +10% load
    growth_check: bool = True  # simulate the winner's peak hour at more load (+10% .. +100%)
    compare_gpus: bool = True  # also verify the cheapest candidate of every other GPU type
    # tighten the cheapest verified fleet of every other GPU type too (near the leader's
    # cost): a fleet's single pools, which the mix must beat, are then the cheapest found
    tighten_runners_up: bool = False
    # disaggregated prefill/decode fleets: "auto" searches them beside the aggregated ones
    # (simulating only pairs screened cheaper than the aggregated winner), "only" searches
    # nothing else, "off" none (planner.recommend.disagg)
    disaggregation: str = "auto"
    # per-token APIs beside self-hosting: "allow" (the cheaper, with the break-even), "only"
    # (the API; the self-hosted fleet still found, for the break-even), "never"
    # (planner.recommend.api)
    api: str = "allow"
    api_provider: str | None = None  # only this provider's API offers (the one used today)
    # the name the API offers are looked up by, when the self-hosted model stands in for
    # another (--substitute gpt-4o-mini=llama-3.1-8b); None: the self-hosted model's own
    api_model: str | None = None
    # plan base load self-hosted with peaks overflowing to the API (planner.recommend.overflow)
    api_overflow: bool = True
    # the API's latency in the overflow plan's simulation (medians; a `planner bench run`
    # against the API measures them): time to first token and per output token, seconds
    api_ttft_s: float = 0.5
    api_tpot_s: float = 0.012
    api_sigma: float = 0.3  # the log-normal spread of the API's latency around its medians
    # the stored bench run against the API its latency was measured by (--api-latency-from):
    # the medians and spread above are then that run's (None: the defaults or the flags)
    api_latency_run: str | None = None
    seed: int = 0
    workers: int = 0  # processes for the verification; 0: one per core
    dask: str | None = None  # scheduler address, or "local" for a LocalCluster
    engine: str = DEFAULT_ENGINE
    # the P99 targets hold at this confidence's upper bound (None: on the point estimates);
    # planner recommend defaults to 0.9 (planner.latency.uncertainty.DEFAULT_CONFIDENCE)
    confidence: float | None = None

    def __post_init__(self) -> None:
        if self.confidence is not None and not 0 < self.confidence < 1:
            raise UsageError(
                f"--confidence {self.confidence:g}: expected a level above 0 and below 1 "
                "(0.9), or 0/none for no margin"
            )
        if self.verify_top < 1:
            raise UsageError("--verify-top must be at least 1: only verified fleets are named")
        if self.verify_hours < 1:
            raise UsageError("--verify-hours must be at least 1")
        if self.tighten_steps < 0:
            raise UsageError("--tighten-steps cannot be negative")
        if not 0 <= self.tighten_margin <= 1:
            raise UsageError(
                f"--tighten-margin {self.tighten_margin}: expected a share of load in [0, 1]"
            )
        if self.disaggregation not in DISAGGREGATION:
            raise UsageError(
                f"--disaggregation {self.disaggregation!r}: expected one of "
                f"{', '.join(DISAGGREGATION)}"
            )
        if self.api not in ("allow", "never", "only"):
            raise UsageError(f"--api {self.api!r}: expected one of allow, never, only")
        if not (0 < self.api_ttft_s <= 600 and 0 < self.api_tpot_s <= 10 and self.api_sigma >= 0):
            raise UsageError(
                f"--api-ttft {self.api_ttft_s:g} s, --api-tpot {self.api_tpot_s:g} s: expected "
                "positive seconds (at most 600 s to the first token, 10 s per token)"
            )
        if self.max_attempts < 1 or not 0 < self.escalation < 1:
            raise UsageError("attempts must be >= 1 and the escalation factor in (0, 1)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Request:
    """Everything ``recommend()`` needs besides prices and calibration profiles."""

    demand: Demand
    targets: Targets
    constraints: Constraints
    options: SearchOptions = field(default_factory=SearchOptions)
    accuracy: Accuracy = NO_ACCURACY  # the held-out errors the confidence margin comes from

    @property
    def margin(self) -> Margin:
        return Margin(self.options.confidence, self.constraints.engine, self.accuracy)
