"""Per-token APIs beside self-hosting (issue 34, step 3, first part): what the demand costs on
each API offer serving the model, which is cheaper than the verified self-hosted fleet, and the
**break-even**: the load at which the two cost the same.

Numbers in, numbers out. The API bills tokens (:func:`pricing.api.cost_usd`): a month of the
demand is its requests per hour x 730 hours with the demand's mean input and output tokens. The
self-hosted fleet at another load is the cheapest of the screened configurations re-sized for
it (:func:`self_hosted_usd`), corrected as verification corrected the winner. API cost grows
with the load in a straight line, the fleet's in steps from its floor (one replica all month),
so below the break-even the API is cheaper and above it self-hosting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.recommend.inputs import Request
from planner.recommend.sweep import Screened
from pricing.api import TokenPrice, cost_usd
from pricing.costs import HOURS_PER_MONTH

API_CHOICES = ("allow", "never", "only")
SCALES = np.geomspace(1e-4, 1e4, 161)  # load factors the break-even is looked for among
CURVE_FACTORS = np.geomspace(0.01, 100.0, 41)  # the cost-against-load chart's loads


@dataclass(frozen=True)
class Tokens:
    """A month of the demand: requests and tokens."""

    requests: float
    input_tokens: float
    output_tokens: float

    def scaled(self, factor: float) -> Tokens:
        return Tokens(
            self.requests * factor, self.input_tokens * factor, self.output_tokens * factor
        )


def mean_tokens(request: Request) -> tuple[float, float]:
    """A request's mean input and output tokens (at least one output token each)."""
    d = request.demand
    return float(d.inputs.mean()), float(np.maximum(d.outputs, 1).mean())


def monthly_tokens(request: Request) -> Tokens:
    """A 730-hour month of the request's demand (its mean hour, times 730)."""
    d = request.demand
    per_month = d.curve.total_requests / d.hours * HOURS_PER_MONTH
    mean_in, mean_out = mean_tokens(request)
    return Tokens(per_month, per_month * mean_in, per_month * mean_out)


def api_usd(price: TokenPrice, tokens: Tokens) -> float:
    return cost_usd(price, tokens.input_tokens, tokens.output_tokens)


class SelfHostedCost:
    """The monthly cost of the cheapest self-hosted fleet at ``factor`` x the load: every
    screened configuration re-sized as the search sizes it (each hour's replicas at its
    capacity, whole instances), at its on-demand price times the discount the winner's purchase
    plan gets, and with the winner's capacity correction from verification applied to all (what
    the simulation found the screen to be off by). Vectorized over configurations and hours;
    each load's answer is kept (the break-even and the chart ask for many of the same).
    ``lowest``: the least it can be at any load (the cheapest configuration's floor of
    replicas), which the break-even's search starts from."""

    def __init__(
        self, screened: Sequence[Screened], winner: Screened | None, request: Request
    ) -> None:
        from planner.recommend.plan import list_price_cost

        usable = [s for s in screened if s.capacity.rps > 0]
        self._known: dict[float, float] = {}
        self.rates = request.demand.curve.requests_per_hour / 3600.0
        self.floor = max(request.constraints.min_replicas, 1)
        self.usable = bool(usable)
        if not usable:
            self.lowest = math.inf
            return
        adjust, discount = 1.0, 1.0
        if winner is not None and winner.capacity.rps > 0:
            adjust = winner.rps_per_replica / winner.capacity.rps
            listed = list_price_cost(winner.instances, winner.candidate.offer).monthly_usd
            discount = winner.monthly_usd / listed if listed > 0 else 1.0
        self.rps = np.array([s.capacity.rps * adjust for s in usable])[:, None]
        self.per_instance = np.array([s.candidate.replicas_per_instance for s in usable])[:, None]
        self.hourly = np.array([s.candidate.offer.on_demand for s in usable])
        self.months = HOURS_PER_MONTH / len(self.rates) * discount
        floor_instances = np.ceil(self.floor / self.per_instance[:, 0])
        self.lowest = float((floor_instances * self.hourly).min() * len(self.rates) * self.months)

    def __call__(self, factor: float) -> float:
        key = round(math.log10(factor), 9)  # the chart's loads are points of the search's grid
        if key not in self._known:
            self._known[key] = self._at(factor)
        return self._known[key]

    def _at(self, factor: float) -> float:
        if not self.usable:
            return math.inf
        replicas = np.maximum(np.ceil(self.rates[None, :] * factor / self.rps - 1e-9), self.floor)
        instances = np.ceil(replicas / self.per_instance)
        return float((instances.sum(axis=1) * self.hourly).min() * self.months)


