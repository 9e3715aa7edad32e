"""Building a :class:`~planner.report.model.Report` from values: the stored recommendation
(its winner, plan and hourly fleet), the forecast behind its demand (the bands of the low and
high scenarios), the prices in force for the instance it buys with their price sheets, and the
calibration profile its latency came from, all loaded first as :class:`ReportInputs` (by
``planner.usecases.report``, the only part that reads the store). :func:`build` computes on
them and reads nothing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields, replace
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
import pandas as pd

from planner import __version__
from planner.errors import PlannerError, UsageError
from planner.recommend.engine import why_no_fleet
from planner.recommend.inputs import Constraints
from planner.recommend.plan import list_price_cost, purchase_plans
from planner.recommend.space import Offer, offers
from planner.report.model import ASSUMPTION_COLUMNS, Report, first_of_next_month
from planner.report.projection import (
    HOUR_S,
    HourlyLoad,
    Purchase,
    band_ratio,
    commitment_schedule,
    month_starts,
    project,
    scaled_fleet,
)
from planner.report.sensitivity import PlanningInputs, sensitivity_table
from pricing.costs import HOURS_PER_MONTH
from pricing.model import PricePoint, PurchaseOption

MAX_MONTHS = 120
FORECAST_SOURCE = re.compile(r"forecast #(\d+) at q")
# The forecast's bands by the quantile of their edge, nearest the middle first.
LOW_BANDS = (("lower_80", 0.10, "lower 80%"), ("lower_95", 0.025, "lower 95%"))
HIGH_BANDS = (("upper_80", 0.90, "upper 80%"), ("upper_95", 0.975, "upper 95%"))
NOT_INCLUDED = (
    "Not included: storage, network egress, load balancers, support plans, taxes, credits and "
    "discounts agreed outside the price sheet; all amounts are US dollars before tax."
)


@dataclass(frozen=True)
class Stored:
    """The parts of a stored recommendation a report reads."""

    id: int
    created_at: datetime
    data: dict[str, Any]
    winner: dict[str, Any]
    plan: dict[str, Any]
    constraints: Constraints
    start: datetime  # the first hour of the hourly fleet (UTC)
    requests: np.ndarray[Any, np.dtype[np.float64]]
    replicas: np.ndarray[Any, np.dtype[np.float64]]
    instances: np.ndarray[Any, np.dtype[np.float64]]

    @property
    def chosen(self) -> dict[str, Any]:
        chosen: dict[str, Any] = self.plan["chosen"]
        return chosen

    @property
    def demand(self) -> dict[str, Any]:
        demand: dict[str, Any] = self.data.get("demand") or {}
        return demand

    @property
    def spot(self) -> float:
        return float(self.data.get("request", {}).get("spot_share") or 0.0)

    @property
    def tokens_per_request(self) -> float:
        d = self.demand
        return float(d.get("mean_input_tokens") or 0.0) + float(d.get("mean_output_tokens") or 0.0)


@dataclass(frozen=True)
class SheetPrice:
    """A price in force and the price-sheet version it comes from."""

    point: PricePoint
    version_id: int


@dataclass(frozen=True)
class PriceSheet:
    """A price-sheet version behind the prices, as the report names it."""

    id: int
    label: str
    described: str  # e.g. "version 3 (snapshot: ..., 2026-11-30)"
    source: str  # where it was read from (its file or URL), else its label


@dataclass(frozen=True)
class DemandForecast:
    """The stored forecast behind a recommendation's demand."""

    id: int
    source: str
    method: str
    created_at: datetime
    demand_quantile: float | None
    scores: dict[str, Any] | None
    hours: pd.DataFrame  # its hours: ds (naive UTC), metric, mean, the bands, demand


@dataclass(frozen=True)
class Calibration:
    """The calibration profile the recommendation's latency came from, with the error it states
    (None: no record); or, when it cannot be found, why (``unknown``)."""

    name: str = ""
    engine: str = ""
    accuracy: dict[str, Any] | None = None
    unknown: str | None = None


