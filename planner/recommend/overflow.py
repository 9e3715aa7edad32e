"""The overflow plan (issue 34): the base load served by a fixed self-hosted fleet bought on
commitments, the peaks above it sent to a per-token API, verified by simulation.

Between "all on the API" and "all self-hosted" there is often a cheaper third way: a few
committed replicas run full all month (the cheapest GPU-hours there are), and what they cannot
take at the peaks goes to the API, which costs nothing while idle. The router overflows by
queue: an arrival goes to the API when every replica already holds the concurrency at which the
screen found it still meets the targets (planner.simulate.fleet.Overflow).

The search is cheap, then checked: for each base fleet (whole instances, from one up to one
short of the self-hosted fleet's peak) the API's share is estimated as a fluid (each hour, the
requests above the base fleet's verified capacity), the base priced on its cheapest purchase
plan, and the cheapest total is simulated on the peak window with the API's latency and rate
limit. The simulation says whether every P99 target holds (the API's own latency counts) and
how much really overflowed: the month's API bill is the fluid estimate scaled by the simulated
share against the estimated one in those hours. A miss lowers the queue threshold and tries
again; an API whose own latency misses a target cannot carry an overflow plan at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.errors import UsageError
from planner.recommend.api import Tokens, api_pool, mean_tokens
from planner.recommend.inputs import Request
from planner.recommend.plan import PlanChoice, cheapest, purchase_plans
from planner.recommend.sweep import Screened, Sweep
from planner.recommend.verify import Verification, Window
from planner.simulate.fleet import Overflow
from pricing.api import TokenPrice, cost_usd
from pricing.costs import HOURS_PER_MONTH

ATTEMPTS = 3  # simulations of the cheapest base fleet, the queue threshold lowered after a miss
QUEUE_STEP = 0.6  # the threshold kept after a miss
MIN_MEASURED = 20  # requests a bench run needs to give the API's medians and spread
Z99 = 2.326  # the standard normal's 99th percentile: the API's P99 is its median x e^(z sigma)


@dataclass
class OverflowPlan:
    """A base fleet of ``base_replicas`` all month, the rest on the API; its cost and check."""

    fleet: Screened  # the verified self-hosted fleet whose configuration the base runs
    base_replicas: int
    base_instances: int
    queue: int  # outstanding requests per replica at which arrivals go to the API
    plan: PlanChoice  # how the base fleet is bought
    api_share_estimate: float  # requests above the base fleet's capacity, over the month
    api_share: float  # the estimate scaled by the simulated against the estimated, peak window
    api_requests: float  # requests a month on the API
    api_tokens: tuple[float, float]  # input, output tokens a month on the API
    api_usd: float
    verifications: list[Verification] = field(default_factory=list)
    rejected: str | None = None  # why no plan could be verified

    @property
    def base_usd(self) -> float:
        return self.plan.monthly_usd

    @property
    def monthly_usd(self) -> float:
        return self.base_usd + self.api_usd

    @property
    def passed(self) -> bool:
        return bool(self.verifications) and self.verifications[-1].passed

    def pools(self, price: TokenPrice) -> list[dict[str, Any]]:
        """The plan's two pools as results name them: the base fleet, the API."""
        cand = self.fleet.candidate
        base = {
            "kind": "instance",
            "instance_type": cand.offer.instance_type,
            "gpu": cand.offer.gpu,
            "provider": cand.offer.provider,
            "region": cand.offer.region,
            "tp": cand.tp,
            "replicas": self.base_replicas,
            "instances": self.base_instances,
            "purchase": self.plan.option,
            "monthly_usd": self.base_usd,
        }
        month = Tokens(self.api_requests, *self.api_tokens)
        return [base, api_pool(price, month, self.api_usd)]

    def to_dict(self) -> dict[str, Any]:
        last = self.verifications[-1] if self.verifications else None
        return {
            "configuration": self.fleet.candidate.describe(),
            "base_replicas": self.base_replicas,
            "base_instances": self.base_instances,
            "queue_threshold": self.queue,
            "purchase": self.plan.to_dict(),
            "base_monthly_usd": self.base_usd,
            "api_monthly_usd": self.api_usd,
            "monthly_usd": self.monthly_usd,
            "api_share_estimate": self.api_share_estimate,
            "api_share": self.api_share,
            "api_requests_per_month": self.api_requests,
            "api_input_tokens_per_month": self.api_tokens[0],
            "api_output_tokens_per_month": self.api_tokens[1],
            "verified": self.passed,
            "verification": last.to_dict() if last else None,
            "attempts": len(self.verifications),
            "rejected": self.rejected,
        }


