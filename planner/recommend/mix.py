"""A fleet of several pools: every model of the log, each request size on the GPU type that
serves it cheapest, verified by simulation, with the commitments across the pools.

For each model (its requests, its P99 targets):

1. **Single pool.** The model's candidates are screened once (:func:`engine.screen`) and the
   usual search (:func:`engine.recommend`) finds the cheapest verified one-pool fleet: the
   baseline, and the fallback.
2. **Size buckets.** The model's requests are split by input length at ``size_buckets``
   (buckets with under :data:`MIN_BUCKET_SHARE` of the requests join a neighbour).
3. **Shortlist and screen per bucket.** The cheapest :data:`SHORTLIST_PER_GPU` screened
   configurations of each GPU type are screened again on each bucket's lengths: one replica's
   requests/s within the targets, per bucket.
4. **Assignment (MILP).** Each bucket goes to one configuration, each configuration runs a
   whole number of instances at the peak, and the bucket's peak load takes ``load / capacity``
   of a replica (Mélange's formulation, Griggs et al. 2024), at the lowest monthly cost per
   peak instance (the configuration's screened fleet cost over its peak instances, so
   autoscaling and commitments are in the price). scipy's ``milp`` (HiGHS) solves it.
5. **Pools verified.** Each configuration with buckets is a pool; its requests (those of its
   buckets) are simulated on its fleet, escalated on a miss and tightened like a single fleet
   (:class:`~planner.recommend.sweep.Sweep`). The router sends a request to the pool of its
   model and size, so the pools share no request and simulating each pool on its own requests
   is simulating the fleet.
6. **Never dearer.** When the verified pools cost more than the single pool, or one fails,
   the model keeps its single pool: the mix never costs more than the best single-pool fleet.

The commitments: each pool's own plan (reserved / committed use per instance type, break-evens
per pool), and per cloud one savings plan across all its pools' instance families
(:func:`fleet_savings_plans`) where that is cheaper than the pools' plans apart.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from itertools import combinations
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.errors import UsageError
from planner.latency.profile import Profile
from planner.recommend import engine
from planner.recommend.inputs import POOL_SAMPLE, Demand, Request, Targets
from planner.recommend.plan import SAVINGS_PLANS
from planner.recommend.screen import Capacity, Lengths
from planner.recommend.sweep import Screened, StageProgress, Sweep, rank_key, size
from planner.recommend.tables import POOL_FIELDS
from planner.recommend.verify import Runner
from planner.workload.rates import HOUR_S, RateCurve
from pricing.costs import HOURS_PER_MONTH
from pricing.model import PricePoint

DEFAULT_SIZE_BUCKETS = (512, 2048, 8192)  # input tokens: short chat, mixed, long, documents
MIN_BUCKET_SHARE = 0.05  # a bucket with fewer of the model's requests joins a neighbour
SHORTLIST_PER_GPU = 3  # configurations per GPU type (cheapest screened) taken to the MILP
MILP_TIME_LIMIT_S = 10.0


@dataclass(frozen=True)
class ModelDemand:
    """One model's share of the fleet: its demand (its requests only) and its P99 targets;
    ``log_names``: the names the log gives it."""

    model: str
    demand: Demand
    targets: Targets
    log_names: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class FleetRequest:
    """A fleet search: the models (each with its demand and targets) and what they share: the
    constraints (their ``model`` is replaced per model), the search effort, the accuracy behind
    the confidence margin, and the input-token boundaries of the size buckets (empty: one
    bucket per model, no mixing of GPU types within a model)."""

    models: tuple[ModelDemand, ...]
    template: Request
    size_buckets: tuple[int, ...] = DEFAULT_SIZE_BUCKETS
    skipped_note: str | None = None  # requests of unmapped log names left out, when any
    source: str = ""  # where the demand comes from, e.g. "dataset multi"
    colocate: bool = True  # try small, quiet models' pools on one instance together

    def __post_init__(self) -> None:
        if not self.models:
            raise UsageError("a fleet search needs at least one model's requests")
        if list(self.size_buckets) != sorted(set(self.size_buckets)) or any(
            b < 1 for b in self.size_buckets
        ):
            raise UsageError(
                "--size-buckets: expected increasing input-token boundaries above 0 "
                f"(e.g. 512,2048,8192), got {','.join(map(str, self.size_buckets))}"
            )

    def request_for(self, model: ModelDemand) -> Request:
        """The one-model search request for ``model``: its single-pool search verifies the
        cheapest fleet of every GPU type and tightens those near the leader's cost (the
        baseline the mix must beat is then the cheapest single pool found), and skips the
        winner's load growth check, which a fleet does not show."""
        t = self.template
        return replace(
            t,
            demand=model.demand,
            targets=model.targets,
            constraints=replace(t.constraints, model=model.model, alternative_models=()),
            options=replace(
                t.options,
                compare_gpus=True,
                tighten_runners_up=True,
                growth_check=False,
                disaggregation="off",  # a fleet's pools are aggregated (issue 33: not yet mixed)
            ),
        )