@dataclass(frozen=True)
class ReportInputs:
    """Everything a report is built from, read from the store before anything is computed."""

    stored: Stored
    prices: list[SheetPrice]  # the prices in force for the winner's instance
    sheets: dict[int, PriceSheet]  # their versions by id
    forecast: DemandForecast | None  # the forecast behind the demand, when it is still stored
    calibration: Calibration


@dataclass(frozen=True)
class Scenarios:
    """The three loads and how the low and high ones were made."""

    loads: dict[str, HourlyLoad]
    forecast: DemandForecast | None  # the forecast behind the demand, when there is one
    method: str  # plain words, for the key assumptions
    notes: list[str]
    load_scale: float = 1.0  # the recommendation's requests over the forecast's demand


def _constraints(stored: dict[str, Any]) -> Constraints:
    """The constraints a recommendation searched with, from their stored form."""
    known = {f.name for f in fields(Constraints)}
    values: dict[str, Any] = {}
    for name, value in stored.items():
        if name not in known:
            continue
        if name == "purchase_options":
            value = tuple(PurchaseOption(v) for v in value)
        elif isinstance(value, list):
            value = tuple(value)
        values[name] = value
    return Constraints(**values)


def stored_recommendation(
    recommendation_id: int, created_at: datetime, result: dict[str, Any] | None
) -> Stored:
    """The parts of stored recommendation ``recommendation_id`` (made at ``created_at``, its
    stored ``result``) a report reads; a :class:`PlannerError` when it has no fleet to report."""
    data: dict[str, Any] = result or {}
    winner, plan = data.get("winner"), data.get("plan")
    api = data.get("api") or {}
    if (winner is None or plan is None) and api.get("choice") == "api" and api.get("pools"):
        # no self-hosted fleet met the targets, the API serves the demand: nothing but the
        # demand's hours is read (planner.report.api_report)
        winner, plan = {}, {}
    elif winner is None or plan is None:
        raise PlannerError(
            f"recommendation #{recommendation_id} has no recommended fleet, so there is nothing "
            f"to report: {why_no_fleet(data.get('rejected') or [])}"
        )
    hourly = dict(data.get("hourly") or {})
    if not winner and "requests" in hourly:
        hourly |= dict.fromkeys(("replicas", "instances"), [0.0] * len(hourly["requests"]))
    if not all(key in hourly for key in ("hour_start", "requests", "replicas", "instances")):
        raise PlannerError(
            f"recommendation #{recommendation_id} has no hourly fleet stored (made by an older "
            "planner?): run the recommendation again to report on it"
        )
    created = created_at if created_at.tzinfo else created_at.replace(tzinfo=UTC)
    return Stored(
        id=recommendation_id,
        created_at=created,
        data=data,
        winner=winner,
        plan=plan,
        constraints=_constraints(data["request"]["constraints"]),
        start=datetime.fromtimestamp(float(hourly["hour_start"][0]), UTC),
        requests=np.asarray(hourly["requests"], dtype=np.float64),
        replicas=np.asarray(hourly["replicas"], dtype=np.float64),
        instances=np.asarray(hourly["instances"], dtype=np.float64),
    )


def _offer(stored: Stored, entries: list[SheetPrice]) -> tuple[Offer, list[SheetPrice]]:
    """The winner's instance with the prices in force for it (``entries``), as the search
    groups them, and the entries (with their price-sheet versions) behind them."""
    w = stored.winner
    label = f"{w['provider']}/{w['region']}/{w['instance_type']}"
    try:
        found = [
            o for o in offers([e.point for e in entries], stored.constraints) if o.label == label
        ]
    except UsageError:
        found = []
    if not found:
        raise PlannerError(
            f"no on-demand price of {label} is in force (recommendation #{stored.id} buys it): "
            "load or import prices for it (`planner prices`) to report on this recommendation"
        )
    used = {p.key() for p in found[0].points}
    return found[0], [e for e in entries if e.point.key() in used]


