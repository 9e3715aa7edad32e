"""The disaggregated search: x prefill and y decode replicas, each role's settings searched,
beside the aggregated fleets (issue 33, step 3).

For each instance type, model and precision the aggregated search screened:

1. **Roles screened.** A prefill replica's capacity is the prompt rate it serves while its
   P99 TTFT stays within the budget the target leaves after the KV transfer (and, where the
   decode side yields the first token, a decode step): service time = its prompt's prefill
   time, the P99 wait that of an M/M/1 queue at that load (conservative: a least-loaded router
   over several replicas waits less; verification and tightening correct it). A decode
   replica's capacity is Little's law at the largest batch whose step time keeps TPOT (and
   E2E) within target with room for P99 fluctuations, that fits its KV cache and max
   sequences.
2. **Pairs priced.** Every (prefill TP, decode TP, decode batch limit) pair on one instance
   type, sized per hour (x_h = rate / prefill capacity, y_h = rate / decode capacity), packed
   onto whole instances (both roles' GPUs on the same instance type) and bought with the
   cheapest purchase plan. The link is the GPU's NVLink when the fleet fits one instance,
   else the instance type's network (``data/catalog/links.csv``; a generic 100 GbE when the
   catalog has none for it, said in the notes).
3. **Verified.** The cheapest pairs screened below the aggregated winner are simulated
   (:func:`planner.simulate.disagg.simulate_disaggregated`) on the same peak window; a miss
   adds prefill replicas (TTFT), decode replicas (TPOT) or both (E2E), up to max_attempts;
   the cheapest that passes is tightened one role at a time.

Searching different GPU types per role (Splitwise) is left out here: the simulator and the
latency model take them (``planner simulate --prefill-gpu``), the search keeps both roles on
one instance type so they share one commitment plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.latency.disagg import (
    Link,
    deployment_kv_transfer,
    kv_transfer_seconds,
    load_link_table,
    node_link,
)
from planner.latency.model import LatencyModel
from planner.recommend.inputs import POOL_SAMPLE, Request
from planner.recommend.plan import (
    SENSITIVITY,
    PlanChoice,
    cheapest,
    commitment_plan,
    list_price_cost,
    purchase_plans,
)
from planner.recommend.screen import Lengths, hourly_replicas
from planner.recommend.space import Candidate
from planner.recommend.sweep import Screened, Sweep
from planner.recommend.tables import POOL_FIELDS
from planner.recommend.verify import DecodePool, Verification, VerifyTask
from planner.simulate.disagg import ENGINE_FIRST_TOKEN
from planner.workload.rates import HOUR_S

FALLBACK_LINK = "ethernet-100g"
TPOT_HEADROOM = 0.85  # the screened mean step time stays this far under the P99 TPOT target
BATCH_USE = 0.85  # share of the decode batch limit the sizing fills on average
MAX_PREFILL_LOAD = 0.95
PAIRS_TO_VERIFY = 3
PAIRS_PRICED = 40  # pairs, cheapest on demand, whose purchase plans are worked out


@dataclass(frozen=True)
class RoleCapacity:
    candidate: Candidate
    rps: float  # requests/s one replica of this role serves within its share of the targets
    detail: dict[str, Any]


@dataclass
class DisaggScreened:
    """A prefill/decode pair on one instance type, sized per hour and priced."""

    prefill: RoleCapacity
    decode: RoleCapacity
    link: Link
    link_assumed: bool
    prefill_rps: float  # sizing capacity per replica (lowered when verification misses)
    decode_rps: float
    prefill_replicas: NDArray[np.int64]
    decode_replicas: NDArray[np.int64]
    instances: NDArray[np.int64]
    plan: PlanChoice
    verifications: list[Verification] = field(default_factory=list)
    tightened: int = 0

    @property
    def monthly_usd(self) -> float:
        return self.plan.monthly_usd

    @property
    def offer_label(self) -> str:
        return self.decode.candidate.offer.label

    @property
    def passed(self) -> bool:
        return bool(self.verifications) and self.verifications[-1].passed

    @property
    def verified(self) -> Verification | None:
        return self.verifications[-1] if self.verifications else None


def _first_token_side(request: Request) -> str:
    return ENGINE_FIRST_TOKEN.get(request.options.engine, "decode")


def _link_for(cand: Candidate, instances_peak: int) -> tuple[Link, bool]:
    """NVLink inside one instance, else the instance type's network, else a generic 100 GbE
    (``True``: assumed, not from the catalog)."""
    table = load_link_table()
    if instances_peak <= 1 and (node := node_link(cand.offer.gpu, table)) is not None:
        return node, False
    for link in table.entries:
        if link.scope == "network" and cand.offer.instance_type in link.instance_types:
            return link, False
    return table.get(FALLBACK_LINK), True


def prefill_capacity(
    cand: Candidate, request: Request, latency: LatencyModel, lengths: Lengths, budget_s: float
) -> RoleCapacity | None:
    """Prompts/s one prefill replica serves with P99 TTFT (its own part) within ``budget_s``;
    None when even an idle replica cannot."""
    prompts = np.maximum(lengths.inputs, 1).astype(np.float64)
    service = latency.prefill_time(prompts)
    mean_s = float(service.mean())
    p99_s = float(np.percentile(service, 99))
    if p99_s >= budget_s or mean_s <= 0:
        return None
    # M/M/1: P(wait > t) = rho exp(-(1 - rho) t / E[s]); the P99 wait is E[s] ln(100 rho)/(1-rho)
    lo, hi = 0.0, MAX_PREFILL_LOAD
    for _ in range(40):
        rho = (lo + hi) / 2
        wait = mean_s * math.log(max(100 * rho, 1.0)) / (1 - rho)
        if p99_s + wait <= budget_s:
            lo = rho
        else:
            hi = rho
    if lo <= 0:
        return None
    return RoleCapacity(
        cand, lo / mean_s, {"prefill_mean_s": mean_s, "prefill_p99_s": p99_s, "load": lo}
    )


def _slo(request: Request, cand: Candidate) -> Any:
    """The strictest targets, shrunk by the model's error on this GPU class (the confidence
    margin), as the aggregated screen plans against them."""
    return request.margin.shrink(request.targets.strictest(), cand.offer.gpu)


def decode_capacity(
    cand: Candidate, request: Request, latency: LatencyModel, lengths: Lengths, slo: Any
) -> RoleCapacity | None:
    """Requests/s one decode replica serves (Little's law at the largest batch that keeps the
    step time under the TPOT and E2E targets with headroom, within its KV cache)."""
    deployment = latency.deployment
    mean_out = float(np.maximum(lengths.outputs, 1).mean())
    context = float(lengths.decoding_context)
    need = float(lengths.inputs.mean() + np.maximum(lengths.outputs, 1).mean())
    kv_batch = int(deployment.kv_capacity_tokens // max(need, 1.0))
    limit = min(cand.max_seqs, kv_batch)
    if limit < 1:
        return None
    step_target = math.inf
    if slo.tpot_s is not None:
        step_target = slo.tpot_s * TPOT_HEADROOM
    if slo.e2e_s is not None:
        out99 = float(np.percentile(np.maximum(lengths.outputs, 1), 99))
        ttft = slo.ttft_s or 0.0
        step_target = min(step_target, (slo.e2e_s - ttft) * TPOT_HEADROOM / max(out99, 1.0))
    batches = np.arange(1, limit + 1, dtype=np.float64)
    steps = latency.decode_time(batches, batches * context)
    fits = np.flatnonzero(steps <= step_target)
    if not fits.size:
        return None
    batch = int(batches[fits[-1]])
    step = float(steps[fits[-1]])
    rps = batch * BATCH_USE / (mean_out * step)
    return RoleCapacity(cand, rps, {"batch": batch, "step_s": step, "kv_batch_limit": kv_batch})


def _sized(
    prefill: RoleCapacity,
    decode: RoleCapacity,
    prefill_rps: float,
    decode_rps: float,
    request: Request,
    spot: float,
) -> DisaggScreened:
    rates = request.demand.curve.requests_per_hour
    x = hourly_replicas(rates, prefill_rps, request.constraints.min_replicas)
    y = hourly_replicas(rates, decode_rps, request.constraints.min_replicas)
    offer = decode.candidate.offer
    gpus = x * prefill.candidate.tp + y * decode.candidate.tp
    instances = -(-gpus // offer.gpu_count)
    plan = cheapest(purchase_plans(instances, offer, request.constraints, spot))
    link, assumed = _link_for(decode.candidate, int(instances.max()))
    return DisaggScreened(
        prefill, decode, link, assumed, prefill_rps, decode_rps, x, y, instances, plan
    )


def screen_pairs(
    request: Request,
    candidates: list[Candidate],
    profiles: dict[str, Any],
    spot: float,
) -> tuple[list[DisaggScreened], int]:
    """The prefill/decode pairs on one instance type, sized and priced, cheapest first (the
    PAIRS_PRICED cheapest on demand), and how many pairs were screened."""
    lengths = Lengths.sample(
        request.demand.inputs, request.demand.outputs, POOL_SAMPLE, request.options.seed
    )
    side = _first_token_side(request)
    constraints = request.constraints
    groups: dict[tuple[str, str, str], list[Candidate]] = {}
    for cand in candidates:
        if cand.offer.gpu in profiles:
            groups.setdefault((cand.offer.label, cand.model, cand.precision), []).append(cand)
    latencies: dict[tuple[Any, ...], LatencyModel] = {}
    rough: list[tuple[float, RoleCapacity, RoleCapacity]] = []
    for group in groups.values():
        prefills: dict[int, RoleCapacity] = {}
        decodes: list[RoleCapacity] = []
        for cand in group:
            key = (*cand.deployment_key(), cand.max_seqs)
            if key not in latencies:
                latencies[key] = LatencyModel(
                    cand.serving(constraints).deployment(), profiles[cand.offer.gpu]
                )
            latency = latencies[key]
            role = decode_capacity(cand, request, latency, lengths, _slo(request, cand))
            if role is not None:
                decodes.append(role)
        if not decodes:
            continue
        for cand in group:
            if cand.tp in prefills or not cand.chunked_prefill:
                continue
            latency = latencies[(*cand.deployment_key(), cand.max_seqs)]
            decode_dep = latencies[
                (*decodes[0].candidate.deployment_key(), decodes[0].candidate.max_seqs)
            ].deployment
            slo = _slo(request, cand)
            budget = math.inf if slo.ttft_s is None else slo.ttft_s
            link, _ = _link_for(cand, 2)  # the network: the slower of the two links
            p99_prompt = int(np.percentile(lengths.inputs, 99))
            transfer = deployment_kv_transfer(latency.deployment, decode_dep, p99_prompt)
            budget -= kv_transfer_seconds(transfer, link)
            if side == "decode" and slo.tpot_s is not None:
                budget -= slo.tpot_s
            role = prefill_capacity(cand, request, latency, lengths, budget)
            if role is not None:
                prefills[cand.tp] = role
        for p in prefills.values():
            for d in decodes:
                rough.append((_on_demand_usd(p, d, request), p, d))
    # the purchase plans (the costly part) only for the pairs cheapest on demand
    rough.sort(key=lambda r: (r[0], r[1].candidate.id, r[2].candidate.id))
    pairs = [_sized(p, d, p.rps, d.rps, request, spot) for _, p, d in rough[:PAIRS_PRICED]]
    pairs.sort(
        key=lambda s: (round(s.monthly_usd, 6), s.prefill.candidate.id, s.decode.candidate.id)
    )
    return pairs, len(rough)


def _on_demand_usd(prefill: RoleCapacity, decode: RoleCapacity, request: Request) -> float:
    """The pair's instance-hours at the on-demand price: the rough cost that ranks pairs."""
    rates = request.demand.curve.requests_per_hour
    floor = request.constraints.min_replicas
    x = hourly_replicas(rates, prefill.rps, floor)
    y = hourly_replicas(rates, decode.rps, floor)
    offer = decode.candidate.offer
    instances = -(-(x * prefill.candidate.tp + y * decode.candidate.tp) // offer.gpu_count)
    return float(instances.sum()) * offer.on_demand


def _task(sweep: Sweep, s: DisaggScreened, attempt: int) -> VerifyTask:
    request = sweep.request
    p, d = s.prefill.candidate, s.decode.candidate
    windows = (sweep.peak,)
    seed = request.options.seed
    for w in windows:
        if w not in sweep.workloads:
            sweep.workloads[w] = request.demand.window(w[0], w[1], seed + w[0])
    margin = request.margin
    return VerifyTask(
        candidate_id=p.id * 100_000 + d.id,
        attempt=attempt,
        serving=p.serving(request.constraints),
        profile=sweep.profiles[p.offer.gpu],
        windows=windows,
        replicas=tuple(int(r) for r in s.prefill_replicas),
        gpus_per_replica=p.tp,
        slos=request.targets.slos,
        min_attainment=request.targets.min_attainment,
        seed=seed,
        confidence=margin.confidence,
        factors=tuple(margin.factors(p.offer.gpu).items()),
        decode=DecodePool(
            serving=d.serving(request.constraints),
            profile=sweep.profiles[d.offer.gpu],
            replicas=tuple(int(r) for r in s.decode_replicas),
            link=s.link.name,
        ),
    )


def _grown(sweep: Sweep, s: DisaggScreened, result: Verification, factor: float) -> DisaggScreened:
    """``s`` with more replicas in the role(s) its verification missed on."""
    metrics = {m.metric for m in result.misses}
    grow_prefill = bool(metrics & {"ttft", "e2e", "refused", "attainment"})
    grow_decode = bool(metrics & {"tpot", "e2e", "refused", "attainment"})
    prefill_rps = s.prefill_rps * (factor if grow_prefill else 1.0)
    decode_rps = s.decode_rps * (factor if grow_decode else 1.0)
    return _resized(sweep, s, prefill_rps, decode_rps)


def _resized(
    sweep: Sweep, s: DisaggScreened, prefill_rps: float, decode_rps: float
) -> DisaggScreened:
    other = _sized(s.prefill, s.decode, prefill_rps, decode_rps, sweep.request, sweep.spot)
    other.verifications = list(s.verifications)
    other.tightened = s.tightened
    return other


def _verify(sweep: Sweep, pairs: list[DisaggScreened]) -> list[DisaggScreened]:
    options = sweep.request.options
    pending = list(pairs)
    done: list[DisaggScreened] = []
    for attempt in range(1, options.max_attempts + 1):
        if not pending:
            break
        results = sweep.run(
            f"verify disaggregated (attempt {attempt})", [_task(sweep, s, attempt) for s in pending]
        )
        grown = []
        for s, result in zip(pending, results, strict=True):
            s.verifications.append(result)
            if result.passed:
                done.append(s)
            elif attempt < options.max_attempts:
                grown.append(_grown(sweep, s, result, options.escalation))
            else:
                done.append(s)
        pending = grown
    return done


def _tighten(sweep: Sweep, leader: DisaggScreened) -> DisaggScreened:
    """Fewer replicas of one role at a time while the fleet still passes."""
    options = sweep.request.options
    for _ in range(options.tighten_steps):
        improved = False
        for role in ("decode", "prefill"):
            factor = 1 / 0.85
            for _ in range(20):
                prefill_rps = leader.prefill_rps * (factor if role == "prefill" else 1.0)
                decode_rps = leader.decode_rps * (factor if role == "decode" else 1.0)
                smaller = _resized(sweep, leader, prefill_rps, decode_rps)
                if smaller.monthly_usd < leader.monthly_usd or factor > 4:
                    break
                factor /= 0.85
            if smaller.monthly_usd >= leader.monthly_usd:
                continue
            task = _task(sweep, smaller, len(leader.verifications) + 1)
            tasks = [task]
            if options.tighten_margin > 0:
                tasks.append(replace(task, load_scale=1 + options.tighten_margin, attempt=0))
            results = sweep.run(f"tighten disaggregated ({role})", tasks)
            if all(r.passed for r in results):
                smaller.verifications.append(results[0])
                smaller.tightened = leader.tightened + 1
                leader = smaller
                improved = True
        if not improved:
            break
    return leader


@dataclass
class DisaggOutcome:
    """What the disaggregated search found: the winner (or None), every pair verified, how
    many were screened, and why it stopped where it did."""

    winner: DisaggScreened | None
    verified: list[DisaggScreened]
    screened: int
    note: str


def search(
    sweep: Sweep,
    candidates: list[Candidate],
    below_usd: float,
) -> DisaggOutcome:
    """The cheapest verified disaggregated fleet, trying the pairs screened below
    ``below_usd`` a month (the aggregated winner's cost, or infinity)."""
    pairs, screened = screen_pairs(sweep.request, candidates, sweep.profiles, sweep.spot)
    if not pairs:
        return DisaggOutcome(None, [], 0, "no prefill/decode pair met the targets on the screen")
    cheaper = [s for s in pairs if s.monthly_usd < below_usd]
    if not cheaper:
        return DisaggOutcome(
            None,
            [],
            screened,
            f"the cheapest disaggregated pair screened at ${pairs[0].monthly_usd:,.0f}/month, "
            f"not below ${below_usd:,.0f} (the aggregated winner's cost, or the budget): not "
            "simulated",
        )
    picked: list[DisaggScreened] = []
    seen: set[tuple[Any, ...]] = set()
    for s in cheaper:
        key = (s.offer_label, s.prefill.candidate.tp, s.decode.candidate.tp)
        if key in seen:
            continue
        seen.add(key)
        picked.append(s)
        if len(picked) >= PAIRS_TO_VERIFY:
            break
    verified = _verify(sweep, picked)
    passed = sorted((s for s in verified if s.passed), key=lambda s: s.monthly_usd)
    if not passed:
        return DisaggOutcome(
            None, verified, screened, "no disaggregated pair met the targets in simulation"
        )
    winner = _tighten(sweep, passed[0]) if sweep.request.options.tighten_steps else passed[0]
    return DisaggOutcome(winner, verified, screened, "")


def hourly_rates(request: Request) -> NDArray[np.float64]:
    return request.demand.curve.requests_per_hour / HOUR_S


# --- the result -------------------------------------------------------------------------------


def _gpu_hours(s: DisaggScreened) -> tuple[float, float]:
    return (
        float((s.prefill_replicas * s.prefill.candidate.tp).sum()),
        float((s.decode_replicas * s.decode.candidate.tp).sum()),
    )


def disagg_row(s: DisaggScreened, request: Request, tokens: tuple[float, float]) -> dict[str, Any]:
    """The pair as a ranked row (the keys a single-pool row has, the decode role's settings at
    the top level), with ``architecture`` and a pool per role."""
    from planner.recommend.screen import METRICS

    v = s.verified
    slo = request.targets.strictest()
    simulated = {m: v.worst(m) if v else None for m in METRICS}
    targets = {"ttft": slo.ttft_s, "tpot": slo.tpot_s, "e2e": slo.e2e_s}
    ratios = [
        value / target
        for m in METRICS
        if (target := targets[m]) is not None and (value := simulated[m]) is not None
    ]
    monthly = s.monthly_usd
    per_token = monthly / tokens[0] * 1e6 if tokens[0] else None
    per_output = monthly / tokens[1] * 1e6 if tokens[1] else None
    hours = _gpu_hours(s)
    total_hours = sum(hours) or 1.0
    base = {
        **s.decode.candidate.describe(),
        "architecture": "disaggregated",
        "verified": bool(v and v.passed),
        "attempts": len(s.verifications),
        "tightened_steps": s.tightened,
        "load_headroom": None,
        "monthly_usd": monthly,
        "on_demand_monthly_usd": list_price_cost(s.instances, s.decode.candidate.offer).monthly_usd,
        "purchase": s.plan.option,
        "usd_per_million_tokens": per_token,
        "usd_per_million_output_tokens": per_output,
        "peak_instances": int(s.instances.max()),
        "mean_instances": float(s.instances.mean()),
        "peak_replicas": int((s.prefill_replicas + s.decode_replicas).max()),
        "replica_capacity_rps": s.decode_rps,
        "screen": {"prefill": s.prefill.detail, "decode": s.decode.detail},
        "p99_ttft_s": simulated["ttft"],
        "p99_tpot_s": simulated["tpot"],
        "p99_e2e_s": simulated["e2e"],
        "p99_upper_s": {m: v.worst_upper(m) for m in METRICS} if v and v.upper else None,
        "slo_headroom": 1 - max(ratios) if ratios else None,
        "capacity_headroom": None,
        "verification": v.to_dict() if v else None,
        "prefill_tp": s.prefill.candidate.tp,
        "decode_tp": s.decode.candidate.tp,
        "prefill_replicas_peak": int(s.prefill_replicas.max()),
        "decode_replicas_peak": int(s.decode_replicas.max()),
        "kv_link": s.link.name,
        "kv_link_assumed": s.link_assumed,
        "first_token": _first_token_side(request),
    }
    pools = []
    for role, cap, replicas, share in (
        ("prefill", s.prefill, s.prefill_replicas, hours[0] / total_hours),
        ("decode", s.decode, s.decode_replicas, hours[1] / total_hours),
    ):
        described = cap.candidate.describe()
        pool = {k: base.get(k) for k in POOL_FIELDS}
        pool.update({k: described[k] for k in POOL_FIELDS if k in described})
        pool.update(
            {
                "pool": f"{cap.candidate.model} {role}",
                "kind": "instance",
                "role": role,
                "models": [cap.candidate.model],
                "input_tokens_range": [0, None],
                "share_of_requests": 1.0,
                "requests": request.demand.summary().get("requests"),
                "replicas_peak": int(replicas.max()),
                "instances_peak": round(
                    float(replicas.max()) * cap.candidate.tp / cap.candidate.offer.gpu_count, 3
                ),
                "monthly_usd": monthly * share,
                "usd_per_million_tokens": per_token * share if per_token else None,
                "usd_per_million_output_tokens": per_output * share if per_output else None,
            }
        )
        pools.append(pool)
    # as a fleet lists its pools, the recommendation's winner lists these (engine._with_pool)
    return {**base, "roles": pools}


def disagg_plan(s: DisaggScreened, request: Request, spot: float) -> dict[str, Any]:
    """The commitment plan of the pair's instances (both roles on one instance type), with the
    fleet re-sized for the sensitivity loads."""

    resize = {}
    for label, factor in SENSITIVITY.items():
        scaled = replace(s.prefill, rps=s.prefill_rps / factor)
        other = _sized(
            scaled, s.decode, s.prefill_rps / factor, s.decode_rps / factor, request, spot
        )
        resize[label] = other.instances
    return commitment_plan(s.instances, s.decode.candidate.offer, request.constraints, spot, resize)


def disagg_hourly(s: DisaggScreened, request: Request) -> dict[str, list[float]]:
    curve = request.demand.curve
    return {
        "hour_start": [curve.start.timestamp() + h * HOUR_S for h in range(curve.hours)],
        "requests": curve.requests_per_hour.tolist(),
        "replicas": (s.prefill_replicas + s.decode_replicas).astype(float).tolist(),
        "prefill_replicas": s.prefill_replicas.astype(float).tolist(),
        "decode_replicas": s.decode_replicas.astype(float).tolist(),
        "instances": s.instances.astype(float).tolist(),
    }


def architecture_summary(
    outcome: DisaggOutcome,
    aggregated: Screened | None,
    request: Request,
    tokens: tuple[float, float],
) -> dict[str, Any]:
    """Which architecture won and by how much over the best of the other."""
    agg_usd = aggregated.monthly_usd if aggregated is not None else None
    dis = outcome.winner
    dis_usd = dis.monthly_usd if dis is not None else None
    mine: float | None
    other: float | None
    if dis_usd is not None and (agg_usd is None or dis_usd < agg_usd):
        won, other, mine = "disaggregated", agg_usd, dis_usd
    else:
        won, other, mine = "aggregated", dis_usd, agg_usd
    saving = other - mine if other is not None and mine is not None else None
    verified = [
        {
            "instance_type": s.offer_label,
            "precision": s.decode.candidate.precision,
            "prefill_tp": s.prefill.candidate.tp,
            "decode_tp": s.decode.candidate.tp,
            "decode_max_seqs": s.decode.candidate.max_seqs,
            "prefill_replicas_peak": int(s.prefill_replicas.max()),
            "decode_replicas_peak": int(s.decode_replicas.max()),
            "kv_link": s.link.name,
            "monthly_usd": s.monthly_usd,
            "passed": s.passed,
            "attempts": len(s.verifications),
            "misses": [m.describe() for m in s.verified.misses] if s.verified else [],
        }
        for s in outcome.verified
    ]
    note = outcome.note
    if dis is not None and dis.link_assumed:
        note = (
            f"the KV link of {dis.offer_label} is not in data/catalog/links.csv: a generic "
            f"{FALLBACK_LINK} was assumed"
        )
    return {
        "winner": won if mine is not None else None,
        "aggregated_monthly_usd": agg_usd,
        "disaggregated_monthly_usd": dis_usd,
        "saving_usd_per_month": saving,
        "saving_share": saving / other if saving is not None and other else None,
        "pairs_screened": outcome.screened,
        "pairs_verified": verified,
        "disaggregated": disagg_row(dis, request, tokens)
        if dis is not None and won != "disaggregated"
        else None,
        "note": note,
    }


def architecture_sentence(arch: dict[str, Any] | None) -> str | None:
    """Which architecture won, by how much over the other, in words (a result's
    ``architecture``); the note when the other was not simulated; None when not searched."""
    if not arch:
        return None
    agg, dis = arch.get("aggregated_monthly_usd"), arch.get("disaggregated_monthly_usd")
    if agg is not None and dis is not None and arch.get("winner"):
        won = arch["winner"]
        other = "aggregated" if won == "disaggregated" else "disaggregated"
        return (
            f"{won} won: ${min(agg, dis):,.0f} vs ${max(agg, dis):,.0f} per month {other} "
            f"(saves {arch['saving_share']:.0%})"
        )
    note = arch.get("note")
    return f"disaggregated: {note}" if note else None