def measured_api_latency(
    ttft_ms: NDArray[np.float64], tpot_ms: NDArray[np.float64], where: str
) -> tuple[float, float, float]:
    """The API's median time to first token and per output token (seconds) and their
    log-normal spread (the larger of the two), from a benchmark's successful requests
    (``where`` names it in an error)."""
    ttft = ttft_ms[np.isfinite(ttft_ms) & (ttft_ms > 0)]
    tpot = tpot_ms[np.isfinite(tpot_ms) & (tpot_ms > 0)]
    if len(ttft) < MIN_MEASURED or len(tpot) < MIN_MEASURED:
        raise UsageError(
            f"{where}: {len(ttft)} requests with a time to first token and {len(tpot)} with a "
            f"time per output token; the API's latency needs at least {MIN_MEASURED} of each"
        )
    sigma = max(float(np.std(np.log(ttft))), float(np.std(np.log(tpot))))
    return float(np.median(ttft)) / 1e3, float(np.median(tpot)) / 1e3, sigma


def summarized_api_latency(summary: dict[str, Any], where: str) -> tuple[float, float, float]:
    """The same from a benchmark's summary alone (an imported run without its requests): the
    medians, and the spread a log-normal with those medians and P99s has (the larger)."""
    values = {}
    for key in ("median_ttft_ms", "median_tpot_ms", "p99_ttft_ms", "p99_tpot_ms"):
        value = summary.get(key)
        if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise UsageError(
                f"{where}: the run has neither {MIN_MEASURED} requests nor a positive {key} "
                "in its summary to take the API's latency from"
            )
        values[key] = float(value)
    sigma = max(
        math.log(max(values["p99_ttft_ms"] / values["median_ttft_ms"], 1.0)) / Z99,
        math.log(max(values["p99_tpot_ms"] / values["median_tpot_ms"], 1.0)) / Z99,
    )
    return values["median_ttft_ms"] / 1e3, values["median_tpot_ms"] / 1e3, sigma


def api_latency_misses(request: Request, ttft_s: float, tpot_s: float, sigma: float) -> str | None:
    """The target the API's own P99 latency misses (its medians spread log-normally), if any:
    then no share of the traffic can overflow to it."""
    spread = math.exp(Z99 * sigma)
    for name, slo in request.targets.slos.items():
        if slo.ttft_s is not None and ttft_s * spread > slo.ttft_s:
            return (
                f"{name}: the API's P99 time to first token (~{ttft_s * spread * 1e3:,.0f} ms "
                f"from a {ttft_s * 1e3:,.0f} ms median) is over the {slo.ttft_s * 1e3:,.0f} ms "
                "target"
            )
        if slo.tpot_s is not None and tpot_s * spread > slo.tpot_s:
            return (
                f"{name}: the API's P99 time per output token (~{tpot_s * spread * 1e3:,.1f} ms) "
                f"is over the {slo.tpot_s * 1e3:,.1f} ms target"
            )
    return None


def _fluid_overflow(rates: NDArray[np.float64], capacity: float) -> NDArray[np.float64]:
    """Requests per hour above ``capacity`` requests/s, hour by hour."""
    return np.maximum(rates - capacity * 3600.0, 0.0)


def search(
    request: Request,
    sweep: Sweep,
    winner: Screened,
    price: TokenPrice,
    below_usd: float,
) -> OverflowPlan | None:
    """The cheapest overflow plan under ``below_usd`` (the cheaper of all-API and all
    self-hosted), verified; None when no base fleet would be cheaper on the estimate."""
    best = _cheapest_estimate(request, winner, price)
    if best is None or best.monthly_usd >= below_usd:
        return None
    options = request.options
    missed = api_latency_misses(request, options.api_ttft_s, options.api_tpot_s, options.api_sigma)
    if missed is not None:
        best.rejected = missed
        return best
    queue = max(1, math.ceil(winner.capacity.batch * _verified_ratio(winner)))
    windows = _windows(request, sweep, best.base_replicas * winner.rps_per_replica)
    hours = len(request.demand.curve.requests_per_hour)
    for attempt in range(1, ATTEMPTS + 1):
        best.queue = queue
        overflow = Overflow(
            queue=queue,
            ttft_s=options.api_ttft_s,
            tpot_s=options.api_tpot_s,
            sigma=options.api_sigma,
            rpm=price.rpm,
            tpm=price.tpm,
        )
        task = replace(
            sweep.task(winner, attempt), replicas=(best.base_replicas,) * hours, overflow=overflow
        )
        checks = sweep.run("overflow", [replace(task, windows=(w,)) for w in windows])
        best.verifications.append(_worst(checks))
        _rescale_api(best, request, winner, price, dict(zip(windows, checks, strict=True)))
        if all(c.passed for c in checks):
            return best
        queue = max(1, math.floor(queue * QUEUE_STEP))
    best.rejected = "; ".join(m.describe() for m in best.verifications[-1].misses)
    return best