def _purchase(offer: Offer, stored: Stored) -> Purchase:
    """The plan as the recommendation bought it (option and level), priced from ``offer`` by
    the same function that priced it then."""
    chosen = stored.chosen
    option = str(chosen["option"])
    choices = purchase_plans(
        stored.instances.astype(np.int64), offer, stored.constraints, stored.spot
    )
    match = next((c for c in choices if c.option == option), None)
    if match is None:
        raise PlannerError(
            f"recommendation #{stored.id} buys {offer.label} as {option}, but no {option} price "
            "for it is in force now: load or import prices with it (`planner prices`)"
        )
    level = float(chosen["commitment_level"])
    upfront = 0.0
    term = PurchaseOption(option).term_years
    if option.startswith("savings-plan"):
        plan = replace(match.plan, savings_plan_usd_per_hour=level)
        point = offer.price(PurchaseOption(option))
        if point is not None and point.upfront_usd > 0:
            # the same share of each dollar an hour is paid upfront as of the listed plan's
            upfront = min(level * point.upfront_usd / point.usd_per_hour, level * term * 8760)
    else:
        plan = replace(match.plan, reserved=round(level))
        upfront = plan.reserved * match.prices.reserved_upfront
    w = stored.winner
    return Purchase(
        w["provider"], w["region"], w["instance_type"], option, plan, match.prices, term, upfront
    )


def _bands(quantile: float) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
    """The forecast's bands just below and just above the planned quantile: (column, words)."""
    low = next((b for b in LOW_BANDS if b[1] < quantile - 1e-9), None)
    high = next((b for b in HIGH_BANDS if b[1] > quantile + 1e-9), None)
    return (low[0], low[2]) if low else None, (high[0], high[2]) if high else None


def _same_load(
    expected: HourlyLoad, why: str, run: DemandForecast | None = None, note: str = ""
) -> Scenarios:
    return Scenarios(
        {name: expected for name in ("low", "expected", "high")},
        run,
        f"{why}: the low, expected and high scenarios are the same load.",
        [note] if note else [],
    )


def forecast_id(stored: Stored) -> int | None:
    """The id of the forecast behind the recommendation's demand; None when it is no forecast."""
    found = FORECAST_SOURCE.match(str(stored.demand.get("source", "")))
    return int(found.group(1)) if found else None


def _scenarios(stored: Stored, run: DemandForecast | None) -> Scenarios:
    """Expected: the recommended fleet. Low and high: the forecast's bands either side of the
    planned quantile, hour by hour, the fleet scaled with the requests."""
    expected = HourlyLoad(stored.start, stored.requests, stored.instances)
    forecast = forecast_id(stored)
    if forecast is None:
        return _same_load(expected, "The demand is not a forecast, so it has no bands")
    if run is None:
        return _same_load(
            expected,
            f"Forecast #{forecast} is no longer stored, so its bands are unknown",
            note=f"forecast #{forecast} behind the demand is no longer stored",
        )
    frame = run.hours
    epoch = (frame["ds"] - pd.Timestamp("1970-01-01")) // pd.Timedelta(seconds=1)
    rows = pd.Series(np.arange(len(frame)), index=epoch.to_numpy())
    hours = stored.start.timestamp() + HOUR_S * np.arange(stored.requests.size)
    at = rows[~rows.index.duplicated()].reindex(hours.round().astype(np.int64))
    if at.isna().any() or frame["demand"].isna().any():
        return _same_load(
            expected,
            f"Forecast #{forecast}'s stored hours do not match the recommendation's",
            note=f"forecast #{forecast}'s hours do not cover the recommendation's demand",
        )
    index = at.to_numpy(dtype=np.int64)
    planned = frame["demand"].to_numpy(np.float64)[index]
    # the recommendation may have scaled the forecast (--load-scale): the bands scale alike
    scale = float(stored.requests.sum() / planned.sum()) if planned.sum() > 0 else 1.0
    quantile = run.demand_quantile if run.demand_quantile is not None else 0.5
    bands = dict(zip(("low", "high"), _bands(quantile), strict=True))
    min_replicas = stored.constraints.min_replicas
    per_instance = int(stored.winner.get("replicas_per_instance") or 1)
    loads = {"expected": expected}
    for name, band in bands.items():
        if band is None:
            loads[name] = expected
            continue
        edge = frame[band[0]].to_numpy(np.float64)[index] * scale
        ratio = band_ratio(stored.requests, edge, above=name == "high")
        loads[name] = HourlyLoad(
            stored.start,
            stored.requests * ratio,
            scaled_fleet(stored.replicas, ratio, min_replicas, per_instance),
        )
    low, high = bands["low"], bands["high"]
    low_words = f"the forecast's {low[1]} band" if low else "the planned load"
    high_words = f"its {high[1]} band" if high else "the planned load"
    method = (
        f"Low scenario: {low_words}; high: {high_words} (the nearest bands below and above the "
        f"planned {_ordinal(quantile * 100)} percentile), hour by hour. Each hour's replicas "
        "are scaled by the scenario's requests over the planned ones and rounded up (never "
        f"below {min_replicas}); the commitment is kept as bought."
    )
    return Scenarios(
        {k: loads[k] for k in ("low", "expected", "high")}, run, method, [], load_scale=scale
    )


