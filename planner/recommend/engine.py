"""``recommend()``: candidates -> screen -> verify the cheapest -> the plan behind the winner."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.latency.catalog import load_catalog
from planner.latency.model import LatencyModel
from planner.latency.profile import Profile, choose_profile, load_bundled_profiles
from planner.recommend.inputs import POOL_SAMPLE, Request
from planner.recommend.plan import PlanChoice, cheapest, commitment_plan, purchase_plans, spot_share
from planner.recommend.screen import (
    METRICS,
    Capacity,
    Lengths,
    hourly_instances,
    hourly_replicas,
    replica_capacity,
)
from planner.recommend.space import Candidate, Rejection, enumerate_candidates
from planner.recommend.verify import Runner, Verification, VerifyTask, Window
from planner.simulate.workload import HOUR_S, Workload
from pricing.model import PricePoint

ProfileFor = Callable[[str], Profile]
Progress = Callable[[str, int, int], None]
SENSITIVITY = {"-20%": 0.8, "+20%": 1.2}
ENGINE_VARIANTS_PER_GROUP = 2
GROWTH_FACTORS = (1.1, 1.2, 1.3, 1.5, 1.75, 2.0)  # peak-hour load multiples tried on the winner
TIGHTEN_FACTOR = 1.05  # load per replica added at each tightening step (then rounded up)


@dataclass
class Screened:
    """A candidate that passed the screen: its capacity, fleet and cheapest plan."""

    candidate: Candidate
    capacity: Capacity
    rps_per_replica: float  # capacity used for sizing (lowered on failed verifications)
    replicas: NDArray[np.int64]  # replicas per hour (whole instances' worth)
    instances: NDArray[np.int64]
    plan: PlanChoice
    verifications: list[Verification] = field(default_factory=list)
    tightened: int = 0  # steps the winner's fleet shrank below the screen's size, verified
    load_headroom: dict[str, Any] | None = None  # growth the winner's fleet absorbs as it is

    @property
    def monthly_usd(self) -> float:
        return self.plan.monthly_usd

    @property
    def verified(self) -> Verification | None:
        return self.verifications[-1] if self.verifications else None


@dataclass
class Recommendation:
    request: dict[str, Any]
    demand: dict[str, Any]
    winner: dict[str, Any] | None
    plan: dict[str, Any] | None
    ranked: list[dict[str, Any]]
    pareto: list[int]
    rejected: list[dict[str, Any]]
    stats: dict[str, Any]
    hourly: dict[str, list[float]]  # hour starts, demand and the winner's fleet
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "demand": self.demand,
            "winner": self.winner,
            "plan": self.plan,
            "ranked": self.ranked,
            "pareto": self.pareto,
            "rejected": self.rejected,
            "rejected_by_reason": dict(Counter(r["reason"] for r in self.rejected)),
            "stats": self.stats,
            "hourly": self.hourly,
            "notes": self.notes,
        }


def bundled_profile_for(engine: str) -> ProfileFor:
    profiles = load_bundled_profiles()
    return lambda gpu: choose_profile(profiles, gpu, engine)


def recommend(
    request: Request,
    prices: list[PricePoint],
    profile_for: ProfileFor | None = None,
    *,
    progress: Progress | None = None,
    runner: Runner | None = None,
) -> Recommendation:
    """The cheapest verified configuration for ``request``; see the package's docstring."""
    began = time.perf_counter()
    options, constraints, targets, demand = (
        request.options,
        request.constraints,
        request.targets,
        request.demand,
    )
    profile_for = profile_for or bundled_profile_for(options.engine)
    catalog = load_catalog()
    candidates, rejected = enumerate_candidates(prices, constraints, catalog)
    lengths = Lengths.sample(demand.inputs, demand.outputs, POOL_SAMPLE, options.seed)
    slo = targets.strictest()
    spot = spot_share(demand, constraints)
    rates = demand.curve.requests_per_hour

    # --- screen --------------------------------------------------------------------------
    capacities: dict[tuple[Any, ...], Capacity] = {}
    profiles: dict[str, Profile] = {}
    screened: list[Screened] = []
    for done, cand in enumerate(candidates, start=1):
        gpu = cand.offer.gpu
        if gpu not in profiles:
            profiles[gpu] = profile_for(gpu)
        key = (*cand.deployment_key(), cand.max_seqs, cand.chunked_prefill)
        if key not in capacities:
            serving = cand.serving(constraints)
            model = LatencyModel(serving.deployment(), profiles[gpu])
            capacities[key] = replica_capacity(
                model, lengths, slo, max_seqs=cand.max_seqs, chunked_prefill=cand.chunked_prefill
            )
        capacity = capacities[key]
        if capacity.rps <= 0:
            miss = capacity.miss(slo)
            detail = (
                f"predicted P99 {miss[0].upper()} {miss[1] * 1e3:,.0f} ms at the lightest load, "
                f"target {miss[2] * 1e3:,.0f} ms"
                if miss
                else "no batch size fits the KV cache with room to spare"
            )
            rejected.append(
                Rejection("screen", f"misses-{capacity.binding}", detail, cand.describe())
            )
        else:
            screened.append(_size(cand, capacity, capacity.rps, rates, request, spot))
        if progress and (done % 100 == 0 or done == len(candidates)):
            progress("screen", done, len(candidates))
    budget = constraints.budget_usd_per_month
    affordable = []
    for s in screened:
        if budget is not None and s.monthly_usd > budget:
            rejected.append(
                Rejection(
                    "budget",
                    "over-budget",
                    f"${s.monthly_usd:,.0f}/month at the screened size, budget ${budget:,.0f}",
                    s.candidate.describe(),
                )
            )
        else:
            affordable.append(s)
    affordable.sort(key=_rank_key)

    screen_s = time.perf_counter() - began

    # --- verify: the cheapest first; more while an unverified one could still be cheaper ----
    peak = _peak_window(rates, options.verify_hours)
    workloads: dict[Window, Workload] = {}
    verified: list[Screened] = []
    remaining = list(affordable)
    queue = _next_batch(remaining, options.verify_top, math.inf)
    rounds = 0
    compared = False
    simulated: dict[tuple[Any, ...], Verification] = {}
    verify_s = 0.0
    own_runner = runner is None
    active_runner = runner or Runner(options.workers, options.dask)
    if own_runner:
        active_runner.__enter__()
    try:
        while queue:
            rounds += 1
            pending = queue
            for attempt in range(options.max_attempts):
                if not pending:
                    break
                tasks = [_task(s, attempt + 1, peak, request, profiles, workloads) for s in pending]
                stage = f"verify (round {rounds}, attempt {attempt + 1})"
                report = partial(progress, stage) if progress else None
                if report:
                    report(0, len(tasks))
                results = _run_once_each(active_runner, tasks, workloads, simulated, report)
                failed = []
                for s, result in zip(pending, results, strict=True):
                    s.verifications.append(result)
                    if not result.passed:
                        failed.append(s)
                if attempt + 1 < options.max_attempts:
                    for s in failed:
                        _escalate(s, options.escalation, rates, request, spot)
                pending = failed
            verified.extend(queue)
            best = min(
                (s.monthly_usd for s in verified if s.verified and s.verified.passed),
                default=math.inf,
            )
            room = options.verify_top * 3 - len(verified)
            queue = _next_batch(remaining, min(options.verify_top, room), best)
            if not queue and options.compare_gpus and not compared:
                # the best of every other GPU type, so the table answers "what would X cost"
                compared = True
                queue = _best_per_gpu(remaining, {s.candidate.offer.gpu for s in verified})
        verify_s = time.perf_counter() - began - screen_s
        leaders = [s for s in verified if s.verified and s.verified.passed]
        if leaders and options.tighten_steps:
            # the screen is conservative (docs/recommender.md): try the winner on fewer replicas
            leader = min(leaders, key=_rank_key)
            for _ in range(options.tighten_steps):
                smaller = _resized(leader, TIGHTEN_FACTOR, rates, request, spot)
                if smaller is None:
                    break
                task = _task(
                    smaller, len(leader.verifications) + 1, peak, request, profiles, workloads
                )
                # a smaller fleet must also keep a margin: its peak hour at more load
                tasks = [task]
                if options.tighten_margin > 0:
                    margin = 1 + options.tighten_margin
                    tasks.append(replace(task, windows=(peak,), load_scale=margin, attempt=0))
                stage = f"tighten (step {leader.tightened + 1})"
                report = partial(progress, stage) if progress else None
                results = _run_once_each(active_runner, tasks, workloads, simulated, report)
                if not all(r.passed for r in results):
                    break
                _adopt(leader, smaller)
                leader.verifications.append(results[0])
                leader.tightened += 1
        if leaders and options.growth_check:
            leader = min(leaders, key=_rank_key)
            leader.load_headroom = _load_headroom(
                leader, peak, request, profiles, workloads, simulated, active_runner, progress
            )
    finally:
        if own_runner:
            active_runner.__exit__(None, None, None)

    passed = []
    for s in sorted((s for s in verified if s.verified and s.verified.passed), key=_rank_key):
        if budget is not None and s.monthly_usd > budget:  # grown by failed verifications
            rejected.append(
                Rejection(
                    "budget",
                    "over-budget",
                    f"${s.monthly_usd:,.0f}/month once verified ({len(s.verifications)} "
                    f"simulations grew the fleet), budget ${budget:,.0f}",
                    s.candidate.describe(),
                )
            )
        else:
            passed.append(s)
    for s in verified:
        if s.verified and not s.verified.passed:
            misses = "; ".join(m.describe() for m in s.verified.misses)
            rejected.append(
                Rejection(
                    "verify",
                    "misses-" + s.verified.misses[0].metric,
                    f"simulated with {int(s.replicas.max())} replicas at peak after "
                    f"{len(s.verifications)} attempt(s): {misses}",
                    s.candidate.describe(),
                )
            )
    winner = passed[0] if passed else None
    for s in remaining:
        rejected.append(
            Rejection(
                "ranking",
                "costlier",
                f"screened at ${s.monthly_usd:,.0f}/month"
                + (f", above the recommended ${winner.monthly_usd:,.0f}" if winner else "")
                + "; not simulated",
                s.candidate.describe(),
            )
        )

    tokens = _monthly_tokens(request)
    ranked = [_row(s, request, tokens) for s in passed]
    ranked += [_row(s, request, tokens) for s in verified if not (s.verified and s.verified.passed)]
    plan = None
    notes: list[str] = []
    hourly: dict[str, list[float]] = {
        "hour_start": [(demand.curve.start.timestamp() + h * HOUR_S) for h in range(demand.hours)],
        "requests": rates.tolist(),
    }
    if winner is not None:
        resize = {
            label: hourly_instances(
                hourly_replicas(rates * factor, winner.rps_per_replica, constraints.min_replicas),
                winner.candidate.replicas_per_instance,
            )
            for label, factor in SENSITIVITY.items()
        }
        plan = commitment_plan(winner.instances, winner.candidate.offer, constraints, spot, resize)
        hourly["replicas"] = winner.replicas.astype(float).tolist()
        hourly["instances"] = winner.instances.astype(float).tolist()
    elif screened and not affordable and budget is not None:
        cheapest_screened = min(s.monthly_usd for s in screened)
        notes.append(
            f"every configuration that passed the screen costs more than the ${budget:,.0f} "
            f"budget (the cheapest ${cheapest_screened:,.0f}/month); nothing was simulated"
        )
    else:
        notes.append(
            "no configuration met the targets in simulation: loosen a target, allow more GPU "
            "types or precisions, or raise --max-attempts"
        )
    if demand.hours < 24 * 7:
        notes.append(
            f"the demand covers {demand.hours} hours; commitments (1-3 years) are sized as if "
            "this pattern repeated for the whole term"
        )
    return Recommendation(
        request={
            "targets": targets.to_dict(),
            "constraints": constraints.to_dict(),
            "options": options.to_dict(),
            "spot_share": spot,
        },
        demand=demand.summary(),
        winner=ranked[0] if winner is not None else None,
        plan=plan,
        ranked=ranked,
        pareto=_pareto(passed),
        rejected=[r.to_dict() for r in rejected],
        stats={
            "candidates": len(candidates) + sum(1 for r in rejected if r.stage == "space"),
            "screened": len(candidates),
            "passed_screen": len(screened),
            "verified": len(verified),
            "verifications": sum(len(s.verifications) for s in verified),
            "simulations": len(simulated),
            "verify_rounds": rounds,
            "peak_window_hours": list(peak),
            "runner": active_runner.description,
            "screen_s": screen_s,
            "verify_s": verify_s,  # the candidates; the rest of wall_s tightens and checks growth
            "wall_s": time.perf_counter() - began,
        },
        hourly=hourly,
        notes=notes,
    )


