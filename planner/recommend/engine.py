"""``recommend()``: candidates -> screen -> verify the cheapest -> the plan behind the winner."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.latency.catalog import load_catalog
from planner.latency.model import LatencyModel
from planner.latency.profile import Profile, choose_profile, load_bundled_profiles
from planner.recommend.inputs import POOL_SAMPLE, Constraints, Request
from planner.recommend.margin import margin_summary
from planner.recommend.plan import SENSITIVITY, commitment_plan, list_price_cost, spot_share
from planner.recommend.screen import (
    METRICS,
    Capacity,
    Lengths,
    hourly_instances,
    hourly_replicas,
    replica_capacity,
)
from planner.recommend.space import Candidate, Rejection, enumerate_candidates
from planner.recommend.sweep import Screened, StageProgress, Sweep, rank_key, size
from planner.recommend.tables import POOL_FIELDS
from planner.recommend.verify import Runner
from planner.simulate.metrics import SLO
from planner.workload.rates import HOUR_S
from pricing.model import PricePoint

ProfileFor = Callable[[str], Profile]


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
    # the confidence margin: level, error groups, per target the point P99 and its upper
    # bound, and what the margin costs a month (planner.recommend.margin)
    confidence: dict[str, Any] = field(default_factory=dict)
    # the winner's sizing and verifications (not in the result dictionary): the fleet search
    # (planner.recommend.mix) builds its pools from it
    winner_screened: Screened | None = None
    # aggregated vs disaggregated: which won, each one's cost and the saving
    # (planner.recommend.disagg.architecture_summary); None when not searched
    architecture: dict[str, Any] | None = None
    # per-token APIs for the model against the self-hosted fleet: the choice, the offers and
    # the break-even (planner.recommend.api); None when not asked or no offer serves the model
    api: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "demand": self.demand,
            "winner": _with_pool(self.winner, self.demand),
            "plan": self.plan,
            "ranked": self.ranked,
            "pareto": self.pareto,
            "rejected": self.rejected,
            "rejected_by_reason": dict(Counter(r["reason"] for r in self.rejected)),
            "stats": self.stats,
            "hourly": self.hourly,
            "notes": self.notes,
            "confidence": self.confidence,
            **({"architecture": self.architecture} if self.architecture else {}),
            **({"api": self.api} if self.api else {}),
        }


def _with_pool(winner: dict[str, Any] | None, demand: dict[str, Any]) -> dict[str, Any] | None:
    """The winner with its one pool listed as a fleet of pools lists them (``pools[]``), so
    a script reads every recommendation the same way."""
    if winner is None:
        return None
    if winner.get("roles"):  # a disaggregated winner: its prefill and decode pools
        return {**winner, "pools": winner["roles"], "saving_vs_single_pool_usd": 0.0}
    pool = {
        "pool": winner["model"],
        "kind": "instance",
        "models": [winner["model"]],
        **{k: winner.get(k) for k in POOL_FIELDS},
        "input_tokens_range": [0, None],
        "share_of_requests": 1.0,
        "requests": demand.get("requests"),
        "instances_peak": winner["peak_instances"],
        "monthly_usd": winner["monthly_usd"],
    }
    return {**winner, "pools": [pool], "saving_vs_single_pool_usd": 0.0}


def why_no_fleet(rejected: Sequence[Mapping[str, Any]]) -> str:
    """Why nothing was recommended, with the rejections (``Recommendation.rejected``, or a
    stored result's) counted by reason and one of each kind shown."""
    reasons = Counter(r["reason"] for r in rejected)
    if not reasons:
        return "no configuration met the targets, and none was rejected with a reason (a bug)"
    examples = []
    for reason in reasons:
        row = next(r for r in rejected if r["reason"] == reason)
        what = " ".join(
            str(row[k]) for k in ("instance_type", "model", "precision") if row.get(k) is not None
        )
        tp = f" TP{row['tp']}" if row.get("tp") is not None else ""
        examples.append(
            f"{reason} ({reasons[reason]:,}): {(what + tp).strip() or 'all'}: {row['detail']}"
        )
    return "no configuration met the targets. Rejected: " + "; ".join(examples)


def bundled_profile_for(engine: str) -> ProfileFor:
    profiles = load_bundled_profiles()
    return lambda gpu: choose_profile(profiles, gpu, engine)


@dataclass
class Screening:
    """Every candidate of a request, the screened ones sized for its demand, the rejections so
    far, the calibration profiles by GPU, and the spot share of the load above commitments."""

    candidates: list[Candidate]
    screened: list[Screened]
    rejected: list[Rejection]
    profiles: dict[str, Profile]
    spot: float


def screen(
    request: Request,
    prices: list[PricePoint],
    profile_for: ProfileFor | None = None,
    progress: StageProgress | None = None,
) -> Screening:
    """Enumerate the request's configurations and size each by the analytic screen."""
    candidates, rejected = enumerate_candidates(prices, request.constraints, load_catalog())
    spot = spot_share(request.demand, request.constraints)
    profiles: dict[str, Profile] = {}
    screened = _screen(
        request,
        candidates,
        profile_for or bundled_profile_for(request.options.engine),
        profiles,
        spot,
        rejected,
        progress,
    )
    return Screening(candidates, screened, rejected, profiles, spot)


def recommend(
    request: Request,
    prices: list[PricePoint],
    profile_for: ProfileFor | None = None,
    *,
    progress: StageProgress | None = None,
    runner: Runner | None = None,
    screening: Screening | None = None,
    api_prices: Sequence[Any] | None = None,
) -> Recommendation:
    """The cheapest verified configuration for ``request``; see the package's docstring.
    ``screening``: the request's candidates already screened (:func:`screen`), as the fleet
    search (:mod:`planner.recommend.mix`) passes them, so they are not screened twice."""
    began = time.perf_counter()
    options, constraints = request.options, request.constraints
    if screening is None:
        screening = screen(request, prices, profile_for, progress)
    candidates, screened, profiles, spot = (
        screening.candidates,
        screening.screened,
        screening.profiles,
        screening.spot,
    )
    rejected = list(screening.rejected)
    budget = constraints.budget_usd_per_month
    affordable = []
    for s in screened:
        if budget is not None and s.monthly_usd > budget:
            rejected.append(_over_budget(s, budget, "at the screened size"))
        else:
            affordable.append(s)
    affordable.sort(key=rank_key)
    screen_s = time.perf_counter() - began

    # the per-token API offers serving the model, looked up once for the overflow plan and
    # the comparison
    offers = _api_offers(request, api_prices) if options.api != "never" and api_prices else []
    # a runner given by the caller stays open for its next sweep; our own closes here
    owned = nullcontext(runner) if runner is not None else Runner(options.workers, options.dask)
    with owned as active_runner:
        sweep = Sweep(request, spot, profiles, active_runner, progress)
        verified: list[Screened] = []
        remaining: list[Screened] = []
        if options.disaggregation != "only":  # "only": aggregated fleets are not wanted
            verified, remaining = sweep.verify_cheapest(affordable)
        verify_s = time.perf_counter() - began - screen_s
        leaders = sorted((s for s in verified if s.passed), key=rank_key)
        if leaders and options.tighten_steps:
            sweep.tighten(leaders[0])
            if options.tighten_runners_up:
                for runner_up in runners_up(leaders):
                    sweep.tighten(runner_up)
                leaders.sort(key=rank_key)
        if leaders and options.growth_check:
            leaders[0].load_headroom = sweep.growth(leaders[0])
        if leaders and request.margin.on:
            sweep.point_sized(leaders[0], _point_capacity(request, leaders[0], profiles))
        disagg = None
        if options.disaggregation != "off":
            from planner.recommend.disagg import search as search_disaggregated

            # "auto": only pairs screened below the aggregated winner are worth simulating
            below = (
                leaders[0].monthly_usd
                if leaders and options.disaggregation == "auto"
                else float("inf")
            )
            if budget is not None:
                below = min(below, budget + 1e-9)
            disagg = search_disaggregated(sweep, candidates, below)
        overflow = _overflow_plan(request, offers, sweep, leaders, disagg)

    passed = []
    for s in sorted((s for s in verified if s.passed), key=rank_key):
        if budget is not None and s.monthly_usd > budget:  # grown by failed verifications
            rejected.append(
                _over_budget(
                    s, budget, f"once verified ({len(s.verifications)} simulations grew the fleet)"
                )
            )
        else:
            passed.append(s)
    failed = [s for s in verified if not s.passed]
    for s in failed:
        assert s.verified is not None
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
    tokens = monthly_tokens(request)
    ranked = [ranked_row(s, request, tokens) for s in (*passed, *failed)]
    if options.disaggregation == "only":
        passed, ranked, winner = [], [], None
    architecture = None
    disagg_winner = None
    if disagg is not None:
        from planner.recommend.disagg import architecture_summary, disagg_row

        disagg_winner = disagg.winner
        architecture = architecture_summary(disagg, winner, request, tokens)
        for pair in disagg.verified:
            if not pair.passed and pair.verified is not None:
                misses = "; ".join(m.describe() for m in pair.verified.misses)
                rejected.append(
                    Rejection(
                        "verify",
                        "disaggregated-misses-" + pair.verified.misses[0].metric,
                        f"prefill TP {pair.prefill.candidate.tp} x "
                        f"{int(pair.prefill_replicas.max())}, decode TP "
                        f"{pair.decode.candidate.tp} x {int(pair.decode_replicas.max())} at "
                        f"peak, after {len(pair.verifications)} attempt(s): {misses}",
                        pair.decode.candidate.describe(),
                    )
                )
        if disagg_winner is not None and (
            winner is None or disagg_winner.monthly_usd < winner.monthly_usd
        ):
            row = disagg_row(disagg_winner, request, tokens)
            row["id"] = max((c.id for c in candidates), default=0) + 1  # not a candidate's
            ranked.insert(0, row)
        else:
            disagg_winner = None
    if disagg_winner is not None:
        from planner.recommend.disagg import disagg_hourly, disagg_plan

        winner_row: dict[str, Any] | None = ranked[0]
        plan: dict[str, Any] | None = disagg_plan(disagg_winner, request, spot)
        hourly = disagg_hourly(disagg_winner, request)
        confidence = _disagg_confidence(request, disagg_winner)
    else:
        winner_row = ranked[0] if winner is not None else None
        plan = winner_plan(winner, request, spot)
        hourly = _hourly(winner, request)
        confidence = _confidence(request, winner, sweep)
    api = _api_choice(request, offers, screened, winner, winner_row, overflow)
    return Recommendation(
        request={
            "targets": request.targets.to_dict(),
            "constraints": constraints.to_dict(),
            "options": options.to_dict(),
            "spot_share": spot,
        },
        demand=request.demand.summary(),
        winner=winner_row,
        plan=plan,
        ranked=ranked,
        pareto=_pareto(passed, ranked[0] if disagg_winner is not None else None),
        rejected=[r.to_dict() for r in rejected],
        stats={
            "candidates": len(candidates) + sum(1 for r in rejected if r.stage == "space"),
            "screened": len(candidates),
            "passed_screen": len(screened),
            "verified": len(verified),
            "verifications": sum(len(s.verifications) for s in verified),
            "simulations": len(sweep.simulated),
            "verify_rounds": sweep.rounds,
            "peak_window_hours": list(sweep.peak),
            "runner": active_runner.description,
            "screen_s": screen_s,
            "verify_s": verify_s,  # the candidates; the rest of wall_s tightens and checks growth
            "wall_s": time.perf_counter() - began,
        },
        hourly=hourly,
        notes=[
            note
            for note in _notes(winner, screened, affordable, request)
            # a disaggregated winner answers the aggregated search's "nothing met the targets"
            if disagg_winner is None or not note.startswith(("no configuration", "nothing was"))
        ]
        + ([architecture["note"]] if architecture and architecture.get("note") else []),
        confidence=confidence,
        winner_screened=None if disagg_winner is not None else winner,
        architecture=architecture,
        api=api,
    )


RUNNER_UP_MARGIN = 1.6  # a runner-up this much dearer than the tightened leader is tightened


def runners_up(leaders: list[Screened]) -> list[Screened]:
    """The cheapest verified fleet of each GPU type other than the leader's, within
    RUNNER_UP_MARGIN of the (tightened) leader's cost: tightening takes instances off a small
    fleet a third or half at a time, so one of them may end cheaper than the leader."""
    leader = leaders[0]
    seen = {leader.candidate.offer.gpu}
    found = []
    for s in leaders[1:]:
        gpu = s.candidate.offer.gpu
        if gpu in seen:
            continue
        seen.add(gpu)
        if s.monthly_usd <= leader.monthly_usd * RUNNER_UP_MARGIN:
            found.append(s)
    return found


def _screen(
    request: Request,
    candidates: list[Candidate],
    profile_for: ProfileFor,
    profiles: dict[str, Profile],
    spot: float,
    rejected: list[Rejection],
    progress: StageProgress | None,
) -> list[Screened]:
    """Size every candidate by the analytic screen; those no load fits are rejected."""
    demand, constraints = request.demand, request.constraints
    lengths = Lengths.sample(demand.inputs, demand.outputs, POOL_SAMPLE, request.options.seed)
    margin = request.margin
    capacities: dict[tuple[Any, ...], Capacity] = {}  # per deployment and engine setting
    screened: list[Screened] = []
    for done, cand in enumerate(candidates, start=1):
        gpu = cand.offer.gpu
        if gpu not in profiles:
            profiles[gpu] = profile_for(gpu)
        # the targets shrunk by the model's error on this GPU class (as given without a margin)
        slo = margin.shrink(request.targets.strictest(), gpu)
        key = (*cand.deployment_key(), cand.max_seqs, cand.chunked_prefill)
        if key not in capacities:
            capacities[key] = capacity_of(cand, constraints, profiles[gpu], lengths, slo)
        capacity = capacities[key]
        if capacity.rps > 0:
            screened.append(size(cand, capacity, capacity.rps, request, spot))
        else:
            miss = capacity.miss(slo)
            detail = (
                _screen_miss(miss, request.targets.strictest(), margin.confidence)
                if miss
                else "no batch size fits the KV cache with room to spare"
            )
            rejected.append(
                Rejection("screen", f"misses-{capacity.binding}", detail, cand.describe())
            )
        if progress and (done % 100 == 0 or done == len(candidates)):
            progress("screen", done, len(candidates))
    return screened


def _screen_miss(miss: tuple[str, float, float], given: SLO, confidence: float | None) -> str:
    """A screen rejection's detail: the predicted P99 against the target (as given, and as
    planned against with the confidence margin)."""
    metric, value, planned = miss
    target = getattr(given, f"{metric}_s") or planned
    shrunk = (
        f" ({planned * 1e3:,.0f} ms with the {confidence:.0%} confidence margin)"
        if confidence is not None and planned < target
        else ""
    )
    return (
        f"predicted P99 {metric.upper()} {value * 1e3:,.0f} ms at the lightest load, "
        f"target {target * 1e3:,.0f} ms{shrunk}"
    )


def capacity_of(
    cand: Candidate, constraints: Constraints, profile: Profile, lengths: Lengths, slo: SLO
) -> Capacity:
    """One replica's capacity under ``slo`` by the analytic screen."""
    serving = cand.serving(constraints)
    return replica_capacity(
        LatencyModel(serving.deployment(), profile),
        lengths,
        slo,
        max_seqs=cand.max_seqs,
        chunked_prefill=cand.chunked_prefill,
        admission=serving.admission_policy()[0],
        watermark=serving.watermark(),
    )


def _point_capacity(request: Request, leader: Screened, profiles: dict[str, Profile]) -> Capacity:
    """The leader's replica capacity under the targets as given (no margin)."""
    demand, cand = request.demand, leader.candidate
    lengths = Lengths.sample(demand.inputs, demand.outputs, POOL_SAMPLE, request.options.seed)
    return capacity_of(
        cand,
        request.constraints,
        profiles[cand.offer.gpu],
        lengths,
        request.targets.strictest(),
    )


def _confidence(request: Request, winner: Screened | None, sweep: Sweep) -> dict[str, Any]:
    """The margin in the result: its level, the accuracy file, per target the winner's point
    P99 and upper bound with the error group, and what the margin costs a month."""
    margin = request.margin
    v = winner.verified if winner is not None else None
    point = {m: v.worst(m) if v else None for m in METRICS}
    upper = {m: v.worst_upper(m) if v else None for m in METRICS}
    gpu = winner.candidate.offer.gpu if winner is not None else None
    base = sweep.point_best if margin.on else winner
    cost = None
    if winner is not None and base is not None:
        cost = max(winner.monthly_usd - base.monthly_usd, 0.0)
    return {
        "level": margin.confidence,
        "accuracy_file": margin.accuracy.source,
        "accuracy_generated": margin.accuracy.generated,
        "engine": margin.engine,
        "targets": margin_summary(margin, gpu, request.targets.strictest(), point, upper),
        "margin_usd_per_month": cost,
        "point_estimate_fleet": None
        if base is None
        else {
            **{k: base.candidate.describe()[k] for k in ("id", "instance_type", "gpu", "tp")},
            "monthly_usd": base.monthly_usd,
            "peak_instances": int(base.instances.max()),
            "found": sweep.point_how if margin.on else "the recommended fleet (no margin)",
        },
        "method": (
            "the cheapest fleet simulated in this search whose point P99s met the targets "
            "(every verification, tightening step, and the winner's configuration sized "
            "without the margin); the margin's cost is the recommended fleet's monthly cost "
            "less that fleet's"
            if margin.on
            else "no margin: the fleet is sized on the point estimates"
        ),
    }


def _api_choice(
    request: Request,
    offers: Sequence[Any],
    screened: list[Screened],
    winner: Screened | None,
    winner_row: dict[str, Any] | None,
    overflow: Any = None,
) -> dict[str, Any] | None:
    """The model's per-token API offers against the self-hosted winner (planner.recommend.api):
    None when not asked (--api never), without API prices, or when no offer serves the model."""
    mode = request.options.api
    if mode == "never" or not offers:
        return None
    from planner.recommend.api import choose

    found = choose(
        request,
        offers,
        screened,
        winner,
        winner_row["monthly_usd"] if winner_row else None,
        mode,
        overflow,
    )
    return found.to_dict() if found else None


def _api_offers(request: Request, api_prices: Sequence[Any]) -> list[Any]:
    """The API offers serving the request's model (or the model it stands in for)."""
    from pricing.api import api_prices_for

    return api_prices_for(
        request.options.api_model or request.constraints.model,
        list(api_prices),
        provider=request.options.api_provider,
    )


def _overflow_plan(
    request: Request,
    offers: Sequence[Any],
    sweep: Sweep,
    leaders: list[Screened],
    disagg: Any,
) -> Any:
    """The cheapest verified overflow plan on the aggregated leader's replicas
    (planner.recommend.overflow), when the API is allowed beside self-hosting and a plan could
    undercut both; None otherwise."""
    options = request.options
    if not (leaders and offers and options.api == "allow" and options.api_overflow):
        return None
    from planner.recommend import overflow
    from planner.recommend.api import api_usd, cheapest_offer, monthly_tokens

    tokens = monthly_tokens(request)
    price = cheapest_offer(offers, tokens)
    if price is None:
        return None
    below = min(api_usd(price, tokens), leaders[0].monthly_usd)
    if disagg is not None and disagg.winner is not None:
        below = min(below, disagg.winner.monthly_usd)
    return overflow.search(request, sweep, leaders[0], price, below)


def _disagg_confidence(request: Request, winner: Any) -> dict[str, Any]:
    """The margin block for a disaggregated winner: per target its simulated P99 and upper
    bound (the margin's cost is not searched separately for disaggregated fleets)."""
    margin = request.margin
    v = winner.verified
    point = {m: v.worst(m) if v else None for m in METRICS}
    upper = {m: v.worst_upper(m) if v else None for m in METRICS}
    gpu = winner.decode.candidate.offer.gpu
    return {
        "level": margin.confidence,
        "accuracy_file": margin.accuracy.source,
        "accuracy_generated": margin.accuracy.generated,
        "engine": margin.engine,
        "targets": margin_summary(margin, gpu, request.targets.strictest(), point, upper),
        "margin_usd_per_month": None,
        "point_estimate_fleet": None,
        "method": "the disaggregated fleet's simulated P99s, checked at the margin's upper bound"
        if margin.on
        else "no margin: the fleet is sized on the point estimates",
    }


def _over_budget(s: Screened, budget: float, when: str) -> Rejection:
    return Rejection(
        "budget",
        "over-budget",
        f"${s.monthly_usd:,.0f}/month {when}, budget {dollars(budget)}",
        s.candidate.describe(),
    )


def winner_plan(winner: Screened | None, request: Request, spot: float) -> dict[str, Any] | None:
    """The winner's commitment plan, with the fleet re-sized for the sensitivity loads."""
    if winner is None:
        return None
    constraints = request.constraints
    rates = request.demand.curve.requests_per_hour
    resize = {
        label: hourly_instances(
            hourly_replicas(rates * factor, winner.rps_per_replica, constraints.min_replicas),
            winner.candidate.replicas_per_instance,
        )
        for label, factor in SENSITIVITY.items()
    }
    return commitment_plan(winner.instances, winner.candidate.offer, constraints, spot, resize)


def _hourly(winner: Screened | None, request: Request) -> dict[str, list[float]]:
    """Per hour: its start (epoch s), the requests, and the winner's replicas and instances."""
    curve = request.demand.curve
    hourly: dict[str, list[float]] = {
        "hour_start": [curve.start.timestamp() + h * HOUR_S for h in range(curve.hours)],
        "requests": curve.requests_per_hour.tolist(),
    }
    if winner is not None:
        hourly["replicas"] = winner.replicas.astype(float).tolist()
        hourly["instances"] = winner.instances.astype(float).tolist()
    return hourly


def _notes(
    winner: Screened | None,
    screened: list[Screened],
    affordable: list[Screened],
    request: Request,
) -> list[str]:
    notes: list[str] = []
    budget = request.constraints.budget_usd_per_month
    if winner is None and screened and not affordable and budget is not None:
        cheapest_screened = min(s.monthly_usd for s in screened)
        notes.append(
            f"every configuration that passed the screen costs more than the {dollars(budget)} "
            f"budget (the cheapest ${cheapest_screened:,.0f}/month); nothing was simulated"
        )
    elif winner is None and not screened:
        notes.append(
            "nothing was simulated: every configuration was ruled out before the simulation "
            "(see the rejections and their reasons)"
        )
    elif winner is None:
        notes.append(
            "no configuration met the targets in simulation: loosen a target, allow more GPU "
            "types or precisions, or raise --max-attempts"
        )
    hours = request.demand.hours
    if request.options.verify_hours > hours:
        notes.append(
            f"--verify-hours {request.options.verify_hours} is more than the demand's {hours} "
            f"hour{'s' if hours != 1 else ''}: all of it was simulated"
        )
    if hours < 24 * 7:
        notes.append(
            f"the demand covers {hours} hour{'s' if hours != 1 else ''}; commitments (1-3 "
            "years) are sized as if this pattern repeated for the whole term"
        )
    return notes


def dollars(value: float) -> str:
    """Dollars for a message: whole dollars, unless that would print a positive amount as $0."""
    return f"${value:,.0f}" if value >= 1 else f"${value:.2g}"


def monthly_tokens(request: Request) -> tuple[float, float]:
    """(all tokens, output tokens) a 730-hour month of this demand carries."""
    d = request.demand
    per_month = d.curve.total_requests / d.hours * 730.0
    mean_in, mean_out = float(d.inputs.mean()), float(np.maximum(d.outputs, 1).mean())
    return per_month * (mean_in + mean_out), per_month * mean_out


def ranked_row(s: Screened, request: Request, tokens: tuple[float, float]) -> dict[str, Any]:
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
        "on_demand_monthly_usd": list_price_cost(s.instances, s.candidate.offer).monthly_usd,
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
        # with a confidence margin: each P99's upper bound (what the targets were checked at)
        "p99_upper_s": {m: v.worst_upper(m) for m in METRICS} if v and v.upper else None,
        # the margin to the nearest target, and the load the fleet could still absorb at peak
        "slo_headroom": 1 - max(ratios) if ratios else None,
        "capacity_headroom": 1 - peak_rps / (peak_replicas * s.capacity.rps)
        if peak_replicas
        else None,
        "verification": v.to_dict() if v else None,
    }


def _pareto(passed: list[Screened], extra: dict[str, Any] | None = None) -> list[int]:
    """Candidate ids on the cost-vs-P99 front: no other verified candidate is at least as
    cheap, as fast (P99 TTFT and TPOT) and as accurate (quality loss) and better in one.
    ``extra``: a ranked row on the front too (a disaggregated winner)."""
    points = []
    if extra is not None:
        points.append(
            (
                extra["id"],
                (
                    extra["monthly_usd"],
                    extra["p99_ttft_s"] or 0.0,
                    extra["p99_tpot_s"] or 0.0,
                    -extra["quality_delta_pct"],
                ),
            )
        )
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