def self_hosted_usd(
    screened: Sequence[Screened], winner: Screened | None, request: Request
) -> SelfHostedCost:
    """The self-hosted fleet's monthly cost against the load (:class:`SelfHostedCost`)."""
    return SelfHostedCost(screened, winner, request)


@dataclass(frozen=True)
class BreakEven:
    """Where the API's and the self-hosted fleet's monthly costs cross (``None``: they do not
    within 1e-4x to 1e4x the load)."""

    load_factor: float | None
    requests_per_s: float | None  # the mean over the month, at the crossing
    tokens_per_month: float | None
    usd_per_month: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "load_factor": self.load_factor,
            "requests_per_s": self.requests_per_s,
            "tokens_per_month": self.tokens_per_month,
            "usd_per_month": self.usd_per_month,
        }


def break_even(
    price: TokenPrice,
    tokens: Tokens,
    self_cost: Callable[[float], float],
    lowest: float = 0.0,
) -> BreakEven:
    """The smallest load factor at which self-hosting costs no more than the API: the scale
    grid brackets it, bisection (on the API's straight line against the fleet's steps) finds
    it to 0.1%. ``lowest``: what self-hosting costs at least at any load; below the load where
    the API's bill reaches it the API is cheaper, so the grid starts there."""
    cost: dict[float, float] = {}
    per_load = api_usd(price, tokens)
    start = lowest / per_load if per_load > 0 and lowest > 0 else 0.0

    def gap(s: float) -> float:  # API minus self-hosted: below 0 the API is cheaper
        if s not in cost:
            cost[s] = self_cost(s)
        return api_usd(price, tokens.scaled(s)) - cost[s]

    previous = None
    grid = SCALES[max(int(np.searchsorted(SCALES, start)) - 1, 0) :]
    for s in grid:
        if gap(float(s)) >= 0:
            if previous is None:
                lo, hi = float(s), float(s)
            else:
                lo, hi = previous, float(s)
            break
        previous = float(s)
    else:
        return BreakEven(None, None, None, None)
    while hi / lo > 1.001:
        mid = math.sqrt(lo * hi)
        if gap(mid) >= 0:
            hi = mid
        else:
            lo = mid
    at = tokens.scaled(hi)
    return BreakEven(
        hi,
        at.requests / (HOURS_PER_MONTH * 3600.0),
        at.input_tokens + at.output_tokens,
        api_usd(price, at),
    )


@dataclass(frozen=True)
class ApiChoice:
    """The API offers for the model, priced on the demand, against the self-hosted fleet."""

    choice: str  # "api" or "self-hosted"
    offers: list[tuple[TokenPrice, float]]  # cheapest first, with its monthly USD
    self_hosted_usd: float | None
    break_even: BreakEven | None
    tokens: Tokens
    # the monthly cost of the best offer and of self-hosting against the load (the chart's)
    curve: list[dict[str, float]] = field(default_factory=list)
    # the overflow plan looked at (planner.recommend.overflow: its dict), and its pools
    overflow: dict[str, Any] | None = None
    overflow_pools: list[dict[str, Any]] = field(default_factory=list)
    # the API's latency as the search takes it: medians, spread, and where they come from
    latency: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        best = self.offers[0] if self.offers else None
        return {
            "choice": self.choice,
            "api_monthly_usd": best[1] if best else None,
            "self_hosted_monthly_usd": self.self_hosted_usd,
            "offer": {**best[0].to_dict(), "monthly_usd": best[1]} if best else None,
            "offers": [
                {
                    "provider": p.provider,
                    "offer": p.offer,
                    "monthly_usd": usd,
                    "source_url": p.source_url,
                    "source_date": p.source_date,
                }
                for p, usd in self.offers[:10]
            ],
            "break_even": self.break_even.to_dict() if self.break_even else None,
            # the chosen plan's API pool (none when self-hosting wins: the winner's pools stand)
            "pools": self._pools(),
            "overflow": self.overflow,
            "latency": self.latency,
            "curve": self.curve,
            "month": {
                "requests": self.tokens.requests,
                "input_tokens": self.tokens.input_tokens,
                "output_tokens": self.tokens.output_tokens,
            },
        }

    def _pools(self) -> list[dict[str, Any]]:
        if self.choice == "overflow":
            return self.overflow_pools
        if self.choice == "api" and self.offers:
            price, usd = self.offers[0]
            return [api_pool(price, self.tokens, usd)]
        return []