@dataclass
class Pool:
    """A configuration serving some of one model's requests: those with input lengths in
    ``ranges`` (``[low, high)``, high None: no upper bound)."""

    name: str
    model: str
    screened: Screened
    request: Request
    ranges: list[tuple[int, int | None]]
    requests: float  # in the horizon
    row: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] | None = None
    # co-location: the pool whose instances also serve this one's requests (its own fleet is
    # then gone), or the pools this one hosts, with each model's share of the cost (its share
    # of the GPU's busy time) and what the co-location check found
    host: Pool | None = None
    guests: list[Pool] = field(default_factory=list)
    cost_shares: dict[str, float] = field(default_factory=dict)
    colocation: dict[str, Any] | None = None

    @property
    def monthly_usd(self) -> float:
        """What the pool's own instances cost (0 for a pool hosted on another's)."""
        return 0.0 if self.host is not None else self.screened.monthly_usd

    @property
    def attributed_usd(self) -> float:
        """The cost this pool's model bears: its own instances', or its share of its host's."""
        if self.host is not None:
            return self.host.screened.monthly_usd * self.host.cost_shares.get(self.model, 0.0)
        if self.guests:
            return self.screened.monthly_usd * self.cost_shares.get(self.model, 1.0)
        return self.screened.monthly_usd


@dataclass
class ModelPlan:
    """What one model gets: its pools, the single-pool fleet they are compared with, and why
    the mix was or was not taken."""

    model: str
    requests: float
    pools: list[Pool]
    single: engine.Recommendation
    single_usd: float | None
    how: str
    # the model's traffic bought by the token instead (its pools then empty): the API pool
    api_pool: dict[str, Any] | None = None

    @property
    def monthly_usd(self) -> float:
        """The model's cost: its pools', co-located ones by its share of the GPU time, or its
        API's."""
        if self.api_pool is not None:
            return float(self.api_pool["monthly_usd"])
        return sum(p.attributed_usd for p in self.pools)

    @property
    def planned(self) -> bool:
        """Whether the model is served: by pools of its own, or by an API."""
        return bool(self.pools) or self.api_pool is not None


# --- buckets ------------------------------------------------------------------------------------


def bucket_edges(inputs: NDArray[np.int64], boundaries: Sequence[int]) -> list[int]:
    """The boundaries kept: a bucket with under MIN_BUCKET_SHARE of the requests is merged into
    its neighbour (the boundary between them dropped)."""
    edges = list(boundaries)
    n = max(len(inputs), 1)
    while edges:
        counts = np.bincount(np.searchsorted(edges, inputs, side="right"), minlength=len(edges) + 1)
        small = [i for i, c in enumerate(counts) if c / n < MIN_BUCKET_SHARE]
        if not small:
            break
        i = small[0]
        # drop the boundary toward the smaller neighbour (the only one at the ends)
        if i == 0:
            edges.pop(0)
        elif i == len(edges):
            edges.pop()
        else:
            edges.pop(i if counts[i + 1] <= counts[i - 1] else i - 1)
    return edges


def bucket_ranges(edges: Sequence[int]) -> list[tuple[int, int | None]]:
    lows = [0, *edges]
    highs: list[int | None] = [*edges, None]
    return list(zip(lows, highs, strict=True))