def _rank_key(s: Screened) -> tuple[float, float, bool, int]:
    """Cheapest first; on a tie the smaller quality loss, the model asked for before its
    alternatives, then the catalog order."""
    c = s.candidate
    return (round(s.monthly_usd, 6), -c.quality_delta_pct, c.alternative, c.id)


def _next_batch(remaining: list[Screened], size: int, below: float) -> list[Screened]:
    """Take (from the cheapest) up to ``size`` candidates screened below ``below`` $/month,
    at most two engine settings per instance, precision and TP, so the alternatives differ."""
    batch: list[Screened] = []
    per_group: Counter[tuple[str, str, str, int]] = Counter()
    for s in list(remaining):
        if len(batch) >= size or s.monthly_usd >= below:
            break
        c = s.candidate
        group = (c.offer.label, c.model, c.precision, c.tp)
        if per_group[group] >= ENGINE_VARIANTS_PER_GROUP:
            continue
        per_group[group] += 1
        batch.append(s)
        remaining.remove(s)
    return batch


def _run_once_each(
    runner: Runner,
    tasks: list[VerifyTask],
    workloads: dict[Window, Workload],
    simulated: dict[tuple[Any, ...], Verification],
    report: Callable[[int, int], None] | None,
) -> list[Verification]:
    """Verifications of ``tasks``, simulating each distinct fleet once (``simulated`` keeps
    the results across rounds)."""
    fresh: dict[tuple[Any, ...], VerifyTask] = {}
    for task in tasks:
        key = task.simulation_key()
        if key not in simulated:
            fresh.setdefault(key, task)
    for key, result in zip(fresh, runner.run(list(fresh.values()), workloads, report), strict=True):
        simulated[key] = result
    return [
        replace(simulated[t.simulation_key()], candidate_id=t.candidate_id, attempt=t.attempt)
        for t in tasks
    ]