def _ordinal(percent: float) -> str:
    whole = round(percent)
    if abs(percent - whole) > 1e-9:
        return f"{percent:g}th"
    suffix = "th" if 10 <= whole % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(whole % 10, "th")
    return f"{whole}{suffix}"


def _ms(seconds: Any) -> float | None:
    return float(seconds) * 1e3 if seconds is not None else None


def _targets(stored: Stored) -> dict[str, float | None]:
    """The strictest P99 target of each kind over the request classes, in ms."""
    slos = stored.data["request"]["targets"]["slos"].values()
    out: dict[str, float | None] = {}
    for kind in ("ttft", "tpot", "e2e"):
        values = [float(s[f"{kind}_s"]) for s in slos if s.get(f"{kind}_s")]
        out[kind] = min(values) * 1e3 if values else None
    return out


def _attainment(stored: Stored) -> float | None:
    verification = stored.winner.get("verification") or {}
    shares = [float(v) for v in (verification.get("attainment") or {}).values() if v is not None]
    return min(shares) if shares else None


def _purchase_words(purchase: Purchase) -> str:
    plan = purchase.plan
    if purchase.is_savings_plan:
        words = (
            f"{purchase.option} at ${plan.savings_plan_usd_per_hour:,.2f} an hour (about "
            f"{purchase.committed_instances:,.1f} instances), the rest on demand"
        )
    elif plan.reserved:
        many = "instance" if plan.reserved == 1 else "instances"
        words = f"{purchase.option} for {plan.reserved} {many}, the rest on demand"
    else:
        words = "all on demand"
    if plan.spot_share > 0:
        words += f"; {plan.spot_share:.0%} of the on-demand part on spot"
    return words


def _fleet_words(winner: dict[str, Any]) -> str:
    if winner.get("architecture") == "disaggregated":
        return (
            f"{winner['provider']}/{winner['region']}/{winner['instance_type']}, "
            f"{winner['gpus_per_instance']} x {winner['gpu']}, {winner['model']} "
            f"{winner['precision']}, disaggregated: {winner['prefill_replicas_peak']} prefill "
            f"replica(s) of TP {winner['prefill_tp']} and {winner['decode_replicas_peak']} "
            f"decode replica(s) of TP {winner['decode_tp']} at peak, the KV cache over "
            f"{winner['kv_link']}"
        )
    per = int(winner.get("replicas_per_instance") or 1)
    replicas = f", {per} replicas an instance" if per > 1 else ""
    return (
        f"{winner['provider']}/{winner['region']}/{winner['instance_type']}, "
        f"{winner['gpus_per_instance']} x {winner['gpu']}, {winner['model']} "
        f"{winner['precision']}, TP {winner['tp']}{replicas}"
    )


def _money(value: float) -> str:
    return f"${value:,.4f}" if value < 10 else f"${value:,.2f}"


def _prices_words(purchase: Purchase) -> str:
    p = purchase.prices
    parts = [f"on-demand {_money(p.on_demand)} an instance-hour"]
    if purchase.is_savings_plan and p.savings_plan:
        parts.append(f"{purchase.option} {_money(p.savings_plan)} an instance-hour")
    elif purchase.committed and p.reserved:
        upfront = (
            f", of which {_money(p.reserved_upfront)} an instance paid upfront per term"
            if p.reserved_upfront
            else ", no upfront"
        )
        parts.append(f"{purchase.option} {_money(p.reserved)} an instance-hour{upfront}")
    if p.spot and purchase.plan.spot_share > 0:
        parts.append(f"spot {_money(p.spot)} an instance-hour")
    return "; ".join(parts)