def sub_demand(demand: Demand, keep: NDArray[np.bool_], source: str) -> Demand:
    """The part of ``demand`` whose requests ``keep`` marks (over the replayed requests when it
    replays, else over its length pool, the hourly rates scaled by the share kept), over the
    same hours."""
    if demand.replay is not None:
        workload = demand.replay.subset(keep)
        hours = demand.hours
        counts = np.bincount(
            np.minimum((workload.arrival_s // HOUR_S).astype(np.intp), hours - 1), minlength=hours
        )
        return Demand(
            RateCurve(demand.curve.start, counts.astype(np.float64)),
            workload.input_tokens,
            np.maximum(workload.output_tokens, 1),
            source,
            workload,
        )
    share = float(keep.mean())
    return Demand(
        RateCurve(demand.curve.start, demand.curve.requests_per_hour * share),
        demand.inputs[keep],
        demand.outputs[keep],
        source,
    )


def _bucket_of(demand: Demand, edges: Sequence[int]) -> NDArray[np.intp]:
    inputs = demand.replay.input_tokens if demand.replay is not None else demand.inputs
    return np.searchsorted(np.asarray(edges), inputs, side="right").astype(np.intp)


# --- the assignment -----------------------------------------------------------------------------


def shortlist(screened: Sequence[Screened], per_gpu: int = SHORTLIST_PER_GPU) -> list[Screened]:
    """The cheapest ``per_gpu`` screened configurations of each GPU type (one per deployment
    and engine setting: other regions and instance sizes of it are dearer copies)."""
    kept: list[Screened] = []
    taken: dict[str, int] = {}
    seen: set[tuple[Any, ...]] = set()
    for s in sorted(screened, key=rank_key):
        c = s.candidate
        key = (*c.deployment_key(), c.max_seqs, c.chunked_prefill)
        if key in seen or taken.get(c.offer.gpu, 0) >= per_gpu:
            continue
        seen.add(key)
        taken[c.offer.gpu] = taken.get(c.offer.gpu, 0) + 1
        kept.append(s)
    return kept


@dataclass(frozen=True)
class Assignment:
    """Which configuration (an index into the shortlist) takes each bucket, the peak
    instances of each used one, the objective, and the solver's time."""

    choice: tuple[int, ...]
    instances: dict[int, int]
    cost: float
    solve_s: float


def assign(
    peak_rps: Sequence[float],
    capacity: NDArray[np.float64],
    replicas_per_instance: Sequence[int],
    cost_per_instance: Sequence[float],
) -> Assignment | None:
    """The cheapest assignment of buckets (rows of ``capacity``, requests/s per replica; 0: the
    configuration cannot serve the bucket) to configurations (columns): each bucket to one,
    each configuration's instances a whole number covering its buckets' peak load. None when
    some bucket has no configuration or the solver finds no solution."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    buckets, configs = capacity.shape
    began = time.perf_counter()
    usable = capacity > 0
    if not usable.any(axis=1).all():
        return None
    # variables: x[b, c] (bucket b on configuration c; only usable pairs), then n[c]
    pairs = [(b, c) for b in range(buckets) for c in range(configs) if usable[b, c]]
    nx = len(pairs)
    cost = np.concatenate([np.zeros(nx), np.asarray(cost_per_instance, dtype=np.float64)])
    rows, lower, upper = [], [], []
    for b in range(buckets):  # each bucket on exactly one configuration
        row = np.zeros(nx + configs)
        for k, (bb, _) in enumerate(pairs):
            if bb == b:
                row[k] = 1.0
        rows.append(row)
        lower.append(1.0)
        upper.append(1.0)
    for c in range(configs):  # the buckets' peak replicas fit the configuration's instances
        row = np.zeros(nx + configs)
        for k, (b, cc) in enumerate(pairs):
            if cc == c:
                row[k] = peak_rps[b] / capacity[b, c] / replicas_per_instance[c]
        row[nx + c] = -1.0
        rows.append(row)
        lower.append(-np.inf)
        upper.append(0.0)
    result = milp(
        cost,
        constraints=LinearConstraint(np.array(rows), lower, upper),
        integrality=np.ones(nx + configs),
        bounds=Bounds(np.zeros(nx + configs), np.concatenate([np.ones(nx), np.full(configs, 1e6)])),
        options={"time_limit": MILP_TIME_LIMIT_S},
    )
    solve_s = time.perf_counter() - began
    if result.x is None:
        return None
    x = np.round(result.x).astype(np.int64)
    choice = [-1] * buckets
    for k, (b, c) in enumerate(pairs):
        if x[k]:
            choice[b] = c
    if min(choice) < 0:
        return None
    instances = {c: int(x[nx + c]) for c in set(choice)}
    return Assignment(tuple(choice), instances, float(result.fun), solve_s)


# --- the search ---------------------------------------------------------------------------------


@dataclass
class FleetRecommendation:
    models: list[ModelPlan]
    hourly_start: list[float]
    stats: dict[str, Any]
    notes: list[str]
    request: FleetRequest

    @property
    def pools(self) -> list[Pool]:
        return [p for m in self.models for p in m.pools]

    def to_dict(self) -> dict[str, Any]:
        return fleet_result(self)


def recommend_fleet(
    request: FleetRequest,
    prices: list[PricePoint],
    profile_for: engine.ProfileFor | None = None,
    *,
    progress: StageProgress | None = None,
    runner: Runner | None = None,
    api_prices: Sequence[Any] | None = None,
) -> FleetRecommendation:
    """The cheapest verified fleet of pools for every model of ``request``; with
    ``api_prices``, a model whose traffic a per-token API bills for less than its pools cost
    (or every model, ``--api only``) is bought by the token instead."""
    began = time.perf_counter()
    options = request.template.options
    own = runner is None
    active = runner if runner is not None else Runner(options.workers, options.dask)
    stats: dict[str, Any] = {"milp_s": 0.0, "screen_s": 0.0, "models": {}}
    plans: list[ModelPlan] = []
    profiles: dict[str, Profile] = {}
    try:
        for md in request.models:
            sub = request.request_for(md)
            t0 = time.perf_counter()
            screening = engine.screen(sub, prices, profile_for, progress)
            stats["screen_s"] += time.perf_counter() - t0
            profiles.update(screening.profiles)
            single = engine.recommend(
                sub,
                prices,
                profile_for,
                progress=progress,
                runner=active,
                screening=screening,
                api_prices=api_prices,
            )
            plan = _model_plan(md, sub, screening, single, request, active, progress, stats)
            plans.append(_api_if_cheaper(plan, sub.options.api))
    finally:
        if own:
            active.close()
    if request.colocate:
        t0 = time.perf_counter()
        stats["colocation"] = colocate_quiet_pools(plans, request, profiles)
        stats["colocation_s"] = time.perf_counter() - t0
    curve = request.models[0].demand.curve
    hourly_start = [curve.start.timestamp() + h * HOUR_S for h in range(curve.hours)]
    stats["wall_s"] = time.perf_counter() - began
    notes = [request.skipped_note] if request.skipped_note else []
    return FleetRecommendation(plans, hourly_start, stats, notes, request)


def _model_plan(
    md: ModelDemand,
    sub: Request,
    screening: engine.Screening,
    single: engine.Recommendation,
    request: FleetRequest,
    runner: Runner,
    progress: StageProgress | None,
    stats: dict[str, Any],
) -> ModelPlan:
    requests = float(md.demand.curve.total_requests)
    single_usd = single.winner["monthly_usd"] if single.winner else None
    mixed, how = _mixed_pools(md, sub, screening, request, runner, progress, stats)
    if single.winner is None and not mixed:
        return ModelPlan(md.model, requests, [], single, None, "no fleet meets the targets")
    mixed_usd = sum(p.monthly_usd for p in mixed) if mixed else math.inf
    if single_usd is not None and mixed_usd >= single_usd - 0.005:
        return ModelPlan(
            md.model,
            requests,
            [_single_pool(md, sub, single)],
            single,
            single_usd,
            how
            if not mixed
            else f"the mixed pools cost ${mixed_usd:,.0f}/month once verified, "
            f"not less than one pool (${single_usd:,.0f}): one pool kept",
        )
    return ModelPlan(md.model, requests, mixed, single, single_usd, how)


def _api_if_cheaper(plan: ModelPlan, mode: str) -> ModelPlan:
    """The model's traffic to its cheapest API offer when that bills less than its pools cost
    (mixed pools included, before co-location), or always with ``only``: its pools leave the
    fleet. The single-pool search's comparison (``single.api``) has the offer and the month."""
    api = plan.single.api
    if not api or api.get("offer") is None:
        return plan
    usd = float(api["api_monthly_usd"])
    if mode == "only" or not plan.pools or usd < plan.monthly_usd:
        from planner.recommend.api import Tokens, api_pool
        from pricing.api import TokenPrice

        offer = {k: v for k, v in api["offer"].items() if k != "monthly_usd"}
        month = api["month"]
        tokens = Tokens(month["requests"], month["input_tokens"], month["output_tokens"])
        own = f"${plan.monthly_usd:,.0f}" if plan.pools else "no pool meeting the targets"
        plan.how = (
            f"bought by the token: {offer['provider']} {offer['offer']} bills ${usd:,.0f}/month "
            f"against {own} self-hosted" + (" (--api only)" if mode == "only" else "")
        )
        plan.api_pool = api_pool(TokenPrice(**offer), tokens, usd)
        plan.pools = []
    return plan


def _single_pool(md: ModelDemand, sub: Request, single: engine.Recommendation) -> Pool:
    """The single-pool recommendation as a pool (its row, plan and hourly fleet)."""
    winner = single.winner
    assert winner is not None
    pool = Pool(
        md.model,
        md.model,
        _screened_of(single),
        sub,
        [(0, None)],
        float(md.demand.curve.total_requests),
    )
    pool.row, pool.plan = winner, single.plan
    return pool


def _screened_of(single: engine.Recommendation) -> Screened:
    screened = single.winner_screened
    assert screened is not None
    return screened


def _mixed_pools(
    md: ModelDemand,
    sub: Request,
    screening: engine.Screening,
    request: FleetRequest,
    runner: Runner,
    progress: StageProgress | None,
    stats: dict[str, Any],
) -> tuple[list[Pool], str]:
    """The model's requests split by size over the shortlisted configurations, each pool
    verified; ([], why) when there is nothing to mix or a pool fails."""
    demand = md.demand
    inputs = demand.replay.input_tokens if demand.replay is not None else demand.inputs
    edges = bucket_edges(inputs, request.size_buckets)
    if not edges:
        return [], "one size bucket: nothing to mix"
    short = shortlist(screening.screened)
    if len(short) < 2:
        return [], "one configuration passed the screen: nothing to mix"
    which = _bucket_of(demand, edges)
    ranges = bucket_ranges(edges)
    parts = [
        sub_demand(demand, which == b, f"{md.model} {_range(r)}") for b, r in enumerate(ranges)
    ]
    seed = sub.options.seed
    margin = sub.margin
    capacity = np.zeros((len(parts), len(short)))
    for b, part in enumerate(parts):
        lengths = Lengths.sample(part.inputs, part.outputs, POOL_SAMPLE, seed)
        for c, s in enumerate(short):
            cand = s.candidate
            slo = margin.shrink(md.targets.strictest(), cand.offer.gpu)
            profile = screening.profiles[cand.offer.gpu]
            capacity[b, c] = engine.capacity_of(cand, sub.constraints, profile, lengths, slo).rps
    peaks = [float(p.curve.requests_per_hour.max()) / HOUR_S for p in parts]
    per_instance = [max(float(s.instances.max()), 1.0) for s in short]
    cost = [s.monthly_usd / n for s, n in zip(short, per_instance, strict=True)]
    found = assign(peaks, capacity, [s.candidate.replicas_per_instance for s in short], cost)
    stats["milp_s"] += found.solve_s if found else 0.0
    stats["models"][md.model] = {
        "size_buckets": [_range(r) for r in ranges],
        "shortlisted": len(short),
        "milp": None if found is None else {"objective_usd": found.cost, "solve_s": found.solve_s},
    }
    if found is None or len(set(found.choice)) < 2:
        return [], "the cheapest assignment puts every size on one configuration"
    pools: list[Pool] = []
    for number, c in enumerate(dict.fromkeys(found.choice), start=1):
        buckets = [b for b, chosen in enumerate(found.choice) if chosen == c]
        keep = np.isin(which, buckets)
        pool_ranges = [ranges[b] for b in buckets]
        name = f"{md.model}/{number}"
        pool_demand = sub_demand(demand, keep, f"{md.model} {', '.join(map(_range, pool_ranges))}")
        pool_request = replace(sub, demand=pool_demand)
        verified = _verified_pool(short[c], pool_request, screening, runner, progress)
        if verified is None:
            return [], (
                f"a mixed pool ({short[c].candidate.offer.instance_type} for "
                f"{', '.join(map(_range, pool_ranges))} tokens) missed its targets in "
                "simulation: one pool kept"
            )
        pool = Pool(
            name, md.model, verified, pool_request, pool_ranges, pool_demand.curve.total_requests
        )
        pool.row = engine.ranked_row(verified, pool_request, engine.monthly_tokens(pool_request))
        pool.plan = engine.winner_plan(verified, pool_request, screening.spot)
        pools.append(pool)
    return pools, "mixed: each request size on its cheapest configuration"


def _verified_pool(
    chosen: Screened,
    request: Request,
    screening: engine.Screening,
    runner: Runner,
    progress: StageProgress | None,
) -> Screened | None:
    """The configuration sized for the pool's requests, simulated (escalated on a miss) and
    tightened; None when it cannot meet the targets."""
    cand = chosen.candidate
    demand = request.demand
    lengths = Lengths.sample(demand.inputs, demand.outputs, POOL_SAMPLE, request.options.seed)
    slo = request.margin.shrink(request.targets.strictest(), cand.offer.gpu)
    capacity: Capacity = engine.capacity_of(
        cand, request.constraints, screening.profiles[cand.offer.gpu], lengths, slo
    )
    if capacity.rps <= 0:
        return None
    sweep = Sweep(request, screening.spot, screening.profiles, runner, progress)
    s = size(cand, capacity, capacity.rps, request, screening.spot)
    sweep.verify([s])
    if not s.passed:
        return None
    if request.options.tighten_steps:
        sweep.tighten(s)
    return s


def _range(r: tuple[int, int | None]) -> str:
    low, high = r
    return f"{low:,}+" if high is None else f"{low:,}-{high - 1:,}"


# --- co-location -------------------------------------------------------------------------------


def colocate_quiet_pools(
    plans: Sequence[ModelPlan], request: FleetRequest, profiles: Mapping[str, Profile]
) -> list[dict[str, Any]]:
    """Quiet pools (one instance of one replica in every hour) of different models, two at a
    time, tried on one of their instances: each model's engine process with its share of the
    memory (:func:`~planner.recommend.colocate.colocation_fit`), their peak hours simulated
    together with the interference (:func:`~planner.simulate.colocate.simulate_colocated`).
    A pair that fits and meets both models' targets is kept, the dearer saving first: the
    guest's pool is dropped and its requests go to the host's instance. Returns every pair
    tried, with why it was or was not kept."""
    quiet = [
        p
        for m in plans
        for p in m.pools
        if p.host is None
        and not p.guests
        and int(p.screened.instances.max()) == 1
        and int(p.screened.instances.min()) == 1
        and p.screened.candidate.replicas_per_instance == 1
    ]
    tried: list[dict[str, Any]] = []
    options: list[tuple[float, Pool, Pool, dict[str, Any]]] = []
    for a, b in combinations(quiet, 2):
        if a.model == b.model:
            continue
        for host, guest in ((a, b), (b, a)):
            found = _try_colocation(host, guest, request, profiles)
            tried.append(found)
            if found["kept"]:
                options.append((guest.monthly_usd, host, guest, found))
    taken: set[int] = set()
    for saving, host, guest, found in sorted(options, key=lambda o: -o[0]):
        if id(host) in taken or id(guest) in taken:
            found["kept"], found["why"] = False, "a pool of the pair joined another first"
            continue
        taken.update((id(host), id(guest)))
        guest.host = host
        host.guests.append(guest)
        host.name = f"{host.name}+{guest.name}"
        host.cost_shares = found["cost_shares"]
        host.colocation = found
        found["saving_usd"] = saving
    return tried


def _try_colocation(
    host: Pool, guest: Pool, request: FleetRequest, profiles: Mapping[str, Profile]
) -> dict[str, Any]:
    from planner.latency.model import LatencyModel
    from planner.recommend.colocate import colocation_fit
    from planner.simulate.colocate import ColocatedMember, simulate_colocated
    from planner.simulate.engine import RooflineStepTimes

    hc, gc = host.screened.candidate, guest.screened.candidate
    constraints = request.template.constraints
    found: dict[str, Any] = {
        "host": host.name,
        "guest": guest.name,
        "instance_type": hc.offer.instance_type,
        "gpu": hc.offer.gpu,
        "tp": hc.tp,
        "kept": False,
    }
    # each model's own precision first, then the smaller allowed ones (quantized weights are
    # what lets two models share a GPU)
    fit = None
    for host_precision, guest_precision in _precision_pairs(hc.precision, gc.precision, request):
        fit = colocation_fit(
            constraints.engine,
            hc.offer.gpu,
            hc.tp,
            [
                (host.model, host_precision, hc.max_seqs),
                (guest.model, guest_precision, gc.max_seqs),
            ],
            memory_utilization=constraints.memory_utilization,
            kv_cache=constraints.kv_cache,
        )
        if fit.fits:
            break
    assert fit is not None
    found["memory"] = fit.to_dict()
    if not fit.fits:
        found["why"] = f"does not fit: {fit.reason}"
        return found
    found["precisions"] = {
        host.model: fit.members[0].precision,
        guest.model: fit.members[1].precision,
    }
    # the hour the two pools' requests peak together, replayed for each
    rates = (
        host.request.demand.curve.requests_per_hour + guest.request.demand.curve.requests_per_hour
    )
    first = int(np.argmax(rates))
    seed = request.template.options.seed
    members = []
    for pool, cand, sized in ((host, hc, fit.members[0]), (guest, gc, fit.members[1])):
        # the step times and engine settings of the process alone, its KV cache the share's
        serving = replace(
            cand.serving(constraints), gpu=hc.offer.gpu, tp=hc.tp, precision=sized.precision
        )
        deployment = serving.deployment()
        times = RooflineStepTimes(
            LatencyModel(deployment, profiles[hc.offer.gpu]), deployment.max_seqs
        )
        config = serving.engine_config(deployment)
        kv = sized.kv_capacity_tokens
        config = replace(
            config,
            kv_capacity_tokens=kv,
            prefix_cache_tokens=kv if config.prefix_cache_tokens else 0,
        )
        workload = pool.request.demand.window(first, first + 1, seed + first)
        if len(workload) == 0:
            found["why"] = f"{pool.name} has no requests in the hour simulated"
            return found
        members.append(
            ColocatedMember(
                pool.model,
                config,
                times,
                workload,
                pool.request.targets.slos,
            )
        )
    result = simulate_colocated(members, replicas=1, seed=seed)
    found["simulated"] = result.to_dict()
    misses = []
    for pool, outcome in zip((host, guest), result.members, strict=True):
        slo = pool.request.targets.strictest()
        for metric, target in (("ttft", slo.ttft_s), ("tpot", slo.tpot_s), ("e2e", slo.e2e_s)):
            value = outcome.p99.get(metric)
            if target is not None and value is not None and value > target:
                misses.append(
                    f"{pool.model} P99 {metric.upper()} {value * 1e3:,.0f} ms > "
                    f"{target * 1e3:,.0f} ms"
                )
        if outcome.rejected:
            misses.append(f"{pool.model}: {outcome.rejected:,} requests refused")
    if not result.converged:
        misses.append("the interference did not settle (the GPU is overloaded)")
    if misses:
        found["why"] = "misses its targets together: " + "; ".join(misses)
        return found
    busy = [max(o.busy_fraction, 1e-9) for o in result.members]
    found["cost_shares"] = {
        host.model: busy[0] / sum(busy),
        guest.model: busy[1] / sum(busy),
    }
    found["kept"] = True
    found["why"] = "fits, and both meet their targets together in the peak hour"
    return found


SMALLER_PRECISIONS = ("fp8", "int8", "int4-awq")  # tried, in this order, for co-location


def _precision_pairs(host: str, guest: str, request: FleetRequest) -> list[tuple[str, str]]:
    """The (host, guest) precisions to try: as the pools run, then both at each smaller
    precision the constraints allow (never a larger one than a pool runs)."""
    from planner.latency.catalog import load_catalog

    constraints = request.template.constraints
    most_loss = constraints.max_quality_loss_pct
    precisions = load_catalog().precisions
    pairs = [(host, guest)]
    for index, smaller in enumerate(SMALLER_PRECISIONS):
        loss = -precisions.get(smaller).quality_delta_pct
        if smaller not in constraints.precisions or (most_loss is not None and loss > most_loss):
            continue
        at_most = SMALLER_PRECISIONS[index:]  # a pool already this small or smaller keeps its own
        pair = (
            host if host in at_most else smaller,
            guest if guest in at_most else smaller,
        )
        if pair not in pairs:
            pairs.append(pair)
    return pairs


# --- commitments across pools -------------------------------------------------------------------


def fleet_savings_plans(pools: Sequence[Pool]) -> list[dict[str, Any]]:
    """Per cloud and savings-plan term: one $/hour commitment covering every pool of that cloud
    whose instance type the plan covers, against the pools' own plans apart.

    Each hour the pools use ``S(h)`` dollars at the plan's rates (``O(h)`` on demand); a
    commitment of ``X`` $/h costs ``X`` plus the uncovered usage at on-demand prices,
    ``max(S - X, 0) * O / S`` (the uncovered share spread over the pools in proportion). The
    cost is piecewise linear and convex in ``X``, so the best ``X`` is one of the ``S(h)``."""
    plans: list[dict[str, Any]] = []
    by_cloud: dict[str, list[Pool]] = {}
    for p in pools:
        by_cloud.setdefault(p.screened.candidate.offer.provider, []).append(p)
    for provider, members in sorted(by_cloud.items()):
        for option in SAVINGS_PLANS:
            covered = [p for p in members if p.screened.candidate.offer.price(option) is not None]
            if len(covered) < 2:
                continue
            hours = len(covered[0].screened.instances)
            sp = np.zeros(hours)
            od = np.zeros(hours)
            for p in covered:
                offer = p.screened.candidate.offer
                point = offer.price(option)
                assert point is not None
                n = p.screened.instances.astype(np.float64)
                sp += n * point.usd_per_hour
                od += n * offer.on_demand
            ratio = np.divide(od, sp, out=np.ones(hours), where=sp > 0)

            def total(
                level: float, sp: NDArray[np.float64] = sp, ratio: NDArray[np.float64] = ratio
            ) -> float:
                return float((level + np.maximum(sp - level, 0.0) * ratio).sum())

            levels = np.unique(np.concatenate([[0.0], sp]))
            costs = [total(x) for x in levels]
            best = int(np.argmin(costs))
            monthly = costs[best] / hours * HOURS_PER_MONTH
            apart = sum(p.monthly_usd for p in covered)
            plans.append(
                {
                    "provider": provider,
                    "option": option.value,
                    "usd_per_hour": float(levels[best]),
                    "pools": [p.name for p in covered],
                    "monthly_usd": monthly,
                    "pools_apart_monthly_usd": apart,
                    "saving_usd": apart - monthly,
                    "on_demand_monthly_usd": float(od.sum()) / hours * HOURS_PER_MONTH,
                    "utilization": float(
                        np.minimum(sp, levels[best]).sum() / (levels[best] * hours)
                    )
                    if levels[best] > 0
                    else None,
                }
            )
    return plans


# --- the result ---------------------------------------------------------------------------------


def pool_dict(pool: Pool, total_requests: float, single_usd: float | None) -> dict[str, Any]:
    s = pool.screened
    row = pool.row
    low = min(r[0] for r in pool.ranges)
    highs = [r[1] for r in pool.ranges]
    high = None if any(h is None for h in highs) else max(h for h in highs if h is not None)
    guests = pool.guests
    requests = pool.requests + sum(g.requests for g in guests)
    hourly = pool.request.demand.curve.requests_per_hour + sum(
        (g.request.demand.curve.requests_per_hour for g in guests),
        np.zeros(pool.request.demand.hours),
    )
    shared = _colocated_p99(pool)
    return {
        "pool": pool.name,
        "kind": "instance",  # GPU instances (a per-token API pool would be "api")
        "models": [pool.model, *(g.model for g in guests)],
        **{k: row.get(k) for k in POOL_FIELDS},
        # co-located, the host runs the precision the pair fitted at
        "precision": ((pool.colocation or {}).get("precisions") or {}).get(
            pool.model, row.get("precision")
        ),
        **shared,
        "input_tokens_range": [low, high],
        "input_tokens_ranges": [list(r) for r in pool.ranges],
        "requests": requests,
        "share_of_requests": requests / total_requests if total_requests else 0.0,
        "instances_peak": int(s.instances.max()),
        "instances_mean": float(s.instances.mean()),
        "replicas_peak": int(s.replicas.max()),
        "monthly_usd": pool.monthly_usd,
        "hourly_instances": s.instances.astype(float).tolist(),
        # what a report needs to project the pool on its own (its load, replicas and tokens)
        "hourly_requests": hourly.astype(float).tolist(),
        "hourly_replicas": s.replicas.astype(float).tolist(),
        "mean_input_tokens": _mean_tokens(pool, "inputs"),
        "mean_output_tokens": _mean_tokens(pool, "outputs"),
        "plan": pool.plan,
        "targets": pool.request.targets.to_dict(),
        "single_pool_monthly_usd": single_usd,
        "row": row,
        # co-located: each model's precision and share of the cost (of the GPU time), and the
        # check behind it
        "precisions": (pool.colocation or {}).get("precisions") or {pool.model: row["precision"]},
        "cost_shares": pool.cost_shares or {pool.model: 1.0},
        "colocation": pool.colocation,
    }


def _best_fleet_saving(plans: Sequence[Mapping[str, Any]]) -> float:
    """The most a savings plan across pools saves, per cloud (one plan per cloud), summed."""
    best: dict[str, float] = {}
    for plan in plans:
        best[plan["provider"]] = max(best.get(plan["provider"], 0.0), plan["saving_usd"])
    return sum(best.values())


def _colocated_p99(pool: Pool) -> dict[str, float | None]:
    """A co-located pool's P99s: the worst of its models' in the simulation together."""
    simulated = (pool.colocation or {}).get("simulated")
    if not simulated:
        return {}
    worst: dict[str, float | None] = {}
    for metric in ("ttft", "tpot", "e2e"):
        values = [m["p99"][metric] for m in simulated["members"] if m["p99"][metric] is not None]
        worst[f"p99_{metric}_s"] = max(values) if values else None
    return worst


def _mean_tokens(pool: Pool, which: str) -> float:
    """Mean tokens of the pool's requests, its guests' included, weighted by their counts."""
    parts = [pool, *pool.guests]
    total = sum(p.requests for p in parts)
    means = [float(getattr(p.request.demand, which).mean()) for p in parts]
    if total <= 0:
        return means[0]
    return sum(m * p.requests for m, p in zip(means, parts, strict=True)) / total


def fleet_result(rec: FleetRecommendation) -> dict[str, Any]:
    """The fleet as the result dictionary every shell reads (``winner.pools[]``...)."""
    total_requests = sum(m.requests for m in rec.models)
    served = [p for p in rec.pools if p.host is None]  # a co-located guest runs on its host
    singles = {m.model: m.single_usd for m in rec.models}
    pools = [pool_dict(p, total_requests, singles[p.model]) for p in served]
    per_model = []
    for m in rec.models:
        saving = m.single_usd - m.monthly_usd if m.single_usd is not None and m.planned else None
        per_model.append(
            {
                "model": m.model,
                "requests": m.requests,
                "share_of_requests": m.requests / total_requests if total_requests else 0.0,
                "pools": [(p.host or p).name for p in m.pools],
                "monthly_usd": m.monthly_usd if m.planned else None,
                "choice": "api" if m.api_pool is not None else "self-hosted",
                "api": m.single.api,
                "single_pool_monthly_usd": m.single_usd,
                "saving_vs_single_pool_usd": saving,
                "how": m.how
                + "".join(
                    f"; co-located on pool {p.host.name}'s instances" for p in m.pools if p.host
                ),
                "single_pool": m.single.winner,
            }
        )
    complete = all(m.planned for m in rec.models)
    demands = {md.model: md.demand for md in rec.request.models}
    api_pools = [
        {
            **m.api_pool,
            "pool": m.model,
            "models": [m.model],
            "share_of_requests": m.requests / total_requests if total_requests else 0.0,
            # as a GPU pool's: the reports follow the model's own hours
            "hourly_requests": demands[m.model].curve.requests_per_hour.astype(float).tolist(),
        }
        for m in rec.models
        if m.api_pool is not None
    ]
    monthly = sum(p["monthly_usd"] for p in pools) + sum(p["monthly_usd"] for p in api_pools)
    single_total = (
        sum(m.single_usd for m in rec.models if m.single_usd is not None) if complete else None
    )
    fleet_plans = fleet_savings_plans(served) if complete else []
    hours = len(rec.hourly_start)
    instances = np.zeros(hours)
    for p in served:
        instances += p.screened.instances
    winner = None
    if complete:
        winner = {
            "kind": "fleet",
            "pools": pools,
            # models bought by the token (kind "api"), beside the GPU pools
            "api_pools": api_pools,
            "models": per_model,
            "monthly_usd": monthly,
            "single_pool_monthly_usd": single_total,
            "saving_vs_single_pool_usd": (single_total - monthly) if single_total else 0.0,
            "peak_instances": int(instances.max()) if hours else 0,
            "verified": all(p["verified"] for p in pools),
            "fleet_savings_plans": fleet_plans,
            # the whole fleet bought the cheapest way: per cloud, one savings plan across its
            # pools where that beats the pools' own plans
            "fleet_plan_monthly_usd": monthly - _best_fleet_saving(fleet_plans),
        }
    requests = np.asarray(_sum_curves(rec))
    return {
        "kind": "fleet",
        "demand": {
            "source": rec.request.source,
            "hours": hours,
            "requests": float(requests.sum()),
            "peak_requests_per_s": float(requests.max()) / HOUR_S if hours else 0.0,
            "mean_requests_per_s": float(requests.mean()) / HOUR_S if hours else 0.0,
            "models": {m.model: m.demand.summary() for m in rec.request.models},
            "skipped": rec.request.skipped_note,
        },
        "request": {
            "models": [m.model for m in rec.request.models],
            "size_buckets": list(rec.request.size_buckets),
            "targets": {m.model: m.targets.to_dict() for m in rec.request.models},
            "constraints": rec.request.template.constraints.to_dict(),
            "options": rec.request.template.options.to_dict(),
        },
        "models": per_model,
        "winner": winner,
        "hourly": {
            "hour_start": rec.hourly_start,
            "requests": requests.tolist(),
            "instances": instances.tolist(),
            "instances_by_pool": {
                p.name: p.screened.instances.astype(float).tolist() for p in served
            },
        },
        "colocation": rec.stats.get("colocation", []),
        "stats": {k: v for k, v in rec.stats.items() if k != "colocation"},
        "notes": rec.notes,
    }


def _sum_curves(rec: FleetRecommendation) -> list[float]:
    total = np.zeros(len(rec.hourly_start))
    for m in rec.request.models:
        rates = m.demand.curve.requests_per_hour
        total[: len(rates)] += rates[: len(total)]
    return total.tolist()


def common_hours(models: Mapping[str, Demand]) -> dict[str, Demand]:
    """Every model's demand over the hours they all cover (the fleet is sized hour by hour):
    demand curves of forecasts fitted on the same log may start or end an hour apart. No
    common hour is an error naming each model's span."""
    starts = {m: d.curve.start for m, d in models.items()}
    first = max(starts.values())
    last = min(d.curve.start + timedelta(hours=d.hours) for d in models.values())
    hours = int((last - first) / timedelta(hours=1))
    if hours < 1:
        spans = "; ".join(
            f"{m}: {d.curve.start:%Y-%m-%d %H:%M} for {d.hours} h" for m, d in models.items()
        )
        raise UsageError(f"the models' demands share no hour, so no fleet serves them all: {spans}")
    aligned = {}
    for model, demand in models.items():
        offset = int((first - demand.curve.start) / timedelta(hours=1))
        if offset == 0 and demand.hours == hours:
            aligned[model] = demand
            continue
        rates = demand.curve.requests_per_hour[offset : offset + hours]
        aligned[model] = Demand(
            RateCurve(first, rates), demand.inputs, demand.outputs, demand.source
        )
    return aligned