def _load_headroom(
    s: Screened,
    peak: Window,
    request: Request,
    profiles: dict[str, Profile],
    workloads: dict[Window, Workload],
    simulated: dict[tuple[Any, ...], Verification],
    runner: Runner,
    progress: Progress | None,
) -> dict[str, Any]:
    """How much more peak load the winner's fleet holds as it is: its peak window simulated at
    each of GROWTH_FACTORS times the load (all at once, on the runner)."""
    base = _task(s, len(s.verifications) + 1, peak, request, profiles, workloads)
    tasks = [
        replace(base, windows=(peak,), load_scale=factor, attempt=0) for factor in GROWTH_FACTORS
    ]
    report = partial(progress, "load growth check") if progress else None
    results = _run_once_each(runner, tasks, workloads, simulated, report)
    holds = 1.0
    for factor, result in zip(GROWTH_FACTORS, results, strict=True):
        if not result.passed:
            break
        holds = factor
    return {
        "holds_up_to": holds,
        "checked": [
            {
                "load": factor,
                "passed": result.passed,
                "p99": result.p99,
                "misses": [m.describe() for m in result.misses],
            }
            for factor, result in zip(GROWTH_FACTORS, results, strict=True)
        ],
    }


def _best_per_gpu(remaining: list[Screened], done: set[str]) -> list[Screened]:
    """The cheapest remaining candidate of each GPU type not in ``done``."""
    batch: list[Screened] = []
    for s in list(remaining):
        gpu = s.candidate.offer.gpu
        if gpu not in done:
            done = done | {gpu}
            batch.append(s)
            remaining.remove(s)
    return batch