@dataclass(frozen=True)
class Sources:
    """Where the figures come from, in words: price sheets, calibration, forecast scores."""

    prices: list[tuple[str, str, str]]  # (item, value, source) rows
    prices_sentence: str
    latency: tuple[str, str]  # (value, source)
    latency_sentence: str
    forecast: tuple[str, str] | None


def _price_sources(
    sheets: dict[int, PriceSheet], entries: list[SheetPrice]
) -> tuple[list[tuple[str, str, str]], str]:
    rows = []
    versions = []
    for version_id in sorted({e.version_id for e in entries}):
        version = sheets[version_id]
        dates = sorted({e.point.effective_date for e in entries if e.version_id == version_id})
        rows.append(
            (
                "price sheet",
                f"{version.described}; prices effective {', '.join(dates)}",
                _shown_source(version.source),
            )
        )
        versions.append(f"version {version.id} ({version.label}, effective {', '.join(dates)})")
    return rows, " and ".join(versions)


def _shown_source(source: str) -> str:
    """A bundled file as its path in the repository (``data/...``), not this machine's."""
    from planner.paths import data_dir

    root = str(data_dir())
    return "data" + source[len(root) :] if source.startswith(root) else source


def _latency_source(stored: Stored, calibration: Calibration) -> tuple[tuple[str, str], str]:
    w = stored.winner
    if calibration.unknown is not None:
        return (
            (f"unknown ({calibration.unknown})", "calibration profiles"),
            "the calibration profile is unknown",
        )
    accuracy = calibration.accuracy
    heldout = (accuracy or {}).get("heldout_test") or {}
    if heldout.get("median_ape") is not None:
        error = (
            f"held-out median error {float(heldout['median_ape']):.1%}, mean "
            f"{float(heldout.get('mape') or 0):.1%} over {heldout.get('points')} points"
        )
    else:
        error = "no held-out error stated (a built-in default)"
    if accuracy:
        measured = ", ".join(accuracy.get("sources") or []) or "unstated measurements"
        fitted = accuracy.get("fitted_at") or "on an unknown date"
        where = f"{accuracy['origin']} calibration, fitted {fitted} on {measured}"
    else:
        where = "built-in calibration defaults"
    name = calibration.name
    value = f"{name} for {w['gpu']} ({calibration.engine}): {error}"
    return (value, where), f"calibration profile {name} ({error})"


def _forecast_source(run: DemandForecast | None) -> tuple[str, str] | None:
    if run is None:
        return None
    backtest = (run.scores or {}).get("backtest")
    where = f"forecast #{run.id} ({run.method}, made {run.created_at:%Y-%m-%d})"
    if not backtest:
        return "no backtest stored", where
    model, base = backtest.get("prophet") or {}, backtest.get("baseline") or {}
    beats = "beats" if backtest.get("beats_baseline") else "does not beat"
    value = (
        f"backtest MAPE {float(model.get('mape', math.nan)):.1%} vs "
        f"{float(base.get('mape', math.nan)):.1%} for the baseline "
        f"({backtest.get('baseline_name', 'baseline')}): {beats} it; the 80% band covered "
        f"{float(model.get('coverage_80', math.nan)):.0%} of the backtest's hours"
    )
    # a band widened after the backtest says so in the forecast's own notes
    widened = [n for n in (run.scores or {}).get("notes") or [] if "band" in str(n)]
    if widened:
        value += "; " + "; ".join(str(n) for n in widened)
    return value, f"{where}, {model.get('points', '?')} backtest hours"