def api_pool(price: TokenPrice, tokens: Tokens, monthly_usd: float) -> dict[str, Any]:
    """A fleet pool served by a per-token API (``kind: "api"``), as results and reports name
    pools: the offer, its prices with their source, and the month's requests and tokens."""
    return {
        "kind": "api",
        "provider": price.provider,
        "offer": price.offer,
        "model": price.model,
        "input_usd_per_mtok": price.input_usd_per_mtok,
        "output_usd_per_mtok": price.output_usd_per_mtok,
        "source_url": price.source_url,
        "source_date": price.source_date,
        "requests_per_month": tokens.requests,
        "input_tokens_per_month": tokens.input_tokens,
        "output_tokens_per_month": tokens.output_tokens,
        "monthly_usd": monthly_usd,
    }


def choose(
    request: Request,
    offers: Sequence[TokenPrice],
    screened: Sequence[Screened],
    winner: Screened | None,
    winner_usd: float | None,
    mode: str,
    overflow: Any = None,
) -> ApiChoice | None:
    """API or self-hosting for the request's model: ``mode`` allow (the cheapest of the API,
    self-hosting and ``overflow``, a verified planner.recommend.overflow.OverflowPlan), only
    (the API), never (not asked: None). None too when no offer serves the model."""
    if mode == "never" or not offers:
        return None
    tokens = monthly_tokens(request)
    priced = sorted(((p, api_usd(p, tokens)) for p in offers), key=lambda pu: (pu[1], pu[0].offer))
    best_price, best_usd = priced[0]
    even = None
    hosted = self_hosted_usd(screened, winner, request)
    if winner_usd is not None and screened:
        even = break_even(best_price, tokens, hosted, hosted.lowest)
    cheaper_api = winner_usd is None or best_usd < winner_usd
    choice = "api" if mode == "only" or cheaper_api else "self-hosted"
    overflow_pools: list[dict[str, Any]] = []
    if (
        overflow is not None
        and overflow.passed
        and mode == "allow"
        and overflow.monthly_usd < min(best_usd, winner_usd if winner_usd is not None else math.inf)
    ):
        choice = "overflow"
        overflow_pools = overflow.pools(best_price)
    curve = []
    if winner_usd is not None and screened:
        for factor in CURVE_FACTORS:
            at = tokens.scaled(float(factor))
            curve.append(
                {
                    "load_factor": float(factor),
                    "requests_per_s": at.requests / (HOURS_PER_MONTH * 3600.0),
                    "api_usd": api_usd(best_price, at),
                    "self_hosted_usd": hosted(float(factor)),
                }
            )
    return ApiChoice(
        choice,
        priced,
        winner_usd,
        even,
        tokens,
        curve,
        overflow.to_dict() if overflow is not None else None,
        overflow_pools,
        api_latency(request),
    )


def api_latency(request: Request) -> dict[str, Any]:
    """The API's latency the search assumes or measured (``--api-latency-from``)."""
    options = request.options
    return {
        "ttft_s": options.api_ttft_s,
        "tpot_s": options.api_tpot_s,
        "sigma": options.api_sigma,
        "source": f"bench run {options.api_latency_run}"
        if options.api_latency_run
        else "assumed (--api-ttft, --api-tpot; measure the API with planner bench run)",
    }


def cheapest_offer(offers: Sequence[TokenPrice], tokens: Tokens) -> TokenPrice | None:
    """The offer that bills ``tokens`` the least (ties: by offer id)."""
    if not offers:
        return None
    return min(offers, key=lambda p: (api_usd(p, tokens), p.offer))