def _size(
    cand: Candidate,
    capacity: Capacity,
    rps: float,
    rates: NDArray[np.float64],
    request: Request,
    spot: float,
) -> Screened:
    replicas_needed = hourly_replicas(rates, rps, request.constraints.min_replicas)
    instances = hourly_instances(replicas_needed, cand.replicas_per_instance)
    plan = cheapest(purchase_plans(instances, cand.offer, request.constraints, spot))
    # every paid GPU serves: an instance's spare replicas join the fleet
    return Screened(cand, capacity, rps, instances * cand.replicas_per_instance, instances, plan)


def _resized(
    s: Screened,
    factor: float,
    rates: NDArray[np.float64],
    request: Request,
    spot: float,
) -> Screened | None:
    """The candidate sized for ``factor`` times its load per replica (below 1: more
    replicas), stepping until the fleet changes in some hour; None when it cannot (the
    replica's throughput or the minimum fleet is reached)."""
    rps = s.rps_per_replica
    for _ in range(40):
        rps *= factor
        if rps > 2 * s.capacity.max_rps:  # far past the screen's throughput: give up
            return None
        other = _size(s.candidate, s.capacity, rps, rates, request, spot)
        changed = other.instances > s.instances if factor < 1 else other.instances < s.instances
        if np.any(changed):
            other.verifications = s.verifications
            other.tightened = s.tightened
            return other
    return None