def _load_sentence(stored: Stored, scenarios: Scenarios) -> str:
    demand = stored.demand
    hours = stored.requests.size
    span = "week by week" if hours % 168 == 0 else f"back to back ({hours} hours at a time)"
    start = f"{stored.start:%Y-%m-%d %H:%M} UTC"
    run = scenarios.forecast
    if run is not None and run.demand_quantile is not None:
        scale = scenarios.load_scale
        scaled = (
            f", times {scale:.3g} (the recommendation planned for {scale:.3g} of the "
            "forecast's requests)"
            if abs(scale - 1) > 1e-6
            else ""
        )
        return (
            f"Load follows forecast #{run.id} ({run.source}) at its "
            f"{_ordinal(run.demand_quantile * 100)} percentile{scaled}: its {hours} hours from "
            f"{start} repeated {span} over each month's hours (UTC)."
        )
    return (
        f"Load follows {demand.get('source', 'the demand')}: its {hours} "
        f"hour{'s' if hours != 1 else ''} from {start} repeated {span} over each month's "
        "hours (UTC)."
    )


def _spot_sentence(stored: Stored, purchase: Purchase) -> str:
    c = stored.constraints
    if purchase.plan.spot_share > 0:
        return (
            f"{purchase.plan.spot_share:.0%} of the load above the commitment runs on spot, "
            f"interrupted {c.spot_interruptions_per_hour:g} times per instance-hour, each "
            f"interruption served on demand for {c.spot_replace_hours * 60:g} minutes."
        )
    return "No spot capacity is planned, so spot interruptions do not change the cost."


def check_options(months: int, current_fleet_monthly_usd: float | None) -> None:
    """The report's own options: ``months`` 1 to :data:`MAX_MONTHS`, a positive current cost."""
    if not 1 <= months <= MAX_MONTHS:
        raise UsageError(f"months to project: {months}; expected 1 to {MAX_MONTHS}")
    if current_fleet_monthly_usd is not None and not (
        math.isfinite(current_fleet_monthly_usd) and current_fleet_monthly_usd > 0
    ):
        raise UsageError(
            f"the current fleet's monthly cost {current_fleet_monthly_usd:g}: expected a "
            "positive amount of dollars"
        )


