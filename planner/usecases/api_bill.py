"""A request log as a per-token API would bill it (``planner prices bill``; issue 34,
deliverable 2).

Per calendar month (UTC) and per model as the log names it: the requests and tokens (cached
input tokens where the log states them), and what each API offer serving that model
(:func:`pricing.api.api_prices_for`) would charge for them, the cheapest first. With a stored
forecast, the month the forecast expects is billed too: its requests per month (the mean of its
hours x 730) with each model's tokens per request and share of the log. Prices are those in
force in the store (the bundled snapshot, or a user's sheet over it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from planner.errors import UsageError
from planner.usecases import SessionScope
from pricing.costs import HOURS_PER_MONTH


@dataclass(frozen=True)
class BillRequest:
    dataset: str
    provider: str | None = None  # only this provider's offers
    model: str | None = None  # what the log's requests without a model name are
    batch: bool = False  # through the batch API (offers without a batch price left out)
    forecast: int | None = None  # also the month a stored forecast expects


@dataclass(frozen=True)
class OfferCost:
    provider: str
    offer: str
    usd: float
    source_url: str
    source_date: str


@dataclass(frozen=True)
class BillLine:
    """One month (or the forecast's month) of one logged model, and what each offer bills."""

    period: str  # "2023-11", or "forecast #3 (a month)"
    log_model: str | None
    catalog_model: str | None
    requests: float
    input_tokens: float
    output_tokens: float
    cached_tokens: float
    cached_known_share: float  # share of the requests whose log states cached tokens
    offers: tuple[OfferCost, ...]  # cheapest first; empty: no offer serves the model

    @property
    def cheapest(self) -> OfferCost | None:
        return self.offers[0] if self.offers else None


@dataclass
class Bill:
    dataset: str
    lines: list[BillLine]
    batch: bool
    provider: str | None
    notes: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, float]:
        """Per period, the cheapest offer's USD over the models that have one."""
        out: dict[str, float] = {}
        for line in self.lines:
            if line.cheapest is not None:
                out[line.period] = out.get(line.period, 0.0) + line.cheapest.usd
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "batch": self.batch,
            "provider": self.provider,
            "lines": [
                {**asdict(line), "cheapest": asdict(line.cheapest) if line.cheapest else None}
                for line in self.lines
            ],
            "totals_usd": self.totals(),
            "notes": self.notes,
        }


def _months(first_us: int, last_us: int) -> list[tuple[str, int, int]]:
    """(YYYY-MM, start, end) in microseconds for each calendar month (UTC) the span touches."""
    start = datetime.fromtimestamp(first_us / 1e6, tz=UTC).replace(
        day=1, hour=0, minute=0, second=0, microsecond=0
    )
    months = []
    while int(start.timestamp() * 1e6) <= last_us:
        nxt = start.replace(year=start.year + (start.month == 12), month=start.month % 12 + 1)
        months.append(
            (start.strftime("%Y-%m"), int(start.timestamp() * 1e6), int(nxt.timestamp() * 1e6))
        )
        start = nxt
    return months


def _offers(
    name: str | None, prices: list[Any], tokens: tuple[float, float, float], batch: bool
) -> tuple[OfferCost, ...]:
    from pricing.api import api_prices_for, cost_usd

    if name is None:
        return ()
    found = []
    for price in api_prices_for(name, prices):
        if batch and price.batch_discount is None:
            continue
        usd = cost_usd(price, tokens[0], tokens[1], tokens[2], batch=batch)
        found.append(
            OfferCost(price.provider, price.offer, usd, price.source_url, price.source_date)
        )
    return tuple(sorted(found, key=lambda o: (o.usd, o.provider, o.offer)))


def _named(totals: list[Any], model: str) -> list[Any]:
    """``totals`` with the requests that name no model counted as ``model``'s."""
    from dataclasses import replace

    return [replace(t, model=model) if t.model is None else t for t in totals]