def _adopt(s: Screened, other: Screened) -> None:
    s.rps_per_replica = other.rps_per_replica
    s.replicas, s.instances, s.plan = other.replicas, other.instances, other.plan


def _escalate(
    s: Screened, factor: float, rates: NDArray[np.float64], request: Request, spot: float
) -> None:
    """Size the candidate for less load per replica, until the fleet actually grows."""
    bigger = _resized(s, factor, rates, request, spot)
    if bigger is not None:
        _adopt(s, bigger)


def _peak_window(rates: NDArray[np.float64], hours: int) -> Window:
    """The ``hours`` consecutive hours with the most requests (the first such, on ties)."""
    hours = min(hours, len(rates))
    sums = np.convolve(rates, np.ones(hours), mode="valid")
    first = int(np.argmax(sums))
    return (first, first + hours)


def _task(
    s: Screened,
    attempt: int,
    peak: Window,
    request: Request,
    profiles: dict[str, Profile],
    workloads: dict[Window, Workload],
) -> VerifyTask:
    """The peak window, plus the hour where this fleet's replicas are busiest if outside it."""
    rates = request.demand.curve.requests_per_hour
    # load per replica; an hour with requests and no replica is the worst, an idle one the least
    per_replica = np.where(
        s.replicas > 0, rates / np.maximum(s.replicas, 1), np.where(rates > 0, np.inf, 0.0)
    )
    busiest = int(np.argmax(per_replica))
    windows: list[Window] = [peak]
    if not peak[0] <= busiest < peak[1]:
        windows.append((busiest, busiest + 1))
    seed = request.options.seed
    for w in windows:
        if w not in workloads:
            workloads[w] = request.demand.window(w[0], w[1], seed + w[0])
    c = s.candidate
    return VerifyTask(
        candidate_id=c.id,
        attempt=attempt,
        serving=c.serving(request.constraints),
        profile=profiles[c.offer.gpu],
        windows=tuple(windows),
        replicas=tuple(int(r) for r in s.replicas),
        gpus_per_replica=c.tp,
        slos=request.targets.slos,
        min_attainment=request.targets.min_attainment,
        seed=seed,
    )