def build(
    inputs: ReportInputs,
    *,
    months: int = 12,
    first_month: date | None = None,
    current_fleet_monthly_usd: float | None = None,
    built_at: datetime | None = None,
) -> Report:
    """The finance report of the stored recommendation in ``inputs``: ``months`` months from
    ``first_month`` (its month; default the month after ``built_at``, which defaults to now,
    UTC), with the savings against ``current_fleet_monthly_usd`` when given.

    Expected scenario: the recommended fleet hour by hour, its pattern repeated over each
    calendar month's real hours; low and high: the forecast's bands either side of the planned
    quantile (the same load when the demand is not a forecast). Each month is priced by
    ``pricing.costs.fleet_cost`` with the plan as bought, at the prices in force for the
    instance. Raises :class:`~planner.errors.PlannerError` when the instance has no price in
    force for the plan.
    """
    check_options(months, current_fleet_monthly_usd)
    built = built_at or datetime.now(UTC)
    built = built if built.tzinfo else built.replace(tzinfo=UTC)
    first = (
        date(first_month.year, first_month.month, 1)
        if first_month
        else first_of_next_month(built.astimezone(UTC))
    )

    stored = inputs.stored
    offer, entries = _offer(stored, inputs.prices)
    purchase = _purchase(offer, stored)
    scenarios = _scenarios(stored, inputs.forecast)
    calendar = month_starts(first, months)
    notes = list(scenarios.notes)

    # the plan at today's prices; the stored figures stand unless the prices moved since
    fleet = stored.instances.astype(np.int64)
    chosen, plan = stored.chosen, stored.plan
    monthly = float(chosen["monthly_usd"])
    on_demand_monthly = float(plan["all_on_demand_monthly_usd"])
    per_million = stored.winner.get("usd_per_million_tokens")
    now_monthly = purchase.cost(stored.instances).monthly_usd
    prices_moved = abs(now_monthly - monthly) > 1e-6 * max(1.0, monthly)
    if prices_moved:
        notes.append(
            f"prices have changed since recommendation #{stored.id} was made: its plan cost "
            f"${monthly:,.2f} a month then and ${now_monthly:,.2f} at the prices in force now, "
            "which this report uses throughout"
        )
        per_million = per_million * now_monthly / monthly if per_million and monthly else None
        monthly = now_monthly
        on_demand_monthly = list_price_cost(fleet, offer).monthly_usd
    savings = on_demand_monthly - monthly

    projection = project(scenarios.loads, purchase, calendar, stored.tokens_per_request)
    commitments = commitment_schedule(
        scenarios.loads["expected"], purchase, calendar, chosen.get("break_even_utilization")
    )
    planning = PlanningInputs(
        offer=offer,
        constraints=stored.constraints,
        spot=stored.spot,
        requests=stored.requests,
        instances=fleet,
        replica_rps=float(stored.winner["replica_capacity_rps"]),
        replicas_per_instance=int(stored.winner.get("replicas_per_instance") or 1),
    )
    stored_cases = None if prices_moved else plan.get("sensitivity")
    sensitivity = sensitivity_table(planning, purchase, stored_cases)

    targets = _targets(stored)
    current = current_fleet_monthly_usd
    summary: dict[str, Any] = {
        "monthly_usd": monthly,
        "on_demand_monthly_usd": on_demand_monthly,
        "savings_vs_on_demand_usd": savings,
        "savings_vs_on_demand_pct": savings / on_demand_monthly if on_demand_monthly else None,
        "current_fleet_monthly_usd": current,
        "savings_vs_current_usd": current - monthly if current is not None else None,
        "savings_vs_current_pct": (current - monthly) / current if current is not None else None,
        "usd_per_million_tokens": float(per_million) if per_million is not None else None,
        "slo_attainment": _attainment(stored),
        "p99_ttft_ms": _ms(stored.winner.get("p99_ttft_s")),
        "p99_tpot_ms": _ms(stored.winner.get("p99_tpot_s")),
        "p99_e2e_ms": _ms(stored.winner.get("p99_e2e_s")),
        "target_ttft_ms": targets["ttft"],
        "target_tpot_ms": targets["tpot"],
        "target_e2e_ms": targets["e2e"],
        "fleet": _fleet_words(stored.winner),
        "purchase": _purchase_words(purchase),
        "peak_instances": int(stored.instances.max()),
        "mean_instances": float(stored.instances.mean()),
        "first_month": first,
        "months": months,
        **_confidence_summary(stored),
    }

    price_rows, price_versions = _price_sources(inputs.sheets, entries)
    latency, profile_words = _latency_source(stored, inputs.calibration)
    forecast = _forecast_source(scenarios.forecast)
    key_assumptions = [
        _load_sentence(stored, scenarios),
        scenarios.method,
        f"Prices are those in force in price-sheet {price_versions}: {_prices_words(purchase)}."
        f" They are assumed not to change over the {months} months; a commitment keeps its "
        "signed rate for its whole term.",
        f"Latency was simulated at the busiest hour(s) with {profile_words}.",
        _spot_sentence(stored, purchase),
        *([margin] if (margin := _confidence_sentence(stored)) else []),
        "Each month is billed for its real hours (672 to 744); the headline monthly figures "
        f"are for an average month of {HOURS_PER_MONTH:g} hours.",
        NOT_INCLUDED,
    ]
    notes.extend(_method_notes(purchase, months))

    assumption_rows: list[tuple[str, str, str]] = [
        (
            "recommendation",
            f"#{stored.id}, made {stored.created_at:%Y-%m-%d %H:%M} UTC",
            "planner store (`planner recommendations list`)",
        ),
        ("demand", _demand_words(stored), f"recommendation #{stored.id}"),
        ("scenarios", scenarios.method, "planner.report"),
        *price_rows,
        ("prices used", _prices_words(purchase), "the price sheets above"),
        ("calibration profile", *latency),
    ]
    if margin:
        assumption_rows.append(("confidence margin", margin, _accuracy_source(stored)))
    if forecast is not None:
        assumption_rows.append(("forecast accuracy", *forecast))
    assumption_rows += [
        ("spot interruptions", _spot_sentence(stored, purchase), f"recommendation #{stored.id}"),
        (
            "hours per month",
            f"calendar hours (UTC); headline months of {HOURS_PER_MONTH:g} h",
            "planner",
        ),
        ("currency", "USD", "price sheets"),
        ("planner version", __version__, "planner"),
        ("report built", f"{built:%Y-%m-%d %H:%M} UTC", "planner"),
    ]
    return Report(
        recommendation_id=stored.id,
        title=f"GPU fleet plan: {stored.winner['model']} on {offer.label}",
        built_at=built.astimezone(UTC),
        planner_version=__version__,
        currency="USD",
        summary=summary,
        key_assumptions=key_assumptions,
        projection=projection,
        commitments=commitments,
        sensitivity=sensitivity,
        assumptions=pd.DataFrame(assumption_rows, columns=list(ASSUMPTION_COLUMNS)),
        notes=notes,
    )