def _windows(request: Request, sweep: Sweep, capacity_rps: float) -> list[Window]:
    """The hours the plan is simulated on: the peak window (the API's share at its largest),
    and the busiest hour the base fleet should carry alone (where queueing alone sends some)."""
    rates = request.demand.curve.requests_per_hour
    windows: list[Window] = [sweep.peak]
    quiet = np.flatnonzero(_fluid_overflow(rates, capacity_rps) <= 0)
    quiet = quiet[(quiet < sweep.peak[0]) | (quiet >= sweep.peak[1])]
    if len(quiet):
        hour = int(quiet[np.argmax(rates[quiet])])
        windows.append((hour, hour + 1))
    seed = request.options.seed
    for first, last in windows:
        if (first, last) not in sweep.workloads:
            sweep.workloads[(first, last)] = request.demand.window(first, last, seed + first)
    return windows


def _worst(checks: list[Verification]) -> Verification:
    """One verification for the windows: the first that missed, else the peak window's, with
    the API's counts summed."""
    chosen = next((c for c in checks if not c.passed), checks[0])
    counts: dict[str, int] = {}
    for c in checks:
        for name, value in (c.overflow or {}).items():
            counts[name] = counts.get(name, 0) + value
    windows = tuple(w for c in checks for w in c.windows)
    return replace(chosen, windows=windows, overflow=counts)


def _verified_ratio(winner: Screened) -> float:
    """How far verification moved the winner's capacity from the screen's (1: not at all)."""
    if winner.capacity.rps <= 0:
        return 1.0
    return min(1.0, winner.rps_per_replica / winner.capacity.rps)


def _cheapest_estimate(
    request: Request, winner: Screened, price: TokenPrice
) -> OverflowPlan | None:
    """Every base fleet of whole instances below the winner's peak, priced on the fluid
    estimate: the cheapest. The base runs every hour, so it is bought without spot (the
    commitment plans are what make it cheap)."""
    rates = request.demand.curve.requests_per_hour.astype(np.float64)
    total = float(rates.sum())
    if total <= 0 or winner.rps_per_replica <= 0:
        return None
    cand = winner.candidate
    per_instance = cand.replicas_per_instance
    peak_instances = int(winner.instances.max())
    mean_in, mean_out = mean_tokens(request)
    months = HOURS_PER_MONTH / len(rates)
    found: OverflowPlan | None = None
    for n in range(1, peak_instances):
        replicas = n * per_instance
        over = _fluid_overflow(rates, replicas * winner.rps_per_replica).sum()
        if over <= 0:
            break  # the base alone serves every hour: that is the self-hosted fleet
        instances = np.full(len(rates), n, dtype=np.int64)
        plan = cheapest(purchase_plans(instances, cand.offer, request.constraints, 0.0))
        tokens = (over * months * mean_in, over * months * mean_out)
        api = cost_usd(price, *tokens)
        if found is None or plan.monthly_usd + api < found.monthly_usd:
            share = over / total
            found = OverflowPlan(
                winner, replicas, n, 0, plan, share, share, over * months, tokens, api
            )
    return found


def _rescale_api(
    plan: OverflowPlan,
    request: Request,
    winner: Screened,
    price: TokenPrice,
    checks: dict[Window, Verification],
) -> None:
    """The month's API share and bill from the simulated windows. Hours the fluid estimate
    sends some load to the API: their fluid share times what the simulation of the peak window
    found against the fluid estimate for it (the queue threshold sends requests before the
    replicas are full; bursts within an hour send more). Hours it sends none: the share the
    simulation found in the busiest of them (queueing alone), for all of them, an upper bound."""
    rates = request.demand.curve.requests_per_hour.astype(np.float64)
    fluid = _fluid_overflow(rates, plan.base_replicas * winner.rps_per_replica)
    over = 0.0
    quiet_share = 0.0
    for (first, last), check in checks.items():
        simulated = float((check.overflow or {}).get("requests", 0))
        estimated = float(fluid[first:last].sum())
        served = float(rates[first:last].sum())
        if estimated > 0:
            over += float(fluid[fluid > 0].sum()) * simulated / estimated
        elif served > 0:
            quiet_share = max(quiet_share, simulated / served)
    over += quiet_share * float(rates[fluid <= 0].sum())
    if not any(float(fluid[a:b].sum()) > 0 for a, b in checks):
        over += float(fluid.sum())  # no simulated window overflowed on the estimate
    months = HOURS_PER_MONTH / len(rates)
    mean_in, mean_out = mean_tokens(request)
    plan.api_requests = over * months
    plan.api_share = min(1.0, over / float(rates.sum()))
    plan.api_tokens = (plan.api_requests * mean_in, plan.api_requests * mean_out)
    plan.api_usd = cost_usd(price, *plan.api_tokens)