def bill_log(request: BillRequest, sessions: SessionScope) -> Bill:
    """``request.dataset`` billed per month and logged model at every API offer serving it."""
    from planner.store.queries import get_dataset
    from planner.store.requests import request_span, token_totals
    from planner.usecases.load import stored_demand
    from pricing.api import api_prices_for, catalog_model_of_name
    from pricing.api_sheets import api_entries, ensure_api_prices, select_entries

    with sessions() as session:
        if session is None:
            raise UsageError("billing a log reads its requests from a store; none is open")
        ensure_api_prices(session)
        entries = api_entries(session)
        chosen = select_entries(entries, provider=request.provider)
        prices = [e.price for e in chosen]
        dataset = get_dataset(session, request.dataset)
        span = request_span(session, dataset.id)
        if span.first_us is None or span.last_us is None:
            raise UsageError(f"dataset {request.dataset!r} has no requests to bill")
        periods = [
            (label, token_totals(session, dataset.id, start, end))
            for label, start, end in _months(span.first_us, span.last_us)
        ]
        whole = token_totals(session, dataset.id)
        forecast = stored_demand(session, request.forecast) if request.forecast else None
    if request.model is not None:  # the log's unnamed requests are this model
        if catalog_model_of_name(request.model) is None and not api_prices_for(
            request.model, prices
        ):
            raise UsageError(
                f"--model {request.model!r}: neither a catalog model nor a model any per-token "
                "offer serves (`planner prices list --kind api`)"
            )
        periods = [(label, _named(totals, request.model)) for label, totals in periods]
        whole = _named(whole, request.model)
    lines = []
    for label, totals in periods:
        for t in totals:
            tokens = (float(t.input_tokens), float(t.output_tokens), float(t.cached_tokens))
            lines.append(
                BillLine(
                    label,
                    t.model,
                    catalog_model_of_name(t.model) if t.model else None,
                    float(t.requests),
                    *tokens,
                    t.cached_known / t.requests if t.requests else 0.0,
                    _offers(t.model, prices, tokens, request.batch),
                )
            )
    notes: list[str] = []
    if forecast is not None:
        curve = forecast.curve
        per_month = curve.total_requests / max(curve.hours, 1) * HOURS_PER_MONTH
        wanted = [t for t in whole if forecast.model is None or t.model == forecast.model]
        if not wanted:
            notes.append(
                f"forecast #{request.forecast} forecasts {forecast.model!r}, which the log does "
                "not name: its requests take the log's mix of models"
            )
            wanted = whole
        logged = sum(t.requests for t in wanted) or 1
        label = f"forecast #{request.forecast} (a month)"
        for t in wanted:
            share = t.requests / logged * per_month / t.requests if t.requests else 0.0
            tokens = (t.input_tokens * share, t.output_tokens * share, t.cached_tokens * share)
            lines.append(
                BillLine(
                    label,
                    t.model,
                    catalog_model_of_name(t.model) if t.model else None,
                    t.requests * share,
                    *tokens,
                    t.cached_known / t.requests if t.requests else 0.0,
                    _offers(t.model, prices, tokens, request.batch),
                )
            )
        notes.append(
            f"{label}: {per_month:,.0f} requests ({forecast.label}, the mean of its "
            f"{curve.hours:,} hours x {HOURS_PER_MONTH:g}), each model's tokens per request and "
            "share as in the log"
        )
    unpriced = sorted({str(line.log_model) for line in lines if not line.offers})
    if unpriced:
        notes.append(
            "no per-token offer serves: " + ", ".join(unpriced) + " (add one with `planner "
            "prices import FILE --kind api`, or name the model as an API lists it)"
        )
    if any(line.cached_known_share == 0 for line in lines if line.offers):
        notes.append(
            "the log states no cached tokens for some models: all their input is billed at "
            "the input price"
        )
    return Bill(request.dataset, lines, request.batch, request.provider, notes)
