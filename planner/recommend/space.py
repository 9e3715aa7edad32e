"""The search space: every (instance type x precision x TP x max sequences x chunked prefill)
the price sheets and the catalog allow, and for each one left out, why."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from planner.common.text import closest, shown
from planner.errors import UsageError
from planner.latency.catalog import Catalog, UnsupportedError, load_catalog
from planner.latency.engines import deploy, get_engine
from planner.latency.explain import kv_cache_source
from planner.latency.model import Deployment
from planner.latency.profile import DEFAULT_ENGINE
from planner.recommend.inputs import Constraints
from planner.simulate.run import ServingSpec
from pricing.costs import Prices
from pricing.entries import gpu_matches
from pricing.model import PricePoint, PurchaseOption


@dataclass(frozen=True)
class Offer:
    """One instance type in one region with its prices by purchase option."""

    provider: str
    region: str
    instance_type: str
    gpu: str
    gpu_count: int
    points: tuple[PricePoint, ...]

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.region}/{self.instance_type}"

    def price(self, option: PurchaseOption) -> PricePoint | None:
        """The cheapest price of ``option`` (several payment kinds may exist)."""
        found = [p for p in self.points if p.purchase_option is option]
        return min(found, key=lambda p: p.usd_per_hour) if found else None

    @property
    def on_demand(self) -> float:
        point = self.price(PurchaseOption.ON_DEMAND)
        assert point is not None  # offers without one are never built
        return point.usd_per_hour

    def prices(
        self,
        commitment: PurchaseOption | None = None,
        savings_plan: PurchaseOption | None = None,
    ) -> Prices:
        return Prices.from_points(self.points, commitment=commitment, savings_plan=savings_plan)


@dataclass(frozen=True)
class Candidate:
    """One configuration to screen: what each replica runs, on which offer."""

    id: int
    offer: Offer
    model: str
    precision: str
    tp: int
    max_seqs: int
    chunked_prefill: bool
    quality_delta_pct: float
    alternative: bool = False  # an allowed alternative to the model asked for
    engine: str = DEFAULT_ENGINE
    kv_cache: str = "fp16"  # the KV-cache precision the engine runs (asked or its default)
    kv_cache_source: str = "--kv-cache"
    memory_utilization: float = 0.9
    ep: int = 1  # expert parallelism of a mixture of experts: 1 or tp

    @property
    def replicas_per_instance(self) -> int:
        return self.offer.gpu_count // self.tp

    def serving(self, constraints: Constraints) -> ServingSpec:
        return ServingSpec(
            gpu=self.offer.gpu,
            model=self.model,
            precision=self.precision,
            tp=self.tp,
            kv_cache=constraints.kv_cache,
            memory_utilization=constraints.memory_utilization,
            max_seqs=self.max_seqs,
            chunked_prefill=self.chunked_prefill,
            engine=constraints.engine,
            scheduler=constraints.scheduler,
            ep=self.ep,
        )

    def deployment_key(self) -> tuple[str, str, str, int, int]:
        return (self.offer.gpu, self.model, self.precision, self.tp, self.ep)

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "provider": self.offer.provider,
            "region": self.offer.region,
            "instance_type": self.offer.instance_type,
            "gpu": self.offer.gpu,
            "gpus_per_instance": self.offer.gpu_count,
            "model": self.model,
            "alternative_model": self.alternative,
            "precision": self.precision,
            "tp": self.tp,
            "ep": self.ep,
            "replicas_per_instance": self.replicas_per_instance,
            "max_seqs": self.max_seqs,
            "chunked_prefill": self.chunked_prefill,
            "engine": self.engine,
            "kv_cache": self.kv_cache,
            "kv_cache_source": self.kv_cache_source,
            "gpu_memory_utilization": self.memory_utilization,
            "quality_delta_pct": self.quality_delta_pct,
            "on_demand_usd_per_hour": self.offer.on_demand,
        }


@dataclass(frozen=True)
class Rejection:
    """A configuration (or a whole group of them) left out, and why."""

    stage: str  # space, screen, budget, verify, ranking
    reason: str  # short kind: does-not-fit, quality, misses-ttft, ...
    detail: str
    candidate: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "reason": self.reason,
            "detail": self.detail,
            **self.candidate,
        }


def offers(points: Iterable[PricePoint], constraints: Constraints) -> list[Offer]:
    """Instance types with an on-demand price, filtered by provider, region, GPU and type."""
    points = list(points)
    allowed = set(constraints.purchase_options)
    grouped: dict[tuple[str, str, str], list[PricePoint]] = defaultdict(list)
    for p in points:
        if p.purchase_option not in allowed or p.currency != "USD":
            continue
        if constraints.providers and p.provider.value not in constraints.providers:
            continue
        if constraints.regions and p.region not in constraints.regions:
            continue
        if constraints.instance_types and p.instance_type not in constraints.instance_types:
            continue
        if constraints.gpus and not any(gpu_matches(g, p.gpu_model) for g in constraints.gpus):
            continue
        grouped[(p.provider.value, p.region, p.instance_type)].append(p)
    found = []
    for (provider, region, instance), group in sorted(grouped.items()):
        if not any(p.purchase_option is PurchaseOption.ON_DEMAND for p in group):
            continue
        first = group[0]
        found.append(
            Offer(provider, region, instance, first.gpu_model, first.gpu_count, tuple(group))
        )
    if not found:
        known = sorted({p.instance_type for p in points})
        for name in constraints.instance_types:
            if name not in known:
                suggestions = closest(name, known).split(", ")[:8]
                raise UsageError(
                    f"--instance-type: no price has instance type {shown(name)}; the closest "
                    f"priced ones: {', '.join(suggestions) or 'none'}"
                )
        raise UsageError(
            "no instance type with an on-demand price matches the constraints (providers "
            f"{list(constraints.providers) or 'any'}, regions {list(constraints.regions) or 'any'}"
            f", GPUs {list(constraints.gpus) or 'any'}, instance types "
            f"{list(constraints.instance_types) or 'any'}, purchase options "
            f"{[o.value for o in constraints.purchase_options]}); see `planner prices list`"
        )
    return found


def enumerate_candidates(
    points: Iterable[PricePoint], constraints: Constraints, catalog: Catalog | None = None
) -> tuple[list[Candidate], list[Rejection]]:
    """Every configuration the constraints allow, and the ones ruled out before any latency is
    computed (precision the GPU lacks, quality, TP that does not divide, does not fit)."""
    catalog = catalog or load_catalog()
    models = [catalog.models.get(name).name for name in constraints.models]
    precisions = [catalog.precisions.get(name) for name in constraints.precisions]
    candidates: list[Candidate] = []
    rejected: list[Rejection] = []
    deployment_ok: dict[tuple[str, str, str, int, int], Deployment | str] = {}
    engine = get_engine(constraints.engine)
    found = offers(points, constraints)
    for offer in found:
        try:
            gpu = catalog.gpus.get(offer.gpu)
        except UsageError:
            rejected.append(
                Rejection(
                    "space",
                    "unknown-gpu",
                    f"{offer.gpu} is not in the GPU catalog",
                    {
                        "instance_type": offer.instance_type,
                        "provider": offer.provider,
                        "region": offer.region,
                    },
                )
            )
            continue
        for precision in precisions:
            # FP16 is the fallback for GPUs without BF16; elsewhere it duplicates BF16.
            if (
                precision.name == "fp16"
                and "bf16_tflops" in gpu.peak_tflops
                and any(p.name == "bf16" for p in precisions)
            ):
                continue
            for model in models:
                for tp in sorted(set(constraints.tp_degrees)):
                    if tp > constraints.max_tp or tp > offer.gpu_count or offer.gpu_count % tp:
                        continue
                    base = {
                        "provider": offer.provider,
                        "region": offer.region,
                        "instance_type": offer.instance_type,
                        "gpu": offer.gpu,
                        "model": model,
                        "precision": precision.name,
                        "tp": tp,
                    }
                    loss = -precision.quality_delta_pct
                    if constraints.max_quality_loss_pct is not None and (
                        loss > constraints.max_quality_loss_pct + 1e-12
                    ):
                        rejected.append(
                            Rejection(
                                "space",
                                "quality",
                                f"{precision.name} loses about {loss:g} accuracy points "
                                f"({precision.quality_source.split(': ')[0]}); at most "
                                f"{constraints.max_quality_loss_pct:g} allowed",
                                base,
                            )
                        )
                        continue
                    for max_seqs in sorted(set(constraints.max_seqs)):
                        # The engine's memory profile grows with max sequences (their logits).
                        key = (offer.gpu, model, precision.name, tp, max_seqs)
                        if key not in deployment_ok:
                            deployment_ok[key] = _fits(
                                gpu.name, model, precision.name, tp, max_seqs, constraints, catalog
                            )
                        deployment = deployment_ok[key]
                        if isinstance(deployment, str):
                            kind = "does-not-fit" if "does not fit" in deployment else "unsupported"
                            smallest = max_seqs == min(constraints.max_seqs)
                            where = base if smallest else {**base, "max_seqs": max_seqs}
                            rejected.append(Rejection("space", kind, deployment, where))
                            break  # more sequences need more memory: none of them fits
                        for chunked, ep in itertools.product(
                            constraints.chunked_prefill, _ep_degrees(deployment)
                        ):
                            candidates.append(
                                Candidate(
                                    id=len(candidates),
                                    offer=offer,
                                    model=model,
                                    alternative=model != constraints.model,
                                    precision=precision.name,
                                    tp=tp,
                                    max_seqs=max_seqs,
                                    chunked_prefill=chunked,
                                    quality_delta_pct=precision.quality_delta_pct,
                                    engine=engine.name,
                                    kv_cache=deployment.kv_cache,
                                    kv_cache_source=kv_cache_source(
                                        engine, constraints.kv_cache, deployment
                                    ),
                                    memory_utilization=deployment.memory_utilization,
                                    ep=ep,
                                )
                            )
    if not candidates:
        rejected.extend(_unusable_tp(found, constraints))
    return candidates, rejected


def _ep_degrees(deployment: Deployment) -> tuple[int, ...]:
    """The expert-parallel degrees worth searching: 1 (experts sharded over the TP group), and
    for a mixture of experts on several GPUs whose experts they divide, the TP degree too
    (experts whole on each GPU; the same memory, other time)."""
    m, tp = deployment.model, deployment.tp
    return (1, tp) if m.is_moe and tp > 1 and m.experts % tp == 0 else (1,)


def _unusable_tp(found: list[Offer], constraints: Constraints) -> list[Rejection]:
    """With nothing left to search, the tensor-parallel degrees no offer can run, and why (they
    are skipped silently otherwise: TP 8 on a one-GPU instance is no candidate to report)."""
    counts = sorted({o.gpu_count for o in found})
    degrees = sorted(set(constraints.tp_degrees))
    if any(tp <= constraints.max_tp and any(n % tp == 0 for n in counts) for tp in degrees):
        return []  # some degree runs: the other rejections say why nothing is left
    have = f"the {len(found)} matching instance type(s) have {', '.join(map(str, counts))} GPUs"
    rejections = []
    for tp in degrees:
        if tp > constraints.max_tp:
            detail = f"TP {tp} is above --max-tp {constraints.max_tp}"
        elif not any(count % tp == 0 for count in counts):
            detail = f"TP {tp} divides no instance's GPU count: {have}"
        else:
            continue
        rejections.append(Rejection("space", "tp-does-not-fit", detail, {"tp": tp}))
    return rejections


def _fits(
    gpu: str,
    model: str,
    precision: str,
    tp: int,
    max_seqs: int,
    constraints: Constraints,
    catalog: Catalog,
) -> Deployment | str:
    """The deployment, sized as the engine sizes it, when it is possible, else what is wrong
    with it."""
    try:
        deployment = deploy(
            constraints.engine,
            catalog.gpus.get(gpu),
            catalog.models.get(model),
            catalog.precisions.get(precision),
            tp,
            kv_cache=constraints.kv_cache,
            memory_utilization=constraints.memory_utilization,
            max_seqs=max_seqs,
        )
        _ = deployment.kv_capacity_tokens
    except UnsupportedError as exc:
        return str(exc)
    return deployment