def _monthly_tokens(request: Request) -> tuple[float, float]:
    """(all tokens, output tokens) a 730-hour month of this demand carries."""
    d = request.demand
    per_month = d.curve.total_requests / d.hours * 730.0
    mean_in, mean_out = float(d.inputs.mean()), float(np.maximum(d.outputs, 1).mean())
    return per_month * (mean_in + mean_out), per_month * mean_out


def _row(s: Screened, request: Request, tokens: tuple[float, float]) -> dict[str, Any]:
    v = s.verified
    slo = request.targets.strictest()
    targets = {"ttft": slo.ttft_s, "tpot": slo.tpot_s, "e2e": slo.e2e_s}
    simulated = {m: v.worst(m) if v else None for m in METRICS}
    ratios = [
        value / target
        for m in METRICS
        if (target := targets[m]) is not None and (value := simulated[m]) is not None
    ]
    monthly = s.monthly_usd
    peak_rps = float(request.demand.curve.requests_per_hour.max()) / HOUR_S
    peak_replicas = int(s.replicas.max())
    return {
        **s.candidate.describe(),
        "verified": bool(v and v.passed),
        "attempts": len(s.verifications),
        "tightened_steps": s.tightened,
        "load_headroom": s.load_headroom,
        "monthly_usd": monthly,
        "on_demand_monthly_usd": next(
            c.monthly_usd
            for c in purchase_plans(s.instances, s.candidate.offer, request.constraints, 0.0)
            if c.option == "on-demand"
        ),
        "purchase": s.plan.option,
        "usd_per_million_tokens": monthly / tokens[0] * 1e6 if tokens[0] else None,
        "usd_per_million_output_tokens": monthly / tokens[1] * 1e6 if tokens[1] else None,
        "peak_instances": int(s.instances.max()),
        "mean_instances": float(s.instances.mean()),
        "peak_replicas": peak_replicas,
        "replica_capacity_rps": s.rps_per_replica,
        "screen": s.capacity.to_dict(),
        "p99_ttft_s": simulated["ttft"],
        "p99_tpot_s": simulated["tpot"],
        "p99_e2e_s": simulated["e2e"],
        # the margin to the nearest target, and the load the fleet could still absorb at peak
        "slo_headroom": 1 - max(ratios) if ratios else None,
        "capacity_headroom": 1 - peak_rps / (peak_replicas * s.capacity.rps)
        if peak_replicas
        else None,
        "verification": v.to_dict() if v else None,
    }


def _pareto(passed: list[Screened]) -> list[int]:
    """Candidate ids on the cost-vs-P99 front: no other verified candidate is at least as
    cheap, as fast (P99 TTFT and TPOT) and as accurate (quality loss) and better in one."""
    points = []
    for s in passed:
        v = s.verified
        assert v is not None
        loss = -s.candidate.quality_delta_pct
        points.append(
            (s.candidate.id, (s.monthly_usd, v.worst("ttft") or 0.0, v.worst("tpot") or 0.0, loss))
        )
    front = []
    for cid, mine in points:
        dominated = any(
            all(a <= b for a, b in zip(other, mine, strict=True)) and other != mine
            for _, other in points
        )
        if not dominated:
            front.append(cid)
    return front