def _confidence_summary(stored: Stored) -> dict[str, Any]:
    """The confidence margin's figures (None where the recommendation has none: no margin, or
    made by an older planner): the level, each P99's upper bound and the margin's cost."""
    conf = stored.data.get("confidence") or {}
    targets = conf.get("targets") or {}
    base = conf.get("point_estimate_fleet") or {}
    level = conf.get("level")
    return {
        "confidence": level,
        **{
            f"p99_{m}_upper_ms": _ms((targets.get(m) or {}).get("upper_s")) if level else None
            for m in ("ttft", "tpot", "e2e")
        },
        "margin_usd_per_month": conf.get("margin_usd_per_month") if level else None,
        "point_estimate_monthly_usd": base.get("monthly_usd") if level else None,
    }


def _confidence_sentence(stored: Stored) -> str | None:
    """The margin in words; None for a recommendation stored without one."""
    conf = stored.data.get("confidence")
    if not conf:
        return None
    level = conf.get("level")
    if level is None:
        return (
            "The fleet is sized on the latency model's point estimates, with no confidence "
            "margin for the model's error."
        )
    parts = []
    for metric, row in (conf.get("targets") or {}).items():
        if row.get("target_s") is None or row.get("upper_s") is None:
            continue
        parts.append(
            f"P99 {metric.upper()} {row['point_p99_s'] * 1e3:,.0f} ms simulated, at most "
            f"{row['upper_s'] * 1e3:,.0f} ms (target {row['target_s'] * 1e3:,.0f} ms)"
        )
    cost = conf.get("margin_usd_per_month")
    base = conf.get("point_estimate_fleet") or {}
    money = (
        f" The margin costs ${cost:,.2f} a month over the cheapest fleet meeting the targets "
        f"on the point estimates (${base.get('monthly_usd', 0):,.2f} a month)."
        if cost is not None
        else ""
    )
    return (
        f"The fleet is sized so the P99 targets hold at {level:.0%} confidence, allowing for "
        "the latency model's measured error and the simulation's sampling error: "
        + "; ".join(parts)
        + "."
        + money
    )


def _accuracy_source(stored: Stored) -> str:
    conf = stored.data.get("confidence") or {}
    source = conf.get("accuracy_file")
    if not source or source == "none":
        return f"recommendation #{stored.id}; no accuracy file: a default +-30% model error"
    return f"recommendation #{stored.id}; held-out errors from {source}"


def _demand_words(stored: Stored) -> str:
    d = stored.demand
    hours = stored.requests.size
    return (
        f"{d.get('source', 'unknown')}: {hours} hours from {stored.start:%Y-%m-%d %H:%M} UTC, "
        f"{stored.requests.sum():,.0f} requests, {stored.tokens_per_request:,.0f} tokens a "
        "request on average (input + output)"
    )


def _method_notes(purchase: Purchase, months: int) -> list[str]:
    notes = [
        "cash view: what is paid in the month, an upfront in the month its term starts; "
        "amortized view: each upfront spread evenly over its term's months",
        "tokens (input + output) are the month's requests times the mean tokens of a request, "
        "shared between the purchase options by the instance-hours each serves",
    ]
    if purchase.committed and months > purchase.term_months:
        notes.append(
            f"the {purchase.term_years}-year commitment ends within the {months} months: it is "
            "taken as renewed on the same terms (a new upfront when a term starts)"
        )
    if purchase.plan.spot_share == 0:
        notes.append(
            "the plan runs nothing on spot: the spot-interruption cases of the sensitivity cost "
            "the same as the plan"
        )
    if purchase.committed:
        notes.append(
            "a commitment's hourly commitment is its rate besides the upfront; its unused cost "
            "is the amortized commitment of the hours it covers no load (expected scenario)"
        )
    return notes
